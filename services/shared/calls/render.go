package calls

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/airlock-gate/airlock/services/shared/canon"
)

// ShownArgumentsBytes bounds the arguments as one page, card or CLI output
// shows them: past it they are cut, with a marker (CutMarker) pointing at
// the whole arguments. A page then costs the same whatever an agent sent.
// It is well above what limits.max_request_bytes (256 KiB) lets an agent
// send, pretty-printed, so that arguments are cut only when their shape
// (deep nesting) blows them up — and arguments a page cannot show whole
// are never approved from it.
const ShownArgumentsBytes = 1 << 20

// JSONText writes s as JSON the way encoding/json writes a map (keys
// sorted, <, > and & kept as they are), indented by indent (on one line
// when indent is ""), and stops once it has written limit bytes: whole
// reports whether nothing was cut. Its time and memory are linear in what
// it writes, never in how deeply s nests: it walks s in place (no copy of
// the arguments), and a string is cut before it is encoded. A non-finite
// number is written as the marker string "NaN", "+Inf" or "-Inf" (Plain
// names it).
func JSONText(s *structpb.Struct, indent string, limit int) (text string, whole bool) {
	w := jsonWriter{indent: indent, limit: limit}
	w.object(s, 0)
	if w.buf.Len() > limit {
		return Cut(w.buf.String(), limit), false
	}
	return w.buf.String(), !w.cut
}

// CutMarker is the line a surface shows under arguments JSONText cut:
// how much is shown of how much, and where the whole arguments are.
func CutMarker(shown int, s *structpb.Struct, where string) string {
	total := proto.Size(s)
	if b, err := canon.JSON(s); err == nil {
		total = len(b)
	}
	return fmt.Sprintf("… shown %d of %d bytes; the whole arguments: %s", shown, total, where)
}

type jsonWriter struct {
	buf    bytes.Buffer
	indent string
	limit  int
	cut    bool
}

func (w *jsonWriter) full() bool {
	if w.buf.Len() >= w.limit {
		w.cut = true
		return true
	}
	return false
}

func (w *jsonWriter) newline(depth int) {
	if w.indent == "" {
		return
	}
	w.buf.WriteByte('\n')
	for range depth {
		if w.full() {
			return
		}
		w.buf.WriteString(w.indent)
	}
}

func (w *jsonWriter) object(s *structpb.Struct, depth int) {
	fields := s.GetFields()
	if len(fields) == 0 {
		w.buf.WriteString("{}")
		return
	}
	w.buf.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(fields)) {
		if w.full() {
			return
		}
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.newline(depth + 1)
		w.leaf(k)
		w.buf.WriteByte(':')
		if w.indent != "" {
			w.buf.WriteByte(' ')
		}
		w.value(fields[k], depth+1)
	}
	w.newline(depth)
	w.buf.WriteByte('}')
}

func (w *jsonWriter) value(v *structpb.Value, depth int) {
	if w.full() {
		return
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		w.object(k.StructValue, depth)
	case *structpb.Value_ListValue:
		vals := k.ListValue.GetValues()
		if len(vals) == 0 {
			w.buf.WriteString("[]")
			return
		}
		w.buf.WriteByte('[')
		for i, e := range vals {
			if w.full() {
				return
			}
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.newline(depth + 1)
			w.value(e, depth+1)
		}
		w.newline(depth)
		w.buf.WriteByte(']')
	case *structpb.Value_StringValue:
		w.leaf(Cut(k.StringValue, w.limit-w.buf.Len()+1))
	case *structpb.Value_NumberValue:
		if f := k.NumberValue; math.IsNaN(f) || math.IsInf(f, 0) {
			w.leaf(nonFinite(f))
		} else {
			w.leaf(f)
		}
	case *structpb.Value_BoolValue:
		w.leaf(k.BoolValue)
	default:
		w.buf.WriteString("null")
	}
}

// leaf writes a string, number or bool as encoding/json writes it.
func (w *jsonWriter) leaf(v any) {
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)               // a string, finite float64 or bool always encodes
	w.buf.Truncate(w.buf.Len() - 1) // Encode's newline
}
