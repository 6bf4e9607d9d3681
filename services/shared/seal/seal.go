// Package seal authenticates what crosses a trust boundary on the bus with
// HMAC-SHA256 keys that only the services on one side hold:
//
//   - the decision key (policy and approval services) seals every `allowed`
//     and `approved` event; the executor runs nothing whose seal does not
//     verify, so an event that reached the stream by any other route (a
//     misconfigured permission, a forged publish) runs nothing;
//   - the front-end key (console, Slack, CLI through REST, MCP gateway) seals
//     requests to the approval and policy endpoints and the requests a
//     front-end submits for an agent; those endpoints act only on requests
//     whose seal verifies, so a request delivered by anyone else, by whatever
//     route, changes nothing.
//
// Keys are 32 random bytes, kept in files (mode 0600) or given as hex.
package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// KeySize is the size of a key in bytes.
const KeySize = 32

// Key is an HMAC key. The zero Key signs nothing and verifies nothing.
type Key struct {
	b []byte
	// keyed is an HMAC-SHA256 already keyed with b (its padded key hashed
	// once, which FIPS 198-1 allows): Sum clones it rather than keying a
	// new HMAC for every seal, two of which each call makes. Nil when the
	// HMAC cannot be cloned; Sum then keys one.
	keyed hash.Cloner
}

// newKey returns the key b with its keyed HMAC.
func newKey(b []byte) Key {
	m := hmac.New(sha256.New, b)
	m.Reset() // keeps the keyed state for the clones
	keyed, _ := m.(hash.Cloner)
	return Key{b: b, keyed: keyed}
}

// Valid reports whether k holds a key.
func (k Key) Valid() bool { return len(k.b) == KeySize }

// Same reports whether k and o are one key: keys for different purposes
// must differ, or a holder of one holds the other.
func (k Key) Same(o Key) bool { return k.Valid() && hmac.Equal(k.b, o.b) }

// NewKey returns a random key.
func NewKey() Key {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // cannot happen on supported platforms
	}
	return newKey(b)
}

// Hex is the key as hex, for configuration by environment.
func (k Key) Hex() string { return hex.EncodeToString(k.b) }

// ParseHex reads a key written by Hex.
func ParseHex(s string) (Key, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != KeySize {
		return Key{}, fmt.Errorf("a key is %d bytes written as %d hex digits", KeySize, 2*KeySize)
	}
	return newKey(b), nil
}

// Load returns the key given inline as hex, or else read from file; what
// names it in errors. Neither set is an error that says how to set one.
func Load(what, inlineHex, file string) (Key, error) {
	if inlineHex != "" {
		k, err := ParseHex(inlineHex)
		if err != nil {
			return Key{}, fmt.Errorf("%s: %w", what, err)
		}
		return k, nil
	}
	if file == "" {
		return Key{}, fmt.Errorf("%s is not configured: set its key file (or its hex value) in the security section; `airlock keys generate FILE` makes one", what)
	}
	text, err := ReadSecretFile(what, file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Key{}, fmt.Errorf("%w (`airlock keys generate %s` makes one)", err, file)
		}
		return Key{}, err
	}
	k, err := ParseHex(text)
	if err != nil {
		return Key{}, fmt.Errorf("%s in %s: %w", what, file, err)
	}
	return k, nil
}

// Ensure returns the key in file, creating the file with a new key (mode
// 0600) when it does not exist yet.
func Ensure(file string) (Key, error) {
	text, err := ReadSecretFile("key", file)
	if errors.Is(err, os.ErrNotExist) {
		k := NewKey()
		if err = CreateSecretFile(file, k.Hex()+"\n"); err == nil {
			return k, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return Key{}, err
		}
		text, err = ReadSecretFile("key", file) // made meanwhile by another process: use that one
	}
	if err != nil {
		return Key{}, err
	}
	return ParseHex(text)
}

// ReadSecretFile returns the text in file, a secret such as a key, with
// the space around it trimmed. A file its group or others may read is
// refused: whoever can read a key can forge what it seals. what names the
// secret in errors.
func ReadSecretFile(what, file string) (string, error) {
	st, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, file, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s %s can be read by others (mode %04o): run `chmod 600 %s`", what, file, perm, file)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, file, err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// CreateSecretFile writes text to file, a new file of mode 0600 (its
// directory, when created, 0700). An existing file is never overwritten
// (the error then wraps os.ErrExist): services that seal and check with a
// key must keep agreeing on it, and a lost audit key leaves its trail
// unverifiable.
func CreateSecretFile(file, text string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("create the directory of %s: %w", file, err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w (an existing key is never overwritten)", file, err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// Sum is the HMAC of the parts, each length-prefixed so that no two
// different lists of parts sign the same bytes.
func (k Key) Sum(parts ...string) []byte {
	// The parts are laid out in one buffer and hashed in one write: each
	// write of a part converted to []byte was an allocation of its own,
	// and a decision is sealed and verified on every call.
	size := 0
	for _, p := range parts {
		size += 8 + len(p)
	}
	buf := make([]byte, 0, size)
	for _, p := range parts {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(p)))
		buf = append(buf, p...)
	}
	m := k.mac()
	m.Write(buf)
	return m.Sum(make([]byte, 0, sha256.Size))
}

// mac is an HMAC-SHA256 keyed with k, ready for the message.
func (k Key) mac() hash.Hash {
	if k.keyed != nil {
		if m, err := k.keyed.Clone(); err == nil {
			return m
		}
	}
	return hmac.New(sha256.New, k.b)
}

// Sign returns the seal of the parts, base64url without padding.
func (k Key) Sign(parts ...string) string {
	if !k.Valid() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(k.Sum(parts...))
}

// Verify reports whether sig is the seal of the parts, in constant time.
func (k Key) Verify(sig string, parts ...string) bool {
	if !k.Valid() || sig == "" {
		return false
	}
	// Strict: only the one spelling Sign writes verifies, so a seal cannot
	// be altered (its last character's unused bits) and still pass.
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, k.Sum(parts...))
}

// Front-end request headers.
const (
	// HeaderFrontend names the front-end that sealed a request.
	HeaderFrontend = "Airlock-Frontend"
	// HeaderSeal is "<unix ms>.<seal>".
	HeaderSeal = "Airlock-Seal"
	// Window is how far a sealed request's time may be from the verifier's
	// clock. A request replayed within it does the same thing again, which
	// every sealed endpoint makes harmless (idempotent by content or by
	// request id).
	Window = 5 * time.Minute
)

// Request seals msg for subject as frontend at now: it binds the subject,
// the body and the time, so a sealed request cannot be re-aimed at another
// endpoint or altered.
func (k Key) Request(msg *nats.Msg, frontend string, now time.Time) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	body := sha256.Sum256(msg.Data)
	msg.Header.Set(HeaderFrontend, frontend)
	msg.Header.Set(HeaderSeal, ms+"."+k.Sign("request/v1", frontend, msg.Subject, ms, string(body[:])))
}

// ErrUnsealed is returned for a request that carries no valid front-end seal.
var ErrUnsealed = errors.New("the request is not sealed by an airlock front-end")

// VerifyRequest checks a request's seal for subject and data at now and
// returns the front-end that sealed it.
func (k Key) VerifyRequest(subject string, header nats.Header, data []byte, now time.Time) (string, error) {
	frontend, sealed := header.Get(HeaderFrontend), header.Get(HeaderSeal)
	if frontend == "" || sealed == "" {
		return "", ErrUnsealed
	}
	ms, sig, ok := strings.Cut(sealed, ".")
	if !ok {
		return "", fmt.Errorf("%w: malformed seal", ErrUnsealed)
	}
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: malformed seal time", ErrUnsealed)
	}
	if d := now.Sub(time.UnixMilli(at)); d > Window || d < -Window {
		return "", fmt.Errorf("%w: sealed %s ago, outside the %s window (check the clocks)", ErrUnsealed, d.Round(time.Second), Window)
	}
	body := sha256.Sum256(data)
	if !k.Verify(sig, "request/v1", frontend, subject, ms, string(body[:])) {
		return "", fmt.Errorf("%w: the seal does not verify", ErrUnsealed)
	}
	return frontend, nil
}
