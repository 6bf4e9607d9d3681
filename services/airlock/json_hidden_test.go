package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// hiddenRunes are characters an agent's text may carry that show as
// nothing or reorder what is around them: a right-to-left override, a
// zero-width space and a tag character (past U+FFFF), each with the JSON
// escape that must stand for it (a surrogate pair for the last).
var hiddenRunes = []struct{ raw, escaped string }{
	{"\u202e", `\u202e`},
	{"\u200b", `\u200b`},
	{"\U000E0041", `\udb40\udc41`},
}

// hiddenText holds every one of hiddenRunes.
const hiddenText = "pay\u202eexe.txt\u200b\U000E0041"

// Every command that prints JSON prints valid JSON with the hidden
// characters of an agent's text (or an author's, a reviewer's) as JSON \u
// escapes (escape.JSON, as `audit query --json`): a JSON reader gets the
// text back whole, and a person reading the output sees what hides.
func TestJSONCommandsPrintHiddenCharactersAsJSONEscapes(t *testing.T) {
	w := newLearnWorld(t)
	ctx := context.Background()
	tokenFile := w.rootTokenFile()
	api := []string{"--api", w.base, "--token-file", tokenFile}
	admin := w.signIn("root")

	// A history policy suggest learns from, under a directory named with
	// the hidden text.
	w.record([]historyKind{{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/%s/%d.md", hiddenText, r.IntN(50)), "content": "note"}
	}, verdict: always(approve)}}, 6)
	// A call waiting for a person, its arguments carrying the hidden text.
	pending := w.submit("bot", "fs", "write_file", map[string]any{"path": "/srv/out.txt", "content": hiddenText})
	if got := w.decisionOf(pending); got != "approval_requested" {
		t.Fatalf("a write to /srv was %s, want it asked about", got)
	}
	testenv.Eventually(t, 10*time.Second, "the asked call among the pending ones", func() bool {
		out, err := runCLI(ctx, t, append([]string{"approvals", "list", "--json"}, api...)...)
		return err == nil && strings.Contains(out, pending.CallId)
	})
	// A run-time rule whose reason carries it.
	rule, _ := json.Marshal(map[string]any{"id": "hidden-reason", "effect": "deny", "server": "none", "tool": "none", "reason": hiddenText})
	if status, body := admin.apiJSON(http.MethodPost, "/api/v1/rules", string(rule)); status != http.StatusOK {
		t.Fatalf("put the rule: %d %s", status, body)
	}
	// A candidate in shadow that denies demo's echo with it, from a module
	// file named with it; an echo then diverges.
	dir := t.TempDir()
	rego, data := echoDeniedCandidate(t, hiddenText)
	for name, text := range map[string][]byte{"airlock" + hiddenText + ".rego": rego, "data.json": data} {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runCLI(ctx, t, append([]string{"policy", "shadow", "start", "--dir", dir}, api...)...); err != nil {
		t.Fatalf("policy shadow start: %v\n%s", err, out)
	}
	testenv.Eventually(t, 10*time.Second, "the candidate's divergence on record", func() bool {
		w.submit("echo-bot", "demo", "echo", map[string]any{"text": "hi"})
		out, err := runCLI(ctx, t, append([]string{"policy", "shadow", "divergences", "--json"}, api...)...)
		return err == nil && strings.Contains(out, `"total"`) && !strings.Contains(out, `"total": 0`)
	})
	callFile := filepath.Join(t.TempDir(), "call.json")
	if err := os.WriteFile(callFile, []byte(`{"agent_id":"bot","server":"demo","tool":"echo","arguments":{"text":"hi"}}`), 0o600); err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) func(*testing.T) string {
		return func(t *testing.T) string {
			out, err := runCLI(ctx, t, args...)
			if err != nil {
				t.Fatalf("airlock %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return out
		}
	}
	for _, tt := range []struct {
		name  string
		print func(*testing.T) string
	}{
		{"approvals_list", cli(append([]string{"approvals", "list", "--json"}, api...)...)},
		{"approvals_show", cli(append([]string{"approvals", "show", "--json", "bot/" + pending.CallId}, api...)...)},
		{"policy_rules_list", cli("policy", "rules", "list", "--json", "--nats", w.cfg.NATS.URL)},
		{"policy_eval", cli("policy", "eval", "--call", callFile, "--dir", dir, "--offline")},
		{"policy_shadow_status", cli(append([]string{"policy", "shadow", "status", "--json"}, api...)...)},
		{"policy_shadow_divergences", cli(append([]string{"policy", "shadow", "divergences", "--json"}, api...)...)},
		{"policy_suggest", cli("policy", "suggest", "--nats", w.cfg.NATS.URL, "--json")},
		{"call_and_await_outcome", func(t *testing.T) string {
			var out bytes.Buffer
			result, _ := json.Marshal(map[string]string{"text": hiddenText}) // what the tool answered
			if err := printOutcome(&out, io.Discard, "", "c1", airlock.Outcome{CallID: "c1", Revision: 1, Status: airlock.StatusCompleted, Result: result}); err != nil {
				t.Fatal(err)
			}
			return out.String()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.print(t)
			var v any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("the output is not JSON: %v\n%s", err, out)
			}
			if !holdsString(v, hiddenText) {
				t.Errorf("the JSON does not read back as the hidden text %q:\n%s", hiddenText, out)
			}
			for _, r := range hiddenRunes {
				if strings.Contains(out, r.raw) {
					t.Errorf("the output holds %q raw:\n%s", r.raw, out)
				}
				if !strings.Contains(out, r.escaped) {
					t.Errorf("the output lacks %s:\n%s", r.escaped, out)
				}
			}
		})
	}
}

// holdsString reports whether a string in the decoded JSON v contains s.
func holdsString(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, s)
	case []any:
		for _, e := range v {
			if holdsString(e, s) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.Contains(k, s) || holdsString(e, s) {
				return true
			}
		}
	}
	return false
}
