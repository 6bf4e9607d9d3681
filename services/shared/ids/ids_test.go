package ids

import (
	"regexp"
	"strings"
	"testing"
)

func TestIDBytesAreExactlyTheDocumentedSet(t *testing.T) {
	want := regexp.MustCompile(`^[A-Za-z0-9_-]$`)
	for c := 0; c < 256; c++ {
		if got := IsIDByte(byte(c)); got != want.MatchString(string([]byte{byte(c)})) {
			t.Errorf("IsIDByte(%q) = %v", byte(c), got)
		}
	}
}

func TestValidateAcceptsOnlyShortIDsOfTheIDBytes(t *testing.T) {
	tests := []struct {
		name, id string
		ok       bool
	}{
		{"letters, digits, underscore and dash are accepted", "Call_9-x", true},
		{"an empty id is refused", "", false},
		{"a dot (a subject separator) is refused", "a.b", false},
		{"a wildcard is refused", "a*", false},
		{"a space is refused", "a b", false},
		{"a non-ASCII letter is refused", "caf\u00e9", false},
		{"64 characters are accepted", strings.Repeat("a", MaxLen), true},
		{"65 characters are refused", strings.Repeat("a", MaxLen+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Validate("call id", tt.id); (err == nil) != tt.ok {
				t.Fatalf("Validate(%q) = %v, want ok=%v", tt.id, err, tt.ok)
			}
		})
	}
}
