package main

import (
	"bytes"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestRulesListKeepsItsTableReadable: a rule matching many tools is cut to
// a bounded width with a marker and a pointer to the whole rule; --wide
// prints it whole.
func TestRulesListKeepsItsTableReadable(t *testing.T) {
	long := "{" + strings.Repeat("claude__Bash,codex__shell,", 16) + "copilot__bash}"
	resp := &airlockv1.RulesListResponse{
		PolicyRevision: "rev1",
		BuiltinRules: []*airlockv1.PolicyRule{
			{Id: "coding-shell-ask", Priority: 3, Pattern: long, Effect: "ask", Risk: "high", Reason: strings.Repeat("a long reason ", 10)},
			{Id: "short", Priority: 1, Tool: "echo", Effect: "allow", Reason: "short"},
		},
	}
	for _, tc := range []struct {
		name          string
		wide          bool
		maxTableWidth int // 0: unbounded
		want, notWant []string
	}{
		{"the_default_table_is_bounded_and_says_what_was_cut", false, 200,
			[]string{"...", "airlock policy rules show ID"}, []string{long}},
		{"wide_prints_every_match_whole", true, 0,
			[]string{long}, []string{"airlock policy rules show ID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			printRules(&buf, resp, tc.wide)
			out := buf.String()
			for _, line := range strings.Split(out, "\n") {
				if tc.maxTableWidth > 0 && strings.Contains(line, "built-in") && len([]rune(line)) > tc.maxTableWidth {
					t.Errorf("a row is %d characters wide:\n%s", len([]rune(line)), line)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("the output holds %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestRulesListSaysWhatANamedArgumentMustMatch: a rule's conditions on
// named arguments are listed both ways, matching and not matching.
func TestRulesListSaysWhatANamedArgumentMustMatch(t *testing.T) {
	resp := &airlockv1.RulesListResponse{BuiltinRules: []*airlockv1.PolicyRule{{
		Id: "edit-secrets", Priority: 5, Pattern: "claude__Write", Effect: "ask", Risk: "high",
		ArgumentsMatching: map[string]string{"/file_path": `\.pem$`}, ArgumentsNotMatching: map[string]string{"/mode": `^x$`},
	}}}
	var buf bytes.Buffer
	printRules(&buf, resp, true)
	for _, want := range []string{`/file_path matches \.pem$`, "/mode does not match ^x$"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the rules list lacks %q:\n%s", want, buf.String())
		}
	}
}
