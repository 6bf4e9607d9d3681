// Package pbwire reads protobuf fields straight from their encoded bytes,
// for the hot paths that must not decode whole messages (the audit sink's
// rows and argument digests).
package pbwire

import (
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// EachField calls fn with every field of the encoded message data, in
// order, until fn returns false. It reports false when data is malformed or
// fn stopped.
func EachField(data []byte, fn func(num protowire.Number, typ protowire.Type, raw []byte) bool) bool {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, data[n:])
		if m < 0 || !fn(num, typ, data[n:n+m]) {
			return false
		}
		data = data[n+m:]
	}
	return true
}

// Bytes reads a length-delimited field (bytes, string or message).
func Bytes(typ protowire.Type, raw []byte) ([]byte, bool) {
	if typ != protowire.BytesType {
		return nil, false
	}
	v, n := protowire.ConsumeBytes(raw)
	return v, n >= 0
}

// String reads a string field as a view of the encoded bytes, so it is
// valid only as long as they are unchanged: copy it before keeping it.
// Invalid UTF-8 is refused, as protobuf refuses it in a string.
func String(typ protowire.Type, raw []byte) (string, bool) {
	v, ok := Bytes(typ, raw)
	if !ok || !utf8.Valid(v) {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(v), len(v)), true
}

// Varint reads a varint field.
func Varint(typ protowire.Type, raw []byte) (uint64, bool) {
	if typ != protowire.VarintType {
		return 0, false
	}
	v, n := protowire.ConsumeVarint(raw)
	return v, n >= 0
}
