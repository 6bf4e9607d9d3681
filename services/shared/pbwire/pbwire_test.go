package pbwire

import (
	"bytes"
	"testing"

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
