package record

import (
	"encoding/hex"
	"strconv"
	"testing"
)

// The fast length prefix writes what strconv writes, at every size.
func TestTheCanonicalLengthPrefixIsTheDecimalLength(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 65535, 1 << 30} {
		if got, want := string(appendLen([]byte("x"), n)), "x"+strconv.Itoa(n)+":"; got != want {
			t.Errorf("appendLen(%d) = %q, want %q", n, got, want)
		}
	}
}

// Hashes that share a Sealer's chunk stay what they were when later rows
// are sealed, past the end of a chunk.
func TestSealedHashesStayPutAcrossChunks(t *testing.T) {
	key, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]Row, 2*hashChunk+3)
	for i := range rows {
		rows[i] = Row{Seq: uint64(i + 1), EventID: strconv.Itoa(i), Payload: "{}"}
	}
	key.Sealer().Chain(rows, GenesisHash)
	check := key.Sealer()
	prev := GenesisHash
	for i := range rows {
		if rows[i].PrevHash != prev || !check.Check(&rows[i]) {
			t.Fatalf("row %d: its hash or link changed after later rows were sealed", i+1)
		}
		prev = rows[i].Hash
	}
}

// A hash is written as hex.Encode writes it: every byte value at every
// place in a sum.
func TestEncodeHexIsHexEncode(t *testing.T) {
	var all [256 + 32]byte
	for i := range all {
		all[i] = byte(i)
	}
	for off := range 256 {
		sum := (*[32]byte)(all[off : off+32])
		var got [64]byte
		encodeHex(&got, sum)
		if want := hex.EncodeToString(sum[:]); string(got[:]) != want {
			t.Errorf("encodeHex(% x) = %s, want %s", sum[:], got, want)
		}
	}
}
