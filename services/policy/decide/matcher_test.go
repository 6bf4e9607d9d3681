package decide

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/airlock-gate/airlock/policies"
	"github.com/airlock-gate/airlock/services/shared/calls"
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

// A restricting glob matches a path as airlock.rego's lexical and
// climbs_above_start read it, and the compiled rules as calls.LexicalPath
// does: both must resolve every spelling alike, or the fast path would let
// through a spelling the policy refuses. Every path of up to four segments
// drawn from names, ".", "..", "" and "...", joined by "/" or "\", with and
// without a leading separator.
func TestLexicalPathResolvesLikeAirlockRego(t *testing.T) {
	ctx := context.Background()
	src, err := fs.ReadFile(policies.Default(), "airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	q, err := rego.New(rego.Module("airlock.rego", string(src)),
		rego.Query(`x := [[data.airlock.lexical(p), count({1 | data.airlock.climbs_above_start(p)}) > 0] | some p in input]`)).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{""}
	for range 4 {
		for _, p := range paths {
			for _, seg := range []string{"a", ".", "..", "", "..."} {
				paths = append(paths, p+"/"+seg, p+`\`+seg)
			}
		}
		paths = slices.Compact(slices.Sorted(slices.Values(paths)))
	}
	for _, p := range slices.Clone(paths) {
		paths = append(paths, strings.TrimLeft(p, `/\`))
	}
	rs, err := q.Eval(ctx, rego.EvalInput(paths))
	if err != nil || len(rs) != 1 {
		t.Fatalf("evaluate lexical: %v %v", rs, err)
	}
	got := rs[0].Bindings["x"].([]any)
	for i, p := range paths {
		lexical, climbs := calls.LexicalPath(p)
		r := got[i].([]any)
		if climbs != r[1] || !climbs && lexical != r[0] {
			t.Errorf("%q: calls.LexicalPath gives %q (climbs %v), airlock.rego %q (climbs %v)", p, lexical, climbs, r[0], r[1])
		}
	}
	t.Logf("%d paths resolved alike", len(paths))
}
