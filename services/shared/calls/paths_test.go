package calls_test

import (
	"testing"

	"github.com/airlock-gate/airlock/services/shared/calls"
)

func TestACleanPathHasNoDotSegmentBehindEitherSeparator(t *testing.T) {
	for _, tt := range []struct {
		path         string
		clean, ended bool
	}{
		{"/tmp/x", true, false},
		{"notes.txt", true, false},
		{"/tmp/.env", true, false},
		{"/tmp/x..y/z", true, false},
		{"/tmp/", true, true},
		{`C:\tmp\`, true, true},
		{"", true, false},
		{"/tmp/../etc/passwd", false, false},
		{"./x", false, false},
		{"/tmp/.", false, false},
		{`/tmp\..\etc`, false, false},
		{`a\.\b`, false, false},
		{"..", false, false},
		{"/tmp/x/../", false, true},
	} {
		if got := calls.CleanPath(tt.path); got != tt.clean {
			t.Errorf("CleanPath(%q) = %v, want %v", tt.path, got, tt.clean)
		}
		if got := calls.EndsInSeparator(tt.path); got != tt.ended {
			t.Errorf("EndsInSeparator(%q) = %v, want %v", tt.path, got, tt.ended)
		}
	}
}

func TestALexicalPathIsHowEverySpellingOfAPathResolves(t *testing.T) {
	for _, tt := range []struct {
		path, lexical string
		climbs        bool
	}{
		{"/etc/passwd", "/etc/passwd", false},
		{"/etc/./passwd", "/etc/passwd", false},
		{"/tmp/../etc/passwd", "/etc/passwd", false},
		{"//etc//passwd/", "/etc/passwd", false},
		{`\etc\passwd`, "/etc/passwd", false},
		{`/tmp\x\..\..\etc`, "/etc", false},
		{"/../etc", "/etc", false},
		{"./secret/x", "secret/x", false},
		{"src/../secret", "secret", false},
		{"", ".", false},
		{"a/..", ".", false},
		{"..", "..", true},
		{"a/../../etc/passwd", "../etc/passwd", true},
		{`..\x`, "../x", true},
		{".../x", ".../x", false},
	} {
		lexical, climbs := calls.LexicalPath(tt.path)
		if lexical != tt.lexical || climbs != tt.climbs {
			t.Errorf("LexicalPath(%q) = %q, %v; want %q, %v", tt.path, lexical, climbs, tt.lexical, tt.climbs)
		}
	}
	// A path already resolved is the same string, not a copy.
	if n := testing.AllocsPerRun(100, func() { calls.LexicalPath("/etc/passwd") }); n != 0 {
		t.Errorf("LexicalPath of a resolved path allocates %v times", n)
	}
}
