package decide

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/policies"
)

// The compiled command conditions use the expressions of airlock.rego's
// command_matches, the same text: a change to one that the other misses
// would let the fast path decide a shell command otherwise than the policy.
func TestCommandExpressionsAreAirlockRegos(t *testing.T) {
	src, err := fs.ReadFile(policies.Default(), "airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	for name, expr := range map[string]string{
		"unsafe characters": commandUnsafe.String(), "options that run or write": commandRunsMore.String(),
		"operators": commandOperators.String(), "blanks": commandBlanks.String(), "quotes": commandQuotes.String(),
	} {
		if !strings.Contains(string(src), "`"+expr+"`") {
			t.Errorf("airlock.rego does not hold the %s expression `%s` of matcher.go", name, expr)
		}
	}
}
