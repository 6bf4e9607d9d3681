package record

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"unsafe"
)

// KeySize is the length of an audit key in bytes.
const KeySize = 32

// Key is the secret the audit chain is keyed with. Each row's hash is
// HMAC-SHA256(key, prev_hash ‖ canonical fields), so a row can be written
// or rewritten only by whoever holds the key — the audit service and the
// auditor who verifies — never by someone who can merely write ClickHouse.
type Key struct {
	secret []byte
}

// NewKey wraps a secret of KeySize bytes or more.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) < KeySize {
		return nil, fmt.Errorf("audit key is %d bytes; it must be at least %d (generate one with `airlock audit keygen`)", len(secret), KeySize)
	}
	return &Key{secret: append([]byte(nil), secret...)}, nil
}

// ParseKey reads a key written as hex (64 characters or more; spaces and
// line breaks around it are ignored).
func ParseKey(text string) (*Key, error) {
	raw, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return nil, errors.New("audit key is not hex: write 64 hex characters (32 random bytes), e.g. from `airlock audit keygen`")
	}
	return NewKey(raw)
}

// GenerateKey makes a new random key and returns it with its hex text.
func GenerateKey() (*Key, string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, "", fmt.Errorf("generate audit key: %w", err)
	}
	k, err := NewKey(b)
	return k, hex.EncodeToString(b), err
}

// ID is a short fingerprint of the key (not the key): it tells two keys apart in messages.
func (k *Key) ID() string {
	sum := sha256.Sum256(append([]byte("airlock audit key id\x00"), k.secret...))
	return hex.EncodeToString(sum[:6])
}

// Sealer computes row hashes with one key, reusing its buffers: one Sealer
// per goroutine.
type Sealer struct {
	mac hash.Hash
	buf []byte
	sum []byte
	hex []byte
	// hashes holds the hashes Seal gives rows, many to an allocation
	// instead of one each; a full chunk is left to the rows that use it.
	hashes []byte
}

// hashChunk is how many hashes share one allocation.
const hashChunk = 256

// Sealer returns a new Sealer for k.
func (k *Key) Sealer() *Sealer {
	return &Sealer{mac: hmac.New(sha256.New, k.secret), buf: make([]byte, 0, 1024), sum: make([]byte, 0, sha256.Size), hex: make([]byte, 2*sha256.Size)}
}

// macOf writes the hex MAC of r, with r.PrevHash as the link, into dst
// (2*sha256.Size bytes) and returns dst.
func (s *Sealer) macOf(dst []byte, r *Row) []byte {
	s.mac.Reset()
	// The link is written to the hash as it is, not copied before the fields.
	s.mac.Write(unsafe.Slice(unsafe.StringData(r.PrevHash), len(r.PrevHash)))
	s.buf = AppendCanonicalFields(s.buf[:0], r)
	s.mac.Write(s.buf)
	s.sum = s.mac.Sum(s.sum[:0])
	encodeHex((*[2 * sha256.Size]byte)(dst), (*[sha256.Size]byte)(s.sum))
	return dst
}

// encodeHex is hex.Encode for a SHA-256 sum. It works out four bytes'
// eight digits at once in one word, where a table lookup per byte took
// twice the instructions; fixed sizes leave no bounds to check.
func encodeHex(dst *[2 * sha256.Size]byte, sum *[sha256.Size]byte) {
	for i := 0; i < sha256.Size; i += 4 {
		x := uint64(binary.BigEndian.Uint32(sum[i : i+4]))
		x = (x | x<<16) & 0x0000ffff0000ffff
		x = (x | x<<8) & 0x00ff00ff00ff00ff
		x = (x&0x00f000f000f000f0)<<4 | x&0x000f000f000f000f          // one nibble to a byte, in order
		letters := (x + 0x0606060606060606) >> 4 & 0x0101010101010101 // 1 in each byte whose nibble is 10 or more
		binary.BigEndian.PutUint64(dst[2*i:2*i+8], x+0x3030303030303030+letters*('a'-'0'-10))
	}
}

// Seal sets r.PrevHash to prev and r.Hash to the row's keyed hash.
func (s *Sealer) Seal(r *Row, prev string) {
	r.PrevHash = prev
	const n = 2 * sha256.Size
	if cap(s.hashes)-len(s.hashes) < n {
		s.hashes = make([]byte, 0, hashChunk*n)
	}
	// Written straight into the chunk the row's Hash is a view of.
	start := len(s.hashes)
	s.hashes = s.hashes[:start+n]
	s.macOf(s.hashes[start:], r)
	r.Hash = unsafe.String(&s.hashes[start], n)
}

// Hash is the keyed hash r should carry given its PrevHash.
func (s *Sealer) Hash(r *Row) string { return string(s.macOf(s.hex, r)) }

// Check reports whether r.Hash is the keyed hash of r's contents and
// PrevHash: false means the row was altered or written without the key.
func (s *Sealer) Check(r *Row) bool {
	return len(r.Hash) == 2*sha256.Size && hmac.Equal(s.macOf(s.hex, r), []byte(r.Hash))
}

// Chain seals rows in order, starting from prev (GenesisHash for the first
// row ever), and returns the last hash.
func (s *Sealer) Chain(rows []Row, prev string) string {
	for i := range rows {
		s.Seal(&rows[i], prev)
		prev = rows[i].Hash
	}
	return prev
}
