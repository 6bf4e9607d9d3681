package pbwire

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// checkNext fails t when Next reads data's first field otherwise than
// protowire does.
func checkNext(t *testing.T, data []byte) {
	t.Helper()
	num, typ, val, rest, ok := Next(data)
	wnum, wtyp, n := protowire.ConsumeTag(data)
	m := -1
	if n >= 0 {
		m = protowire.ConsumeFieldValue(wnum, wtyp, data[n:])
	}
	if wok := n >= 0 && m >= 0; ok != wok {
		t.Fatalf("% x: ok %v, protowire %v", data, ok, wok)
	}
	if !ok {
		return
	}
	wval := data[n : n+m]
	if wtyp == protowire.BytesType {
		wval, _ = protowire.ConsumeBytes(wval)
	}
	if num != wnum || typ != wtyp || !bytes.Equal(val, wval) || !bytes.Equal(rest, data[n+m:]) {
		t.Fatalf("% x: got %d/%d % x rest % x; protowire %d/%d % x rest % x", data, num, typ, val, rest, wnum, wtyp, wval, data[n+m:])
	}
	if typ == protowire.VarintType {
		v, ok := Varint(typ, val)
		if wv, _ := protowire.ConsumeVarint(wval); !ok || v != wv {
			t.Fatalf("% x: varint %d (%v), protowire %d", data, v, ok, wv)
		}
	}
}

// TestNextReadsAFieldAsProtowireDoes: every first two bytes, with a third
// and a tail that make lengths fit, run over or end early.
func TestNextReadsAFieldAsProtowireDoes(t *testing.T) {
	tails := [][]byte{nil, {0x01, 0x02, 0x03}, bytes.Repeat([]byte{0x41}, 300), {0x80, 0x80}}
	for a := 0; a < 256; a++ {
		checkNext(t, []byte{byte(a)})
		for b := 0; b < 256; b++ {
			checkNext(t, []byte{byte(a), byte(b)})
			for _, c := range []byte{0x00, 0x01, 0x7f, 0x80, 0xff} {
				for _, tail := range tails {
					checkNext(t, append([]byte{byte(a), byte(b), c}, tail...))
				}
			}
		}
	}
	checkNext(t, nil)
	// Varints of every length, and one past 64 bits.
	for n := 1; n <= 11; n++ {
		for _, last := range []byte{0x00, 0x01, 0x02, 0x7f} {
			v := append(bytes.Repeat([]byte{0xff}, n-1), last)
			checkNext(t, append([]byte{0x08}, v...))
			checkNext(t, append(append([]byte{0x08}, v...), 0x10, 0x01))
		}
	}
}

// FuzzNext is the same check over fuzzed bytes.
func FuzzNext(f *testing.F) {
	f.Add([]byte{0x0a, 0x02, 'h', 'i'})
	f.Add([]byte{0xa2, 0x01, 0x81, 0x01})
	f.Add([]byte{0x08, 0x96, 0x01})
	f.Fuzz(checkNext)
}

func TestEntryReadsAKeyAndAValueOnceEach(t *testing.T) {
	field := func(num protowire.Number, typ protowire.Type, val ...byte) []byte {
		b := protowire.AppendTag(nil, num, typ)
		if typ == protowire.BytesType {
			return protowire.AppendBytes(b, val)
		}
		return append(b, val...)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	key, val := field(1, protowire.BytesType, 'k'), field(2, protowire.BytesType, 'v')
	for _, tc := range []struct {
		name             string
		ent              []byte
		ok               bool
		key, val         string
		hasKey, hasValue bool
	}{
		{"a key and a value are read", cat(key, val), true, "k", "v", true, true},
		{"a value before its key is read", cat(val, key), true, "k", "v", true, true},
		{"other fields are skipped whatever their type", cat(field(3, protowire.VarintType, 1), key, field(4, protowire.Fixed32Type, 1, 2, 3, 4), val), true, "k", "v", true, true},
		{"an empty entry has neither", nil, true, "", "", false, false},
		{"a key alone has no value", key, true, "k", "", true, false},
		{"a key given twice is refused", cat(key, val, key), false, "", "", false, false},
		{"a value given twice is refused", cat(val, key, val), false, "", "", false, false},
		{"a malformed field is refused", cat(key, []byte{0x12, 0x05, 'v'}), false, "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, v, ok := Entry(tc.ent)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if k.Has != tc.hasKey || v.Has != tc.hasValue || string(k.Val) != tc.key || string(v.Val) != tc.val {
				t.Fatalf("key %+v value %+v, want %q (%v) %q (%v)", k, v, tc.key, tc.hasKey, tc.val, tc.hasValue)
			}
		})
	}
}

// Entry reads the entries Go's encoder writes in place: it must read them,
// and every entry near their shape (cut short, extended, a length or a tag
// changed), as the field-by-field reader does.
func TestEntryInPlaceIsEntryFieldByField(t *testing.T) {
	same := func(ent []byte) {
		t.Helper()
		k, v, ok := Entry(ent)
		wk, wv, wok := entrySlow(ent)
		if ok != wok || ok && (k.Has != wk.Has || v.Has != wv.Has || k.Typ != wk.Typ || v.Typ != wv.Typ ||
			!bytes.Equal(k.Val, wk.Val) || !bytes.Equal(v.Val, wv.Val)) {
			t.Fatalf("Entry(%x) = %+v %+v %v, field by field %+v %+v %v", ent, k, v, ok, wk, wv, wok)
		}
	}
	for _, kl := range []int{0, 1, 5, 126, 127, 128} {
		for _, vl := range []int{0, 1, 9, 126, 127, 128, 300} {
			ent := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bytes.Repeat([]byte("k"), kl))
			ent = protowire.AppendBytes(protowire.AppendTag(ent, 2, protowire.BytesType), bytes.Repeat([]byte("v"), vl))
			for n := range len(ent) + 1 {
				same(ent[:n])
			}
			for _, extra := range [][]byte{{0}, {0x0a, 0}, {0x12, 0}, {0x18, 1}} {
				same(append(bytes.Clone(ent), extra...))
			}
			for i := range ent {
				for _, c := range []byte{0, 0x0a, 0x12, 0x7f, 0x80, 0xff} {
					changed := bytes.Clone(ent)
					changed[i] = c
					same(changed)
				}
			}
		}
	}
}

// String refuses what utf8.Valid refuses, at any length and position:
// ASCII is answered without it.
func TestStringChecksUTF8AsUTF8ValidDoes(t *testing.T) {
	for size := range 25 {
		for pos := range size {
			for _, bad := range [][]byte{{0x80}, {0xff}, {0xc3}, {0xc3, 0xa9}, {0xe2, 0x80, 0xa8}, {0xed, 0xa0, 0x80}, {0x7f}, {0}} {
				v := bytes.Repeat([]byte("a"), size)
				v = append(v[:pos], append(bytes.Clone(bad), v[pos:]...)...)
				_, ok := String(protowire.BytesType, v)
				if want := utf8.Valid(v); ok != want {
					t.Fatalf("String(%x) ok %v, utf8.Valid %v", v, ok, want)
				}
			}
		}
	}
}

func TestFixedReadsOnlyItsOwnWireType(t *testing.T) {
	_, typ, val, _, _ := Next(protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 0x0102030405060708))
	if v, ok := Fixed64(typ, val); !ok || v != 0x0102030405060708 {
		t.Fatalf("fixed64: %x %v", v, ok)
	}
	if _, ok := Fixed32(typ, val); ok {
		t.Fatal("a fixed64 read as a fixed32")
	}
	_, typ, val, _, _ = Next(protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), 0x01020304))
	if v, ok := Fixed32(typ, val); !ok || v != 0x01020304 {
		t.Fatalf("fixed32: %x %v", v, ok)
	}
	if _, ok := Fixed64(typ, val); ok {
		t.Fatal("a fixed32 read as a fixed64")
	}
}
