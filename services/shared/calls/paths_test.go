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
