package calls

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

// Arguments are shown as JSON everywhere, but a record can hold values JSON
// cannot (a non-finite number from before ingress refused them, or written
// into a bucket by hand). No such value may break a list, a page or a
// reply: it is replaced by a marker string and named, and everything else
// is shown as it is.

// Plain converts arguments to Go values for encoding/json, replacing a
// non-finite number with the marker string "NaN", "+Inf" or "-Inf" and
// saying where (JSON pointers), in problems.
func Plain(s *structpb.Struct) (map[string]any, []string) {
	var problems []string
	var conv func(v *structpb.Value, ptr string) any
	conv = func(v *structpb.Value, ptr string) any {
		switch k := v.GetKind().(type) {
		case *structpb.Value_NumberValue:
			if f := k.NumberValue; math.IsNaN(f) || math.IsInf(f, 0) {
				problems = append(problems, fmt.Sprintf("argument %s is %v, which is not a JSON number: shown as the text %q", ptr, f, nonFinite(f)))
				return nonFinite(f)
			}
			return k.NumberValue
		case *structpb.Value_StringValue:
			return k.StringValue
		case *structpb.Value_BoolValue:
			return k.BoolValue
		case *structpb.Value_StructValue:
			m := make(map[string]any, len(k.StructValue.GetFields()))
			for key, f := range k.StructValue.GetFields() {
				m[key] = conv(f, ptr+"/"+EscapePointer(key))
			}
			return m
		case *structpb.Value_ListValue:
			l := make([]any, len(k.ListValue.GetValues()))
			for i, e := range k.ListValue.GetValues() {
				l[i] = conv(e, fmt.Sprintf("%s/%d", ptr, i))
			}
			return l
		}
		return nil
	}
	out := make(map[string]any, len(s.GetFields()))
	for key, f := range s.GetFields() {
		out[key] = conv(f, "/"+EscapePointer(key))
	}
	sort.Strings(problems)
	return out, problems
}

func nonFinite(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case f > 0:
		return "+Inf"
	}
	return "-Inf"
}

// EscapePointer escapes an object key as a JSON pointer token (RFC 6901).
func EscapePointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// PointerTokens is a JSON pointer's object keys, unescaped (RFC 6901: ~1
// is "/" and ~0 is "~"): "/opts/a~1b" is ["opts", "a/b"]. A pointer
// without its leading "/" reads as if it had one.
func PointerTokens(ptr string) []string {
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// Finite reports whether every number in s is finite, without copying.
func Finite(s *structpb.Struct) bool {
	var ok func(v *structpb.Value) bool
	ok = func(v *structpb.Value) bool {
		switch k := v.GetKind().(type) {
		case *structpb.Value_NumberValue:
			return !math.IsNaN(k.NumberValue) && !math.IsInf(k.NumberValue, 0)
		case *structpb.Value_StructValue:
			for _, f := range k.StructValue.GetFields() {
				if !ok(f) {
					return false
				}
			}
		case *structpb.Value_ListValue:
			for _, e := range k.ListValue.GetValues() {
				if !ok(e) {
					return false
				}
			}
		}
		return true
	}
	for _, f := range s.GetFields() {
		if !ok(f) {
			return false
		}
	}
	return true
}

// Showable returns rec as it can be sent as JSON and shown: rec itself when
// every value is finite (the common case costs one walk, no copy), else a
// copy whose non-finite numbers are marker strings, with Problems saying so.
func Showable(rec *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord {
	if Finite(rec.GetCall().GetArguments()) && Finite(rec.GetEditedArguments()) {
		return rec
	}
	out := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	fix := func(s *structpb.Struct) *structpb.Struct {
		m, problems := Plain(s)
		out.Problems = append(out.Problems, problems...)
		fixed, err := structpb.NewStruct(m)
		if err != nil {
			out.Problems = append(out.Problems, "the arguments cannot be shown: "+err.Error())
			return &structpb.Struct{}
		}
		return fixed
	}
	if !Finite(rec.GetCall().GetArguments()) {
		out.Call.Arguments = fix(rec.GetCall().GetArguments())
	}
	if !Finite(rec.GetEditedArguments()) {
		out.EditedArguments = fix(rec.GetEditedArguments())
	}
	return out
}

// What a list carries of one record (Abridged).
const (
	// ListArgumentsBytes bounds a listed record's arguments, edited
	// arguments and annotations together (their protobuf size); larger
	// ones are left out of the list, with a preview.
	ListArgumentsBytes = 4 << 10
	// PreviewBytes is how much of left-out arguments a preview shows.
	PreviewBytes = 200
	// ListReasonBytes bounds the call's reason in a list.
	ListReasonBytes = 1 << 10
)

// Abridged returns rec as a list carries it: Showable, and when its
// agent-written values are large, a copy without arguments, edited
// arguments and annotations (previews say what the arguments start with)
// and with the call's reason cut, flagged Abridged. However large the
// calls an agent sends, a listed record stays small, so one agent cannot
// make the list of every reviewer too large to send. rec is not changed.
func Abridged(rec *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord {
	rec = Showable(rec)
	if rec.GetPreview().GetText() != "" {
		// A list never carries a preview's text (up to
		// executor.max_preview_bytes each): its digest and kind say there is
		// one, and `get` returns it.
		p := shallow(rec.GetPreview(), "text")
		rec = shallow(rec, "preview")
		rec.Preview = p
	}
	c := rec.GetCall()
	large := proto.Size(c.GetArguments())+proto.Size(rec.GetEditedArguments())+proto.Size(c.GetAnnotations()) > ListArgumentsBytes
	long := len(c.GetReason()) > ListReasonBytes
	if !large && !long {
		return rec
	}
	var out *airlockv1.ApprovalRecord
	var call *airlockv1.ToolCall
	if large {
		out, call = shallow(rec, "call", "edited_arguments"), shallow(c, "arguments", "annotations")
		out.ArgumentsPreview = preview(c.GetArguments())
		if rec.GetEditedArguments() != nil {
			out.EditedArgumentsPreview = preview(rec.GetEditedArguments())
		}
	} else {
		out, call = shallow(rec, "call"), shallow(c)
	}
	if long {
		call.Reason = Cut(c.GetReason(), ListReasonBytes) + "…"
	}
	out.Call, out.Abridged = call, true
	return out
}

// shallow is a copy of m without the fields named in skip, sharing the
// values of the others with m (read them, never change them).
func shallow[M proto.Message](m M, skip ...protoreflect.Name) M {
	out := m.ProtoReflect().New()
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !slices.Contains(skip, fd.Name()) {
			out.Set(fd, v)
		}
		return true
	})
	return out.Interface().(M)
}

// preview is the start of s as compact JSON, cut to PreviewBytes with "…".
func preview(s *structpb.Struct) string {
	b, err := canon.JSON(s)
	if err != nil {
		return "(the arguments cannot be shown: " + err.Error() + ")"
	}
	if len(b) <= PreviewBytes {
		return string(b)
	}
	return Cut(string(b), PreviewBytes) + "…"
}

// Shorten is s cut to at most n characters, the last of them "…" when it
// was cut: for one-line summaries on cards and notifications.
func Shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Cut is s cut to at most n bytes without splitting a character.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
