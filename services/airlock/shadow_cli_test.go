package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/policies"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A candidate's module names and reasons are whatever its author (or the
// arguments its reason quotes) wrote: `airlock policy shadow start`,
// `status` and `divergences` (text and --json) print them with control and
// bidi characters escaped, and the JSON still reads back as the same text.
func TestShadowCommandsPrintCandidateTextEscaped(t *testing.T) {
	w := newLearnWorld(t)
	ctx := context.Background()
	tokenFile := w.rootTokenFile()

	// The default policy, but demo's echo (allowed live) is denied with a
	// reason carrying a terminal title escape and a bidi override, in a
	// module file whose name has one too.
	const hostile = "\x1b]0;pwned\x07 \u202egnp.exe"
	dir := t.TempDir()
	rego, data := echoDeniedCandidate(t, hostile)
	for name, text := range map[string][]byte{"airlock\u202egnp.rego": rego, "data.json": data} {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(ctx, t, append([]string{"policy", "shadow"}, append(args, "--api", w.base, "--token-file", tokenFile)...)...)
		if err != nil {
			t.Fatalf("policy shadow %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, raw := range []string{"\u202e", "\x1b", "\x07"} {
			if strings.Contains(out, raw) {
				t.Errorf("policy shadow %s printed %q raw:\n%q", strings.Join(args, " "), raw, out)
			}
		}
		return out
	}
	if out := cli("start", "--dir", dir); !strings.Contains(out, `airlock\u202egnp.rego`) {
		t.Errorf("start does not name the module escaped: %q", out)
	}
	cli("status")
	cli("status", "--json")

	var sum struct {
		Total  int `json:"total"`
		Groups []struct {
			Examples []struct {
				Reason string `json:"candidate_reason"`
			} `json:"examples"`
		} `json:"groups"`
	}
	testenv.Eventually(t, 10*time.Second, "the candidate's divergence on record", func() bool {
		if c := w.submit("echo-bot", "demo", "echo", map[string]any{"text": "hi"}); w.decisionOf(c) != "allowed" {
			t.Fatalf("the live policy did not allow echo")
		}
		out := cli("divergences", "--json")
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("divergences --json is not JSON: %v\n%s", err, out)
		}
		return sum.Total > 0
	})
	if len(sum.Groups) == 0 || len(sum.Groups[0].Examples) == 0 || !strings.Contains(sum.Groups[0].Examples[0].Reason, hostile) {
		t.Errorf("the JSON does not read back as the candidate's reason: %+v", sum)
	}
	cli("divergences")
}

// echoDeniedCandidate is the default policy (airlock.rego, data.json) with
// one change: demo's echo, which the policy in force allows, is denied with
// reason.
func echoDeniedCandidate(t *testing.T, reason string) (rego, data []byte) {
	t.Helper()
	rego, err := fs.ReadFile(policies.Default(), "airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	data, err = fs.ReadFile(policies.Default(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	const allow = `"tool": "echo", "effect": "allow", "risk": "low", "reason": "echo has no side effects"`
	if !strings.Contains(string(data), allow) {
		t.Fatalf("the default data.json no longer has %s: update this test's candidate", allow)
	}
	quoted, _ := json.Marshal(reason)
	return rego, []byte(strings.Replace(string(data), allow, `"tool": "echo", "effect": "deny", "risk": "low", "reason": `+string(quoted), 1))
}

// rootTokenFile is a file holding a personal API token of the admin root,
// for the CLI's --token-file.
func (w *learnWorld) rootTokenFile() string {
	t := w.t
	t.Helper()
	status, body := w.signIn("root").apiJSON(http.MethodPost, "/api/v1/tokens", `{"name":"cli"}`)
	var tok struct {
		Token string `json:"token"`
	}
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("personal token: %d %s", status, body)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(tok.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return tokenFile
}

// TestReplayAndShadowNameACandidateByOneID: `policy replay --policy DIR`
// and `policy shadow start --dir DIR` name the same candidate by the same
// id (its digest), in text and in JSON, so a person can match what replay
// says it would change with what shadow records; the revision replay used
// to print (the digest with the run-time rules) matched nothing shadow shows.
func TestReplayAndShadowNameACandidateByOneID(t *testing.T) {
	t.Setenv("AIRLOCK_DEV_DATA_DIR", t.TempDir())
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", "")
	w := newLearnWorld(t)
	ctx := context.Background()
	tokenFile := w.rootTokenFile()
	dir := t.TempDir()
	rego, data := echoDeniedCandidate(t, "no echo")
	for name, text := range map[string][]byte{"airlock.rego": rego, "data.json": data} {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(ctx, t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	code, err := decide.CodeFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := code.Hash
	api := []string{"--api", w.base, "--token-file", tokenFile}
	replay := []string{"policy", "replay", "--policy", dir, "--since", "", "--runtime-rules", "none", "--grants", "none", "--nats", w.cfg.NATS.URL}
	var replayJSON struct {
		Candidate string `json:"candidate_digest"`
	}
	var status struct {
		State struct {
			Candidate string `json:"candidate_digest"`
		} `json:"state"`
	}
	var div struct {
		Candidate string `json:"candidate_digest"`
	}
	for _, tc := range []struct {
		name string
		args []string
		got  func(out string) string
	}{
		{"shadow_start_names_it", append([]string{"policy", "shadow", "start", "--dir", dir}, api...), nil},
		{"replay_names_it", replay, nil},
		{"replay_json_names_it", append(replay, "--json"), func(out string) string { _ = json.Unmarshal([]byte(out), &replayJSON); return replayJSON.Candidate }},
		{"shadow_status_json_names_it", append([]string{"policy", "shadow", "status", "--json"}, api...), func(out string) string { _ = json.Unmarshal([]byte(out), &status); return status.State.Candidate }},
		{"shadow_divergences_json_names_it", append([]string{"policy", "shadow", "divergences", "--json", "--candidate", id}, api...), func(out string) string { _ = json.Unmarshal([]byte(out), &div); return div.Candidate }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := cli(tc.args...)
			if tc.got == nil {
				if !strings.Contains(out, "candidate "+id+" ") {
					t.Errorf("it does not name candidate %s:\n%s", id, out)
				}
				return
			}
			if got := tc.got(out); got != id {
				t.Errorf("candidate_digest is %q, want %q:\n%s", got, id, out)
			}
		})
	}
}
