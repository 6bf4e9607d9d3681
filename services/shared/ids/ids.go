// Package ids validates and creates the identifiers that appear in subjects.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxLen is the longest agent or call id accepted.
const MaxLen = 64

// IsIDByte reports whether c may appear in an id: [A-Za-z0-9_-]. Ids are
// checked several times per call on the hot path; comparing bytes costs a tenth
// of what the equivalent regular expression costs.
func IsIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// OnlyIDBytes reports whether s is made of [A-Za-z0-9_-] alone (true for "").
func OnlyIDBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if !IsIDByte(s[i]) {
			return false
		}
	}
	return true
}

// Validate reports whether s is a usable agent or call id: 1–64 characters
// from [A-Za-z0-9_-], so that it is always exactly one NATS subject token and
// NATS permissions can confine an agent to its own calls. kind names the id
// in the error ("agent id", "call id").
func Validate(kind, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty: set it to 1-%d characters from A-Z a-z 0-9 _ -", kind, MaxLen)
	case len(s) > MaxLen:
		return fmt.Errorf("%s %.20q... is %d characters long: the limit is %d", kind, s, len(s), MaxLen)
	case !OnlyIDBytes(s):
		return fmt.Errorf("%s %q has characters outside A-Z a-z 0-9 _ -: use only those", kind, s)
	}
	return nil
}

// ReservedPrefix starts the ids airlock keeps for itself ("_system",
// "_invalid"): no agent may be named with it, so no agent can read or write
// the system's events.
const ReservedPrefix = "_"

// ValidateAgent is Validate for an agent id, which also may not start with
// ReservedPrefix.
func ValidateAgent(s string) error {
	if err := Validate("agent id", s); err != nil {
		return err
	}
	if strings.HasPrefix(s, ReservedPrefix) {
		return fmt.Errorf("agent id %q starts with %q, which airlock reserves for its own events: choose another name", s, ReservedPrefix)
	}
	return nil
}

// New returns a random id with the given prefix, e.g. New("call") → "call_3f9c…".
// 96 random bits make collisions negligible without coordination.
func New(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // cannot happen on supported platforms
	}
	// Built in one allocation: ids are made on the hot path (a call id per
	// submit, a claim token per execution), where fmt cost several.
	var h [2 * len(b)]byte
	hex.Encode(h[:], b[:])
	var sb strings.Builder
	sb.Grow(len(prefix) + 1 + len(h))
	sb.WriteString(prefix)
	sb.WriteByte('_')
	sb.Write(h[:])
	return sb.String()
}
