package decide

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/policies"
)

// defaultArgumentsMatch returns the arguments_match and arguments_matching
// expressions of the default policy's rules (both run behind the filter),
// by rule id and, for arguments_matching, pointer.
func defaultArgumentsMatch(t *testing.T) map[string]string {
	t.Helper()
	raw, err := fs.ReadFile(policies.Default(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Airlock struct {
			Rules []struct {
				ID                string            `json:"id"`
				ArgumentsMatch    string            `json:"arguments_match"`
				ArgumentsMatching map[string]string `json:"arguments_matching"`
			} `json:"rules"`
		} `json:"airlock"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range data.Airlock.Rules {
		if r.ArgumentsMatch != "" {
			out[r.ID] = r.ArgumentsMatch
		}
		for ptr, e := range r.ArgumentsMatching {
			out[r.ID+" "+ptr] = e
		}
	}
	if len(out) == 0 {
		t.Fatal("the default policy has no arguments_match rule to check the filter with")
	}
	return out
}

// The filter in front of an arguments_match expression decides every
// string as the expression alone does: the default policy's expressions
// and shapes that exercise each part of the analysis, on strings built
// from their literals, separators, capitals and the non-ASCII letters that
// (?i) folds onto ASCII ones (ſ is s, K is k).
func TestTheLiteralFilterDecidesEveryStringAsItsExpression(t *testing.T) {
	exprs := defaultArgumentsMatch(t)
	for name, e := range map[string]string{
		"a case-insensitive word":            `(?i)secret`,
		"a case-sensitive word":              `Secret`,
		"a repeated part":                    `(ab)+c`,
		"a counted repetition":               `x{2,3}y`,
		"an optional prefix":                 `(ab|cd)?ef`,
		"a small class":                      `[rd]x`,
		"a folded class":                     `(?i)[k-s]ey`,
		"word boundaries":                    `\bkey\b`,
		"an alternative that matches all":    `key|.*`,
		"an empty expression":                ``,
		"a non-ASCII literal":                `(?i)ſecret`,
		"anchors around alternatives":        `(?i)(^|/)(\.env|id_rsa)($|/)`,
		"a case-sensitive part in (?i)":      `(?i)grep\s(?-i:-[a-zA-Z]*F)`,
		"a long product of classes":          `[ab][cd][ef][gh][ij][kl][mn]z`,
		"an alternation too large for exact": `(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)q`,
	} {
		exprs[name] = e
	}
	for name, e := range exprs {
		re := regexp.MustCompile(e)
		f := newMatchFilter(re)
		agreeOnGeneratedStrings(t, name+" `"+e+"`", f.lits, f.MatchString, re.MatchString)
	}
}

// The filter in front of a rule's glob decides every name as the glob
// alone does: the default policy's patterns and the glob syntax's parts.
func TestTheLiteralFilterDecidesEveryNameAsItsGlob(t *testing.T) {
	raw, err := fs.ReadFile(policies.Default(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Airlock struct {
			Rules []map[string]any `json:"rules"`
		} `json:"airlock"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	globs := map[string]string{
		"a prefix":               "op12_*",
		"a question mark":        "a?c__*",
		"a class":                "[abc]x__*",
		"a negated class":        "[!abc]x__*",
		"a range":                "[a-c]x",
		"an escaped star":        `x\*y`,
		"nested braces":          "{a{b,c},d}__e",
		"a comma outside":        "a,b",
		"a super star":           "**fetch**",
		"an unclosed class":      "[ab",
		"a range ending in ]":    "[A-]]x",
		"a negated range to ]":   "[!*-]]x",
		"a range to ] in braces": "{a,[A-]]}zz",
		"a non-ASCII character":  "*é*",
	}
	for _, r := range data.Airlock.Rules {
		for _, k := range []string{"pattern", "tool_pattern"} {
			if p, ok := r[k].(string); ok {
				globs[fmt.Sprint(r["id"], " ", k)] = p
			}
		}
	}
	for name, p := range globs {
		g, err := compileGlob(p, nil)
		if err != nil {
			continue // a glob that does not compile is refused before matching
		}
		f := newGlobFilter(g)
		agreeOnGeneratedStrings(t, name+" `"+p+"`", f.lits, f.Match, g.Match)
	}
}

// agreeOnGeneratedStrings checks that a filtered match and the plain one
// agree on strings built from the filter's literals, separators, capitals,
// literals with a character dropped and the non-ASCII letters that (?i)
// folds onto ASCII ones (ſ is s, K is k).
func agreeOnGeneratedStrings(t *testing.T, name string, lits literalFilter, filtered, plain func(string) bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(27, 3))
	alphabet := []string{"/", "~", ".", "-", "_", "__", " ", "\t", "\n", "--f", "-rF", "..", "ſ", "\u212a", "é", "ab", "cd", "ef", "x", "y", "q", "*", "fs", "read_file"}
	n := 0
	for _, set := range lits.sets {
		for _, l := range set.lits {
			alphabet = append(alphabet, string(l))
		}
		n += len(set.lits)
	}
	rejected := 0
	for range 3000 {
		var b strings.Builder
		for range rng.IntN(6) {
			p := alphabet[rng.IntN(len(alphabet))]
			switch rng.IntN(4) {
			case 0:
				p = strings.ToUpper(p)
			case 1: // a literal with one character dropped
				if len(p) > 1 {
					k := rng.IntN(len(p))
					p = p[:k] + p[k+1:]
				}
			}
			b.WriteString(p)
		}
		s := b.String()
		if got, want := filtered(s), plain(s); got != want {
			t.Fatalf("%s on %q: with the filter %v, without %v", name, s, got, want)
		}
		if !lits.mayMatch(s) {
			rejected++
		}
	}
	t.Logf("%s: %d sets of %d literals, %d of 3000 strings filtered out", name, len(lits.sets), n, rejected)
}

// An ordinary argument never reaches the secret expressions' regular
// expression: that is what the filter is for.
func TestTheLiteralFilterPassesOverOrdinaryArguments(t *testing.T) {
	for id, e := range defaultArgumentsMatch(t) {
		f := newMatchFilter(regexp.MustCompile(e))
		for _, s := range []string{"/home/me/notes.txt", "utf-8", "hello from the bench", "src/main.go"} {
			if f.lits.mayMatch(s) {
				t.Errorf("rule %s: %q passes the filter, so every decision runs the whole expression on it", id, s)
			}
		}
		for _, s := range []string{"/home/me/.ssh/id_rsa", "cat .ENV", "~/.config/gh/hosts.yml"} {
			// An expression of a patch's header lines reads the path there.
			if strings.Contains(e, `\*\*\* (add file`) {
				s = "*** Begin Patch\n*** Update File: " + s + "\n@@\n*** End Patch"
			}
			if !f.MatchString(s) {
				t.Errorf("rule %s: %q does not match", id, s)
			}
		}
	}
}
