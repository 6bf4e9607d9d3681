// Package pbwire reads protobuf fields straight from their encoded bytes,
// for the hot paths that must not decode whole messages (the audit sink's
// rows and argument digests).
//
// A field's value is what Next gives: for a length-delimited field (string,
// bytes, message) the bytes inside its length, for any other the encoded
// value itself. Bytes, String and Varint read such a value.
package pbwire

import (
	"encoding/binary"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxDepth is how many Structs and lists may hold a google.protobuf.Value
// the wire readers render; deeper data is refused, so its caller decodes it
// instead and gets the decoder's answer. It is above
// the deepest arguments ingress accepts (limits.max_argument_depth, at most
// 128) and far below protobuf's own recursion limit (10,000), and bounds the
// stack a reader's recursion may take.
const MaxDepth = 256

// Next splits the first field off data: its number, wire type and value,
// and what follows it. ok is false when data does not start with a
// well-formed field, exactly where protowire.ConsumeTag and
// ConsumeFieldValue refuse it. Tags and lengths of one or two bytes and
// varints — nearly every field — are read here without a further call:
// this is the innermost loop of the audit sink.
func Next(data []byte) (num protowire.Number, typ protowire.Type, val, rest []byte, ok bool) {
	var tag uint64
	var i int
	switch {
	case len(data) >= 2 && data[0] < 0x80:
		tag, i = uint64(data[0]), 1
	case len(data) >= 3 && data[1] < 0x80:
		tag, i = uint64(data[0]&0x7f)|uint64(data[1])<<7, 2
	default:
		return nextSlow(data)
	}
	num, typ = protowire.Number(tag>>3), protowire.Type(tag&7)
	if num == 0 {
		return nextSlow(data) // refused there
	}
	switch typ {
	case protowire.BytesType:
		var n uint64
		switch {
		case data[i] < 0x80:
			n, i = uint64(data[i]), i+1
		case i+1 < len(data) && data[i+1] < 0x80:
			n, i = uint64(data[i]&0x7f)|uint64(data[i+1])<<7, i+2
		default:
			return nextSlow(data)
		}
		if end := uint64(i) + n; end <= uint64(len(data)) {
			return num, typ, data[i:end], data[end:], true
		}
		return 0, 0, nil, nil, false
	case protowire.VarintType:
		for j := i; j < len(data) && j < i+10; j++ {
			if data[j] < 0x80 {
				if j == i+9 && data[j] > 1 {
					break // past 64 bits: refused there
				}
				return num, typ, data[i : j+1], data[j+1:], true
			}
		}
	}
	return nextSlow(data)
}

func nextSlow(data []byte) (num protowire.Number, typ protowire.Type, val, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 {
		return 0, 0, nil, nil, false
	}
	m := protowire.ConsumeFieldValue(num, typ, data[n:])
	if m < 0 {
		return 0, 0, nil, nil, false
	}
	val, rest = data[n:n+m], data[n+m:]
	if typ == protowire.BytesType {
		val, _ = protowire.ConsumeBytes(val) // well-formed: ConsumeFieldValue read it
	}
	return num, typ, val, rest, true
}

// EachField calls fn with every field of the encoded message data, in
// order, until fn returns false. It reports false when data is malformed or
// fn stopped.
func EachField(data []byte, fn func(num protowire.Number, typ protowire.Type, val []byte) bool) bool {
	for len(data) > 0 {
		num, typ, val, rest, ok := Next(data)
		if !ok || !fn(num, typ, val) {
			return false
		}
		data = rest
	}
	return true
}

// Bytes reads a length-delimited field (bytes, string or message).
func Bytes(typ protowire.Type, val []byte) ([]byte, bool) {
	return val, typ == protowire.BytesType
}

// String reads a string field as a view of the encoded bytes, so it is
// valid only as long as they are unchanged: copy it before keeping it.
// Invalid UTF-8 is refused, as protobuf refuses it in a string.
func String(typ protowire.Type, val []byte) (string, bool) {
	if typ != protowire.BytesType || !validUTF8(val) {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(val), len(val)), true
}

// validUTF8 is utf8.Valid, answered here for ASCII: the ids every event
// carries are a dozen bytes of it, which utf8.Valid reads mostly a byte at a
// time (its word-wide steps start past the first byte and stop 8 bytes
// before the end).
func validUTF8(b []byte) bool {
	var word uint64
	s := b
	for ; len(s) >= 8; s = s[8:] {
		word |= binary.LittleEndian.Uint64(s)
	}
	var last byte
	for _, c := range s {
		last |= c
	}
	if word&0x8080808080808080 == 0 && last < utf8.RuneSelf {
		return true
	}
	return utf8.Valid(b)
}

// View is String without the UTF-8 check, for a string field the caller
// checks another way (the audit's transcoder renders every string of an
// event's body, and refuses the event when one is not UTF-8).
func View(typ protowire.Type, val []byte) (string, bool) {
	if typ != protowire.BytesType {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(val), len(val)), true
}

// Varint reads a varint field.
func Varint(typ protowire.Type, val []byte) (uint64, bool) {
	if typ != protowire.VarintType {
		return 0, false
	}
	// val is one whole varint, as Next gives it.
	var v uint64
	for i, c := range val {
		v |= uint64(c&0x7f) << (7 * uint(i))
	}
	return v, len(val) > 0 && len(val) <= 10
}

// Fixed32 reads a fixed32, sfixed32 or float field: it cannot fail on a
// value of that wire type, which Next gives as exactly its four bytes.
func Fixed32(typ protowire.Type, val []byte) (uint32, bool) {
	if typ != protowire.Fixed32Type || len(val) != 4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(val), true
}

// Fixed64 reads a fixed64, sfixed64 or double field: it cannot fail on a
// value of that wire type, which Next gives as exactly its eight bytes.
func Fixed64(typ protowire.Type, val []byte) (uint64, bool) {
	if typ != protowire.Fixed64Type || len(val) != 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(val), true
}

// EntryField is the key or the value of a map entry as Entry reads it:
// its wire type and value as Next gives them; Has is false when the entry
// does not carry it.
type EntryField struct {
	Typ protowire.Type
	Val []byte
	Has bool
}

// Entry reads an encoded map entry — of a map field, or of a
// google.protobuf.Struct's fields — into its key (field 1) and value
// (field 2), skipping any other field, as the decoder does. ok is false
// when a field is malformed or the key or the value is given twice: the
// decoder keeps the last key and merges a message value given twice,
// which no reader of views of the bytes reproduces, so its caller leaves
// such an entry to the decoder. The caller checks the wire types.
func Entry(ent []byte) (key, val EntryField, ok bool) {
	// What Go's encoder writes, a key then a value each shorter than 128
	// bytes, is read in place: a Struct's every key is an entry (the audit
	// sink reads every argument of every call).
	if len(ent) >= 4 && ent[0] == 0x0a && ent[1] < 0x80 {
		k := 2 + int(ent[1])
		if k+2 <= len(ent) && ent[k] == 0x12 && ent[k+1] < 0x80 && k+2+int(ent[k+1]) == len(ent) {
			return EntryField{Typ: protowire.BytesType, Val: ent[2:k], Has: true},
				EntryField{Typ: protowire.BytesType, Val: ent[k+2:], Has: true}, true
		}
	}
	return entrySlow(ent)
}

// entrySlow is Entry for any entry, field by field.
func entrySlow(ent []byte) (key, val EntryField, ok bool) {
	for len(ent) > 0 {
		num, typ, v, rest, ok := Next(ent)
		if !ok {
			return key, val, false
		}
		switch num {
		case 1:
			if key.Has {
				return key, val, false
			}
			key = EntryField{Typ: typ, Val: v, Has: true}
		case 2:
			if val.Has {
				return key, val, false
			}
			val = EntryField{Typ: typ, Val: v, Has: true}
		}
		ent = rest
	}
	return key, val, true
}
