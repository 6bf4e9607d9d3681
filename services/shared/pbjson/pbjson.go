// Package pbjson writes protobuf messages as JSON in the protojson mapping
// (proto field names, enums by name, 64-bit integers as strings, the
// well-known types airlock uses — Timestamp, Duration, Struct, Value,
// ListValue — in their JSON form, unset fields omitted), compact, with
// fields in declaration order and map keys sorted, so the output is
// deterministic. protojson.Unmarshal reads it back to the same message, and
// tests keep the two equivalent.
//
// It exists because protojson's generic encoder is slow: it was half of the
// audit sink's CPU time, and on a call whose agent speaks JSON (whose every
// event is stored as protojson) protojson's writes and reads were most of
// what the call cost beyond a protobuf one (this writes; reading stays
// protojson's, whose strictness the intake relies on). The audit sink
// writes its payloads with Append (lenient: what protojson would refuse is
// written as best it can be, since the trail must record whatever was
// stored); everything else airlock writes in JSON — events, stored rules,
// API bodies — goes through Marshal, which refuses what protojson refuses.
package pbjson

import (
	"encoding/base64"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-gate/airlock/services/shared/canon"
)

// Append writes m as JSON (see the package comment) after b. Invalid UTF-8
// is written as U+FFFD, a Value with no kind as null and a non-finite
// number as protojson writes a float field's ("NaN", "Infinity"), where
// protojson would refuse the message.
func Append(b []byte, m protoreflect.Message) []byte {
	var e encoder
	return e.message(b, m)
}

// Marshal is protojson.MarshalOptions{UseProtoNames: true}.Marshal, faster:
// the same JSON value, refusing what protojson refuses of the messages
// airlock writes (invalid UTF-8 in a string or a map key, a timestamp
// outside years 1 to 9999 or a duration outside ±10,000 years or with
// nanoseconds out of range, a Value with no kind or a non-finite number).
// Its output differs from protojson's in whitespace and number spelling
// only: protojson makes its own spacing unstable on purpose, so no reader
// may depend on either's bytes.
func Marshal(m proto.Message) ([]byte, error) {
	e := encoder{strict: true}
	b := e.message(make([]byte, 0, 512), m.ProtoReflect())
	if e.err != nil {
		return nil, e.err
	}
	return b, nil
}

// encoder carries Marshal's refusals through the walk; Append's never
// refuses.
type encoder struct {
	strict bool
	err    error
}

// refuse records the first thing protojson would refuse (strict only).
func (e *encoder) refuse(format string, args ...any) {
	if e.strict && e.err == nil {
		e.err = fmt.Errorf("encode JSON: "+format, args...)
	}
}

func (e *encoder) message(b []byte, m protoreflect.Message) []byte {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Timestamp":
		return e.timestamp(b, m)
	case "google.protobuf.Duration":
		return e.duration(b, m)
	case "google.protobuf.Struct":
		return e.structOf(b, m)
	case "google.protobuf.Value":
		return e.value(b, m)
	case "google.protobuf.ListValue":
		return e.list(b, m)
	}
	b = append(b, '{')
	first := true
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		// A oneof is asked once, where its first member is declared (its
		// members are declared together, so that is where protojson
		// writes the one set): asking Has of each member (an event's body
		// has thirty) was a third of the time.
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil {
			if od.Fields().Get(0) != fd {
				continue
			}
			if fd = m.WhichOneof(od); fd == nil {
				continue
			}
		} else if !m.Has(fd) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = AppendString(b, string(fd.Name()))
		b = append(b, ':')
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			b = append(b, '[')
			for j := 0; j < l.Len(); j++ {
				if j > 0 {
					b = append(b, ',')
				}
				b = e.singular(b, fd, l.Get(j))
			}
			b = append(b, ']')
		case fd.IsMap():
			b = e.mapOf(b, fd, v.Map())
		default:
			b = e.singular(b, fd, v)
		}
	}
	return append(b, '}')
}

func (e *encoder) mapOf(b []byte, fd protoreflect.FieldDescriptor, mp protoreflect.Map) []byte {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(b, fd.MapKey(), k.String())
		b = append(b, ':')
		b = e.singular(b, fd.MapValue(), mp.Get(k))
	}
	return append(b, '}')
}

// str writes a string field's value (or a map's key) s of fd.
func (e *encoder) str(b []byte, fd protoreflect.FieldDescriptor, s string) []byte {
	if e.strict && !utf8.ValidString(s) {
		e.refuse("field %s holds invalid UTF-8", fd.FullName())
	}
	return AppendString(b, s)
}

func (e *encoder) singular(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(b, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b = append(b, '"')
		b = strconv.AppendInt(b, v.Int(), 10)
		return append(b, '"')
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b = append(b, '"')
		b = strconv.AppendUint(b, v.Uint(), 10)
		return append(b, '"')
	case protoreflect.FloatKind:
		return AppendFloat(b, v.Float(), 32)
	case protoreflect.DoubleKind:
		return AppendFloat(b, v.Float(), 64)
	case protoreflect.StringKind:
		return e.str(b, fd, v.String())
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Bytes())
		return append(b, '"')
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return AppendString(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return e.message(b, v.Message())
	}
	e.refuse("field %s has a kind JSON cannot write", fd.FullName())
	return append(b, "null"...)
}

// AppendFloat writes f as protojson writes a float (bits 32) or double
// (64) field: a number, or "NaN", "Infinity", "-Infinity".
func AppendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// The range protojson accepts (google.protobuf.Timestamp and Duration's own
// definitions): years 1 to 9999, and ±10,000 years.
const (
	minTimestampSeconds = -62135596800
	maxTimestampSeconds = 253402300799
	maxDurationSeconds  = 315576000000
)

func (e *encoder) timestamp(b []byte, m protoreflect.Message) []byte {
	fs := m.Descriptor().Fields()
	secs, nanos := m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int()
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos >= 1e9 {
		e.refuse("%s: timestamp %d s %d ns is outside what JSON can write", m.Descriptor().FullName(), secs, nanos)
	}
	return AppendTimestamp(b, secs, nanos, nil)
}

// SecondsCache keeps the text of a timestamp up to its whole seconds for
// the next timestamp of the same second (events come in time order).
type SecondsCache struct {
	secs int64
	n    int // 0: nothing kept
	text [32]byte
}

// AppendTimestamp writes the timestamp secs, nanos as protojson does (RFC
// 3339 in UTC with 0, 3, 6 or 9 fractional digits), using and updating c
// (nil: no cache).
func AppendTimestamp(b []byte, secs, nanos int64, c *SecondsCache) []byte {
	if c != nil && c.n > 0 && c.secs == secs && nanos >= 0 && nanos < 1e9 {
		// The same second as the last (normalised already, as time.Unix
		// would): no calendar to work out.
		return appendNanos(append(b, c.text[:c.n]...), int(nanos))
	}
	t := time.Unix(secs, nanos).UTC()
	if c != nil && c.n > 0 && c.secs == t.Unix() {
		b = append(b, c.text[:c.n]...)
	} else {
		start := len(b)
		b = appendSeconds(b, t)
		if c != nil && len(b)-start <= len(c.text) {
			c.secs, c.n = t.Unix(), copy(c.text[:], b[start:])
		}
	}
	return appendNanos(b, t.Nanosecond())
}

// appendSeconds writes the opening quote and t up to its whole seconds.
func appendSeconds(b []byte, t time.Time) []byte {
	b = append(b, '"')
	if y := t.Year(); y < 0 || y > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05") // outside RFC 3339's years: as package time writes them
	}
	yy, mo, d := t.Date()
	h, mi, sec := t.Clock()
	b = appendDigits(b, yy, 4)
	b = append(b, '-')
	b = appendDigits(b, int(mo), 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, 'T')
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	return appendDigits(b, sec, 2)
}

// appendNanos writes the fraction of a second ns (0 ≤ ns < 1e9) and the
// closing "Z\"".
func appendNanos(b []byte, ns int) []byte {
	switch {
	case ns == 0:
	case ns%1e6 == 0:
		b = appendDigits(append(b, '.'), ns/1e6, 3)
	case ns%1e3 == 0:
		b = appendDigits(append(b, '.'), ns/1e3, 6)
	default:
		b = appendDigits(append(b, '.'), ns, 9)
	}
	return append(b, `Z"`...)
}

// appendDigits writes n (≥ 0, below 1e10) zero-padded to width digits,
// two at a time: every timestamp's nanoseconds go through here.
func appendDigits(b []byte, n, width int) []byte {
	const pairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
		"8081828384858687888990919293949596979899"
	var d [10]byte
	i := len(d)
	for n >= 10 {
		r := n % 100
		n /= 100
		i -= 2
		d[i], d[i+1] = pairs[2*r], pairs[2*r+1]
	}
	if n > 0 || i == len(d) {
		i--
		d[i] = byte('0' + n)
	}
	for i > len(d)-width {
		i--
		d[i] = '0'
	}
	return append(b, d[i:]...)
}

func (e *encoder) duration(b []byte, m protoreflect.Message) []byte {
	fs := m.Descriptor().Fields()
	secs, nanos := m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int()
	if secs < -maxDurationSeconds || secs > maxDurationSeconds || nanos <= -1e9 || nanos >= 1e9 || secs > 0 && nanos < 0 || secs < 0 && nanos > 0 {
		e.refuse("%s: duration %d s %d ns is outside what JSON can write", m.Descriptor().FullName(), secs, nanos)
	}
	return AppendDuration(b, secs, nanos)
}

// AppendDuration writes the duration secs, nanos as protojson does ("1.5s",
// with 0, 3, 6 or 9 fractional digits).
func AppendDuration(b []byte, secs, nanos int64) []byte {
	b = append(b, '"')
	if secs < 0 || nanos < 0 {
		b = append(b, '-')
		secs, nanos = -secs, -nanos
	}
	b = strconv.AppendInt(b, secs, 10)
	if nanos != 0 {
		var digits [24]byte
		frac := strconv.AppendInt(digits[:0], nanos+1e9, 10)[1:] // 9 digits
		switch {
		case nanos%1e6 == 0:
			frac = frac[:3]
		case nanos%1e3 == 0:
			frac = frac[:6]
		}
		b = append(b, '.')
		b = append(b, frac...)
	}
	return append(b, `s"`...)
}

func (e *encoder) structOf(b []byte, m protoreflect.Message) []byte {
	fd := m.Descriptor().Fields().ByNumber(1)
	return e.mapOf(b, fd, m.Get(fd).Map())
}

func (e *encoder) list(b []byte, m protoreflect.Message) []byte {
	l := m.Get(m.Descriptor().Fields().ByNumber(1)).List()
	b = append(b, '[')
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.value(b, l.Get(i).Message())
	}
	return append(b, ']')
}

func (e *encoder) value(b []byte, m protoreflect.Message) []byte {
	od := m.Descriptor().Oneofs().ByName("kind")
	fd := m.WhichOneof(od)
	if fd == nil {
		e.refuse("%s has no kind set", m.Descriptor().FullName())
		return append(b, "null"...)
	}
	v := m.Get(fd)
	switch fd.Name() {
	case "null_value":
		return append(b, "null"...)
	case "number_value":
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			e.refuse("%s holds %v, which JSON has no number for", m.Descriptor().FullName(), f)
		}
		return AppendFloat(b, v.Float(), 64)
	case "string_value":
		return e.str(b, fd, v.String())
	case "bool_value":
		return strconv.AppendBool(b, v.Bool())
	case "struct_value":
		return e.structOf(b, v.Message())
	case "list_value":
		return e.list(b, v.Message())
	}
	return append(b, "null"...)
}

// AppendString writes s as a JSON string the way protojson does (invalid
// UTF-8 becomes U+FFFD).
func AppendString(b []byte, s string) []byte { return canon.AppendJSONString(b, s, true) }
