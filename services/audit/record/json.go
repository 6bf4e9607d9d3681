package record

import (
	"encoding/base64"
	"math"
	"sort"
	"strconv"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-gate/airlock/services/shared/canon"
)

// appendJSON writes m as compact JSON in the protojson mapping (proto field
// names, enums by name, 64-bit integers as strings, well-known types in
// their JSON form, unset fields omitted), with fields in declaration order
// and map keys sorted, so the output is deterministic. It exists because
// protojson's generic encoder was half of the sink's CPU time; the result
// is read back with protojson.Unmarshal (replay), and a test keeps the two
// equivalent.
func appendJSON(b []byte, m protoreflect.Message) []byte {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Timestamp":
		return appendTimestamp(b, m)
	case "google.protobuf.Duration":
		return appendDuration(b, m)
	case "google.protobuf.Struct":
		return appendStruct(b, m)
	case "google.protobuf.Value":
		return appendValue(b, m)
	case "google.protobuf.ListValue":
		return appendList(b, m)
	}
	b = append(b, '{')
	first := true
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, string(fd.Name()))
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
				b = appendSingular(b, fd, l.Get(j))
			}
			b = append(b, ']')
		case fd.IsMap():
			b = appendMap(b, fd, v.Map())
		default:
			b = appendSingular(b, fd, v)
		}
	}
	return append(b, '}')
}

func appendMap(b []byte, fd protoreflect.FieldDescriptor, mp protoreflect.Map) []byte {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k.String())
		b = append(b, ':')
		b = appendSingular(b, fd.MapValue(), mp.Get(k))
	}
	return append(b, '}')
}

func appendSingular(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
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
		return appendFloat(b, v.Float(), 32)
	case protoreflect.DoubleKind:
		return appendFloat(b, v.Float(), 64)
	case protoreflect.StringKind:
		return appendString(b, v.String())
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Bytes())
		return append(b, '"')
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendString(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendJSON(b, v.Message())
	}
	return append(b, "null"...)
}

func appendFloat(b []byte, f float64, bits int) []byte {
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

func appendTimestamp(b []byte, m protoreflect.Message) []byte {
	fs := m.Descriptor().Fields()
	return appendTimestampOf(b, m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int())
}

func appendTimestampOf(b []byte, secs, nanos int64) []byte {
	return appendTimestampCached(b, secs, nanos, nil)
}

// secondsText is the text of a timestamp up to its whole seconds, kept for
// the next timestamp of the same second (events come in time order).
type secondsText struct {
	secs int64
	n    int // 0: nothing kept
	text [32]byte
}

// appendTimestampCached is appendTimestampOf using and updating c (nil: no cache).
func appendTimestampCached(b []byte, secs, nanos int64, c *secondsText) []byte {
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
	// protojson: RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits.
	b = append(b, '"')
	if y := t.Year(); y < 0 || y > 9999 {
		b = t.AppendFormat(b, "2006-01-02T15:04:05") // outside RFC 3339's years: as package time writes them
	} else {
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
		b = appendDigits(b, sec, 2)
	}
	return b
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

func appendDuration(b []byte, m protoreflect.Message) []byte {
	fs := m.Descriptor().Fields()
	return appendDurationOf(b, m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int())
}

func appendDurationOf(b []byte, secs, nanos int64) []byte {
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

func appendStruct(b []byte, m protoreflect.Message) []byte {
	return appendMap(b, m.Descriptor().Fields().ByNumber(1), m.Get(m.Descriptor().Fields().ByNumber(1)).Map())
}

func appendList(b []byte, m protoreflect.Message) []byte {
	l := m.Get(m.Descriptor().Fields().ByNumber(1)).List()
	b = append(b, '[')
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendValue(b, l.Get(i).Message())
	}
	return append(b, ']')
}

func appendValue(b []byte, m protoreflect.Message) []byte {
	od := m.Descriptor().Oneofs().ByName("kind")
	fd := m.WhichOneof(od)
	if fd == nil {
		return append(b, "null"...)
	}
	v := m.Get(fd)
	switch fd.Name() {
	case "null_value":
		return append(b, "null"...)
	case "number_value":
		return appendFloat(b, v.Float(), 64)
	case "string_value":
		return appendString(b, v.String())
	case "bool_value":
		return strconv.AppendBool(b, v.Bool())
	case "struct_value":
		return appendStruct(b, v.Message())
	case "list_value":
		return appendList(b, v.Message())
	}
	return append(b, "null"...)
}

// appendString writes s as a JSON string the way protojson does (invalid
// UTF-8 becomes U+FFFD).
func appendString(b []byte, s string) []byte { return canon.AppendJSONString(b, s, true) }
