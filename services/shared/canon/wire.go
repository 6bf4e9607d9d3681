package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/airlock-gate/airlock/services/shared/pbwire"
)

// DigestWire is Digest of the Struct whose protobuf encoding is data,
// computed from the bytes without decoding them into messages (the audit
// sink digests every call's arguments this way). ok is false when data is
// not a Struct encoding it can vouch for (a malformed field, a key twice,
// invalid UTF-8): decode it and use Digest instead. A Struct holding a
// non-finite number has no digest, as Digest refuses it: "", true.
func DigestWire(data []byte) (digest string, ok bool) {
	var buf [2 * sha256.Size]byte
	d, ok := AppendDigestWire(buf[:0], data)
	return string(d), ok
}

// AppendDigestWire is DigestWire appending the digest to dst (nothing
// when the Struct has none), so a caller that keeps many digests need not
// allocate each.
func AppendDigestWire(dst, data []byte) ([]byte, bool) {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	b, ok, finite := appendWireStruct((*bp)[:0], data, 1)
	if !ok {
		return dst, false
	}
	if cap(b) <= 64<<10 {
		*bp = b
	}
	if !finite {
		return dst, true
	}
	sum := sha256.Sum256(b)
	return hex.AppendEncode(dst, sum[:]), true
}

// appendWireStruct appends the canonical JSON of the encoded Struct data
// (field 1: map entries of key 1, Value 2); depth is how many Structs and
// lists hold its values. finite is false when a number in it is not.
func appendWireStruct(b, data []byte, depth int) (out []byte, ok, finite bool) {
	type field struct {
		key string
		val []byte
	}
	var fbuf [16]field
	fields := fbuf[:0]
	ok = pbwire.EachField(data, func(n protowire.Number, t protowire.Type, raw []byte) bool {
		ent, ok := pbwire.Bytes(t, raw)
		if !ok || n != 1 {
			return false
		}
		key, val, ok := pbwire.Entry(ent)
		if !ok {
			return false
		}
		var f field
		if key.Has {
			if f.key, ok = pbwire.String(key.Typ, key.Val); !ok {
				return false
			}
		}
		if val.Has {
			if f.val, ok = pbwire.Bytes(val.Typ, val.Val); !ok {
				return false
			}
		}
		fields = append(fields, f)
		return true
	})
	if !ok {
		return nil, false, false
	}
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	finite = true
	for i, f := range fields {
		if i > 0 && fields[i-1].key == f.key {
			return nil, false, false // a map entry twice: decoding keeps the last, so no view of the bytes is safe
		}
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendString(b, f.key); err != nil {
			return nil, false, false
		}
		b = append(b, ':')
		var fin bool
		if b, ok, fin = appendWireValue(b, f.val, depth); !ok {
			return nil, false, false
		}
		finite = finite && fin
	}
	return append(b, '}'), true, finite
}

// appendWireValue appends one encoded Value: its kind is a oneof of null 1,
// number 2, string 3, bool 4, struct 5, list 6; no kind is null. depth is
// how many Structs and lists hold it: past pbwire.MaxDepth it is refused.
func appendWireValue(b, data []byte, depth int) (out []byte, ok, finite bool) {
	if depth > pbwire.MaxDepth {
		return nil, false, false
	}
	if len(data) == 0 {
		return append(b, "null"...), true, true
	}
	num, typ, raw, rest, ok := pbwire.Next(data)
	if !ok || len(rest) > 0 {
		return nil, false, false
	}
	switch num {
	case 1:
		return append(b, "null"...), true, true
	case 2:
		v, ok := pbwire.Fixed64(typ, raw)
		if !ok {
			return nil, false, false
		}
		f := math.Float64frombits(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return b, true, false
		}
		b, _ = appendFloat(b, f)
		return b, true, true
	case 3:
		s, ok := pbwire.String(typ, raw)
		if !ok {
			return nil, false, false
		}
		b, err := appendString(b, s)
		return b, err == nil, true
	case 4:
		v, ok := pbwire.Varint(typ, raw)
		if !ok {
			return nil, false, false
		}
		return strconv.AppendBool(b, v != 0), true, true
	case 5:
		v, ok := pbwire.Bytes(typ, raw)
		if !ok {
			return nil, false, false
		}
		return appendWireStruct(b, v, depth+1)
	case 6:
		v, ok := pbwire.Bytes(typ, raw)
		if !ok {
			return nil, false, false
		}
		b = append(b, '[')
		finite, i := true, 0
		ok = pbwire.EachField(v, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			e, ok := pbwire.Bytes(t, raw)
			if !ok || n != 1 {
				return false
			}
			if i > 0 {
				b = append(b, ',')
			}
			i++
			var fin bool
			b, ok, fin = appendWireValue(b, e, depth+1)
			finite = finite && fin
			return ok
		})
		if !ok {
			return nil, false, false
		}
		return append(b, ']'), true, finite
	}
	return nil, false, false
}
