package record

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/pbwire"
)

// This file renders an event's payload JSON straight from its protobuf wire
// bytes, with the same output as pbjson.Append over the decoded and redacted
// event (a test keeps them equal). It exists because rendering through
// protoreflect was the sink's largest cost. It handles what Go's encoder
// writes — fields in ascending number order, each singular field once,
// repeated fields together — and gives up (ok=false) on anything else, so
// the caller falls back to pbjson.Append: the output is the same either way.

// argMode says how arguments found at a place in the event are rendered.
type argMode struct {
	withhold bool       // every value "[WITHHELD]"
	all      bool       // every top-level value "[REDACTED]"
	paths    [][]string // JSON-pointer tokens whose value is "[REDACTED]"
}

// argPlace is where arguments sit: the body's field number, then the field
// numbers down to the Struct (0 past the end).
type argPlace [3]protowire.Number

// argModes are the (at most two) places of an event whose arguments are
// not rendered as they are.
type argModes struct {
	n     int
	place [2]argPlace
	mode  [2]argMode
}

func (a *argModes) add(p argPlace, m argMode) {
	a.place[a.n], a.mode[a.n] = p, m
	a.n++
}

func (a *argModes) at(p argPlace) argMode {
	for i := 0; i < a.n; i++ {
		if a.place[i] == p {
			return a.mode[i]
		}
	}
	return argMode{}
}

// callFields are the singular fields of a call as read from the wire
// (each field once: the transcoder refuses a repeated singular field).
type callFields struct {
	has [callFieldsKept]bool
	typ [callFieldsKept]protowire.Type
	val [callFieldsKept][]byte // as pbwire.Next gives it
}

// callFieldsKept bounds the field numbers kept: the columns read 3–10.
const callFieldsKept = 11

func (c *callFields) keep(num protowire.Number, typ protowire.Type, val []byte) {
	if num < callFieldsKept {
		c.has[num], c.typ[num], c.val[num] = true, typ, val
	}
}

// step is one step below the arguments: a struct key, or a list index.
type step struct {
	key string
	idx int // -1 for a struct key
}

// wireMsg describes one message type for the transcoder: its fields by
// number, each with what rendering it needs worked out once.
type wireMsg struct {
	fields []*wireField // by field number; nil for numbers it does not declare
	wkt    string       // "Timestamp", "Duration", "Struct", "Value", "ListValue" or ""
	ok     bool         // declaration order is field-number order, no groups
	call   bool         // airlock.v1.ToolCall: its fields are kept for the columns
}

// wireField is one field of a wireMsg.
type wireField struct {
	fd       protoreflect.FieldDescriptor
	key      []byte // `"name":`
	kind     protoreflect.Kind
	list     bool
	mapVal   *wireField     // the value of a map field
	msg      *wireMsg       // a message field's (or map value's) type
	presence bool           // explicit presence: written even when zero
	wire     protowire.Type // the wire type of its values (of each entry, for a list)
	oneof    uint64         // the bit of its (real) oneof, 0 for none
	enumJSON [][]byte       // an enum's values as JSON strings, by number (nil past the end)
}

var (
	wireMu    sync.Mutex
	wireCache = map[protoreflect.FullName]*wireMsg{}
)

// wireInfo returns the table of md, built once per message type (at the
// first event, for everything reachable from it).
func wireInfo(md protoreflect.MessageDescriptor) *wireMsg {
	wireMu.Lock()
	defer wireMu.Unlock()
	return buildWireMsg(md)
}

func buildWireMsg(md protoreflect.MessageDescriptor) *wireMsg {
	if w, ok := wireCache[md.FullName()]; ok {
		return w // also ends recursion (Struct ↔ Value): the entry exists before its fields are built
	}
	w := &wireMsg{ok: true, call: md.FullName() == "airlock.v1.ToolCall"}
	wireCache[md.FullName()] = w
	switch md.FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		w.wkt = string(md.Name())
		return w
	}
	fs := md.Fields()
	maxNum := protowire.Number(0)
	for i := 0; i < fs.Len(); i++ {
		maxNum = max(maxNum, fs.Get(i).Number())
	}
	w.fields = make([]*wireField, maxNum+1)
	oneofs := md.Oneofs()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if i > 0 && fs.Get(i-1).Number() > fd.Number() || fd.Kind() == protoreflect.GroupKind {
			w.ok = false
		}
		f := newWireField(fd)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			f.oneof = 1 << (uint(oneofs.ByName(od.Name()).Index()) % 64)
		}
		if fd.IsMap() {
			f.mapVal = newWireField(fd.MapValue())
		}
		w.fields[fd.Number()] = f
	}
	return w
}

func newWireField(fd protoreflect.FieldDescriptor) *wireField {
	f := &wireField{fd: fd, kind: fd.Kind(), list: fd.IsList(), presence: fd.HasPresence(),
		key: append(pbjson.AppendString(nil, string(fd.Name())), ':')}
	switch f.kind {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		f.wire = protowire.BytesType
	case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		f.wire = protowire.Fixed32Type
	case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		f.wire = protowire.Fixed64Type
	default:
		f.wire = protowire.VarintType
	}
	if fd.IsMap() {
		f.wire = protowire.BytesType
	}
	if f.kind == protoreflect.MessageKind && !fd.IsMap() {
		f.msg = buildWireMsg(fd.Message())
	}
	if f.kind == protoreflect.EnumKind {
		vs := fd.Enum().Values()
		for i := 0; i < vs.Len(); i++ {
			if n := vs.Get(i).Number(); n >= 0 && n < 256 {
				for int(n) >= len(f.enumJSON) {
					f.enumJSON = append(f.enumJSON, nil)
				}
				if f.enumJSON[n] == nil { // an alias keeps the first name, as ByNumber does
					f.enumJSON[n] = pbjson.AppendString(nil, string(vs.Get(i).Name()))
				}
			}
		}
	}
	return f
}

// eventWire is the table of airlock.v1.Event and everything below it.
var eventWire = sync.OnceValue(func() *wireMsg { return wireInfo(eventDesc) })

var eventDesc = (&airlockv1.Event{}).ProtoReflect().Descriptor()

// envelopeFields are Event's own fields, kept in columns, not in the payload.
func envelopeField(n protowire.Number) bool { return n <= 7 && n != fieldTime }

// wirePayload renders the payload of the event encoded in data: its time
// and body, with arguments rendered as modes says (keyed by the body's field
// number, then the field numbers down to the Struct). ok is false when the
// bytes are not in the shape this fast path handles.
func wirePayload(b []byte, data []byte, modes *argModes) ([]byte, bool) {
	return wirePayloadWith(b, data, modes, nil, nil)
}

// wirePayloadWith is wirePayload writing timestamps through ts (nil:
// none) and keeping the fields of the body's call (its field 1, when a
// ToolCall) in call (nil: not kept), so the columns need not read them again.
func wirePayloadWith(b []byte, data []byte, modes *argModes, ts *pbjson.SecondsCache, call *callFields) ([]byte, bool) {
	t := transcoder{modes: modes, ts: ts, call: call}
	out, ok := t.message(b, data, eventWire(), 0)
	return out, ok
}

// eventPayload is wirePayloadWith for an event buildWire has read (see
// transcoder.event), with t's scratch (nil: a new transcoder's): an
// arena's transcoder is used again rather than a new one zeroed, steps
// and all, for every event.
func eventPayload(t *transcoder, b, time []byte, hasTime bool, tail []byte, modes *argModes, ts *pbjson.SecondsCache, call *callFields) ([]byte, bool) {
	if t == nil {
		t = &transcoder{}
	}
	t.modes, t.ts, t.call, t.path = modes, ts, call, argPlace{}
	return t.event(b, time, hasTime, tail)
}

type transcoder struct {
	modes *argModes
	ts    *pbjson.SecondsCache // the last timestamp's seconds, or nil
	call  *callFields
	path  argPlace // body field, its field, that field's field
	steps [32]step // backing array of the path below the arguments: scratch, written before it is read
}

// message renders a message; depth is how far below Event it is.
func (t *transcoder) message(b, data []byte, w *wireMsg, depth int) ([]byte, bool) {
	if !w.ok {
		return nil, false
	}
	switch w.wkt {
	case "Timestamp", "Duration":
		return t.timeLike(b, data, w.wkt == "Timestamp")
	case "Struct":
		var key argPlace
		copy(key[:], t.path[:min(depth, 3)])
		mode := argMode{}
		if t.modes != nil {
			mode = t.modes.at(key)
		}
		return t.structWith(b, data, mode, t.steps[:0])
	case "Value", "ListValue":
		return nil, false // only reached through Struct
	}
	return t.fields(append(b, '{'), data, w, depth, true)
}

// event renders the payload of an event whose envelope buildWire has read:
// its time field's value (when it has one, hasTime) and tail, its fields
// from the first past the envelope on (all after the time: buildWire
// refuses fields out of order). It is message(b, data, eventWire(), 0)
// without walking the envelope's fields again.
func (t *transcoder) event(b, time []byte, hasTime bool, tail []byte) ([]byte, bool) {
	w := eventWire()
	if !w.ok {
		return nil, false
	}
	b = append(b, '{')
	if hasTime {
		f := w.fields[fieldTime]
		b = append(b, f.key...)
		t.path[0] = fieldTime
		var ok bool
		if b, ok = t.value(b, f, time, 0); !ok {
			return nil, false
		}
	}
	return t.fields(b, tail, w, 0, !hasTime)
}

// fieldTime is Event.time, the one field before the body that the payload
// holds.
const fieldTime = 5

// fields renders the fields of data, of a message of type w after the
// '{' already in b (first: none of its fields written yet), and the '}'.
func (t *transcoder) fields(b, data []byte, w *wireMsg, depth int, first bool) ([]byte, bool) {
	var last protowire.Number
	var oneofs uint64 // set so far: a second member would replace the first
	for len(data) > 0 {
		num, typ, val, rest, ok := pbwire.Next(data)
		if !ok {
			return nil, false
		}
		var f *wireField
		if int(num) < len(w.fields) {
			f = w.fields[num]
		}
		if num < last || (num == last && (f == nil || !f.list)) {
			return nil, false
		}
		if f == nil || depth == 0 && envelopeField(num) {
			data, last = rest, num
			continue
		}
		// A value of another wire type is an unknown field to the decoder
		// (it renders nothing, or the packed form of a list): not ours.
		if typ != f.wire {
			return nil, false
		}
		// A repeated field: all its entries, which must be contiguous.
		if f.list || f.mapVal != nil {
			if num == last {
				return nil, false
			}
			var vbuf [16][]byte
			vals := vbuf[:0]
			for len(data) > 0 {
				num2, typ2, val2, rest2, ok := pbwire.Next(data)
				if !ok || num2 != num {
					break // a malformed field is refused by the next round
				}
				if typ2 != f.wire {
					return nil, false
				}
				vals = append(vals, val2)
				data = rest2
			}
			last = num
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, f.key...)
			if f.mapVal != nil {
				b, ok = t.mapField(b, f, vals)
			} else {
				b = append(b, '[')
				for i, v := range vals {
					if i > 0 {
						b = append(b, ',')
					}
					if b, ok = t.value(b, f, v, depth); !ok {
						return nil, false
					}
				}
				b, ok = append(b, ']'), true
			}
			if !ok {
				return nil, false
			}
			continue
		}
		data, last = rest, num
		if w.call && depth == 2 && t.path[1] == fieldCall && t.call != nil {
			t.call.keep(num, typ, val)
		}
		if f.oneof != 0 {
			if oneofs&f.oneof != 0 {
				return nil, false
			}
			oneofs |= f.oneof
		}
		if !f.presence && zero(typ, val) {
			continue // proto3 implicit presence: a zero value is not set
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		if depth < 3 {
			t.path[depth] = num
		}
		if b, ok = t.value(b, f, val, depth); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

// appendUTF8 writes the string field v as appendString does, and reports
// false when it is not UTF-8 (the decoder refuses it). Text that needs no
// escaping is ASCII, so it is valid without a second look.
func appendUTF8(b, v []byte) ([]byte, bool) {
	if !canon.Verbatim(v, true) {
		if !utf8.Valid(v) {
			return nil, false
		}
		return canon.AppendJSONString(b, unsafe.String(unsafe.SliceData(v), len(v)), true), true
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"'), true
}

// zero reports whether a scalar value (as pbwire.Next gives it) is its
// type's zero value; one that does not read is not, so that value refuses
// it rather than the field being left out as unset.
func zero(typ protowire.Type, val []byte) bool {
	switch typ {
	case protowire.BytesType:
		return len(val) == 0
	case protowire.VarintType:
		v, ok := pbwire.Varint(typ, val)
		return ok && v == 0
	case protowire.Fixed32Type:
		v, ok := pbwire.Fixed32(typ, val)
		return ok && v == 0
	case protowire.Fixed64Type:
		v, ok := pbwire.Fixed64(typ, val)
		return ok && v == 0
	}
	return false
}

// value renders one value of f from val, as pbwire.Next gives it (its
// wire type is f.wire).
func (t *transcoder) value(b []byte, f *wireField, val []byte, depth int) ([]byte, bool) {
	switch f.kind {
	case protoreflect.MessageKind:
		return t.message(b, val, f.msg, depth+1)
	case protoreflect.StringKind:
		return appendUTF8(b, val)
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, val)
		return append(b, '"'), true
	case protoreflect.FloatKind:
		v, ok := pbwire.Fixed32(f.wire, val)
		if !ok {
			return nil, false
		}
		return pbjson.AppendFloat(b, float64(math.Float32frombits(v)), 32), true
	case protoreflect.DoubleKind:
		v, ok := pbwire.Fixed64(f.wire, val)
		if !ok {
			return nil, false
		}
		return pbjson.AppendFloat(b, math.Float64frombits(v), 64), true
	case protoreflect.Sfixed32Kind, protoreflect.Fixed32Kind, protoreflect.Sfixed64Kind, protoreflect.Fixed64Kind:
		return nil, false // not used by these messages
	}
	v, ok := pbwire.Varint(protowire.VarintType, val)
	if !ok {
		return nil, false
	}
	switch f.kind {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v != 0), true
	case protoreflect.Int32Kind:
		return strconv.AppendInt(b, int64(int32(v)), 10), true
	case protoreflect.Sint32Kind:
		return strconv.AppendInt(b, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10), true
	case protoreflect.Uint32Kind:
		return strconv.AppendUint(b, uint64(uint32(v)), 10), true
	case protoreflect.Int64Kind:
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(v), 10)
		return append(b, '"'), true
	case protoreflect.Sint64Kind:
		b = append(b, '"')
		b = strconv.AppendInt(b, protowire.DecodeZigZag(v), 10)
		return append(b, '"'), true
	case protoreflect.Uint64Kind:
		b = append(b, '"')
		b = strconv.AppendUint(b, v, 10)
		return append(b, '"'), true
	case protoreflect.EnumKind:
		if int32(v) >= 0 && int(int32(v)) < len(f.enumJSON) && f.enumJSON[int32(v)] != nil {
			return append(b, f.enumJSON[int32(v)]...), true
		}
		if ev := f.fd.Enum().Values().ByNumber(protoreflect.EnumNumber(int32(v))); ev != nil {
			return pbjson.AppendString(b, string(ev.Name())), true
		}
		return strconv.AppendInt(b, int64(int32(v)), 10), true
	}
	return nil, false
}

// mapField renders map entries sorted by key (string keys only).
func (t *transcoder) mapField(b []byte, f *wireField, entries [][]byte) ([]byte, bool) {
	if f.fd.MapKey().Kind() != protoreflect.StringKind {
		return nil, false
	}
	type kv struct {
		key string // a view of the bytes, read only while this call runs
		val []byte // as pbwire.Next gives it
		has bool
	}
	items := make([]kv, 0, len(entries))
	for _, ent := range entries {
		key, val, ok := pbwire.Entry(ent)
		if !ok {
			return nil, false
		}
		var it kv
		if key.Has {
			if it.key, ok = pbwire.String(key.Typ, key.Val); !ok {
				return nil, false
			}
		}
		if val.Has {
			if val.Typ != f.mapVal.wire {
				return nil, false
			}
			it.val, it.has = val.Val, true
		}
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b kv) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	b = append(b, '{')
	for i, it := range items {
		if i > 0 && items[i-1].key == it.key {
			return nil, false // a repeated key: the decoder keeps the last, keep it simple
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = pbjson.AppendString(b, it.key)
		b = append(b, ':')
		vf := f.mapVal
		if !it.has {
			// An absent value is the zero value (or an empty message).
			if vf.kind != protoreflect.StringKind {
				return nil, false
			}
			b = append(b, `""`...)
			continue
		}
		var ok bool
		if b, ok = t.value(b, vf, it.val, 4); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

func (t *transcoder) timeLike(b, data []byte, timestamp bool) ([]byte, bool) {
	var secs, nanos int64
	var last protowire.Number
	for len(data) > 0 {
		num, typ, val, rest, ok := pbwire.Next(data)
		if !ok || typ != protowire.VarintType || num <= last || num > 2 {
			return nil, false
		}
		v, _ := pbwire.Varint(typ, val)
		if num == 1 {
			secs = int64(v)
		} else {
			nanos = int64(int32(v))
		}
		last, data = num, rest
	}
	if timestamp {
		return pbjson.AppendTimestamp(b, secs, nanos, t.ts), true
	}
	return pbjson.AppendDuration(b, secs, nanos), true
}

// structWith renders a google.protobuf.Struct. path is where it sits below
// the arguments (nil: the arguments themselves).
func (t *transcoder) structWith(b, data []byte, mode argMode, path []step) ([]byte, bool) {
	type field struct {
		key []byte
		val []byte // the Value message bytes
	}
	var buf [16]field
	fields := buf[:0]
	for len(data) > 0 {
		num, typ, ent, rest, ok := pbwire.Next(data)
		if !ok || num != 1 || typ != protowire.BytesType {
			return nil, false
		}
		data = rest
		key, val, ok := pbwire.Entry(ent)
		if !ok || key.Has && key.Typ != protowire.BytesType || val.Has && val.Typ != protowire.BytesType {
			return nil, false
		}
		fields = append(fields, field{key: key.Val, val: val.Val}) // the key is checked as it is written
	}
	slices.SortFunc(fields, func(a, b field) int { return bytes.Compare(a.key, b.key) })
	b = append(b, '{')
	for i, f := range fields {
		if i > 0 && bytes.Equal(fields[i-1].key, f.key) {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		// The key is only read while this call runs: a string view of the
		// bytes saves a copy per key (the sink's hottest allocation).
		key := unsafe.String(unsafe.SliceData(f.key), len(f.key))
		var ok bool
		if b, ok = appendUTF8(b, f.key); !ok {
			return nil, false
		}
		b = append(b, ':')
		if b, ok = t.structValue(b, f.val, mode, append(path, step{key: key, idx: -1})); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

// masked reports whether the value at path is redacted, as RedactArgs
// would: a pointer token names a struct key, or a list index as
// strconv.Atoi reads it.
func (m argMode) masked(path []step) bool {
	if m.all && len(path) == 1 {
		return true
	}
	for _, p := range m.paths {
		if len(p) != len(path) {
			continue
		}
		same := true
		for i, tok := range p {
			if path[i].idx < 0 && tok != path[i].key {
				same = false
				break
			}
			if path[i].idx >= 0 {
				if n, err := strconv.Atoi(tok); err != nil || n != path[i].idx {
					same = false
					break
				}
			}
		}
		if same {
			return true
		}
	}
	return false
}

// structValue renders a google.protobuf.Value (data: its message bytes).
func (t *transcoder) structValue(b, data []byte, mode argMode, path []step) ([]byte, bool) {
	if len(path) > pbwire.MaxDepth {
		return nil, false // a step per Struct or list holding it: the decoder decides
	}
	if len(path) > 0 && mode.masked(path) {
		// Rendered, then written over: the decoder refuses an event whose
		// masked value is malformed, so this path must too.
		rendered, ok := t.structValue(b, data, argMode{}, path)
		if !ok {
			return nil, false
		}
		// Written over from b's end on, keeping the room the render grew.
		return pbjson.AppendString(rendered[:len(b)], Mask), true
	}
	if len(data) == 0 {
		if mode.withhold {
			return pbjson.AppendString(b, Withheld), true
		}
		return append(b, "null"...), true
	}
	num, typ, val, rest, ok := pbwire.Next(data)
	if !ok || len(rest) > 0 {
		return nil, false // more than one kind set
	}
	switch num {
	case 5, 6:
		if typ != protowire.BytesType {
			return nil, false
		}
		if num == 5 {
			return t.structWith(b, val, mode, path)
		}
		return t.list(b, val, mode, path)
	}
	if mode.withhold {
		return pbjson.AppendString(b, Withheld), true
	}
	switch num {
	case 1:
		return append(b, "null"...), true
	case 2:
		v, ok := pbwire.Fixed64(typ, val)
		if !ok {
			return nil, false
		}
		return pbjson.AppendFloat(b, math.Float64frombits(v), 64), true
	case 3:
		if typ != protowire.BytesType {
			return nil, false
		}
		return appendUTF8(b, val)
	case 4:
		v, ok := pbwire.Varint(typ, val)
		if !ok {
			return nil, false
		}
		return strconv.AppendBool(b, v != 0), true
	}
	return nil, false
}

func (t *transcoder) list(b, data []byte, mode argMode, path []step) ([]byte, bool) {
	b = append(b, '[')
	for i := 0; len(data) > 0; i++ {
		num, typ, v, rest, ok := pbwire.Next(data)
		if !ok || num != 1 || typ != protowire.BytesType {
			return nil, false
		}
		data = rest
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = t.structValue(b, v, mode, append(path, step{idx: i})); !ok {
			return nil, false
		}
	}
	return append(b, ']'), true
}
