package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A candidate policy in shadow, driven as an operator would: started from a
// directory with the CLI, it decides each live call beside the policy in
// force (which still decides), the divergence reaches the audit trail, the
// CLI and the console page, and stopping it is recorded with who did it.
func TestAShadowCandidateShowsWhereItWouldDecideOtherwise(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	dev.Agent(t, "bot")
	tokenFile := filepath.Join(dev.DataDir, "admin.token")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	// The candidate: the default policy with demo's echo asking a person.
	cand := t.TempDir()
	rego, err := os.ReadFile("../policies/airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../policies/data.json")
	if err != nil {
		t.Fatal(err)
	}
	const allow = `"tool": "echo", "effect": "allow"`
	if !strings.Contains(string(data), allow) {
		t.Fatalf("policies/data.json no longer has %s: update this test's candidate", allow)
	}
	writeFile(t, filepath.Join(cand, "airlock.rego"), string(rego))
	writeFile(t, filepath.Join(cand, "data.json"), strings.Replace(string(data), allow, `"tool": "echo", "effect": "ask"`, 1))

	if r := cli(t, dev, "policy", "shadow", "start", "--dir", cand, "--token-file", tokenFile); r.Code != 0 || !strings.Contains(r.Stdout, "runs in shadow") {
		t.Fatalf("shadow start: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	testenv.Eventually(t, 10*time.Second, "the policy service running the candidate", func() bool {
		r := cli(t, dev, "policy", "shadow", "status", "--token-file", tokenFile)
		return r.Code == 0 && strings.HasPrefix(r.Stdout, "on: candidate") && strings.Contains(r.Stdout, "started by admin")
	})

	// The live decision stands: echo runs without asking anyone.
	if r := cli(t, dev, "call", "--agent", "bot", "--tool", "demo__echo", "--args", `{"text":"hi"}`, "--call-id", "sh1", "--wait", "30s"); r.Code != 0 ||
		!strings.Contains(r.Stdout, `"status": "completed"`) {
		t.Fatalf("echo under a candidate that would ask: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var sum struct {
		Total  int `json:"total"`
		Groups []struct {
			Tool      string `json:"tool"`
			Live      string `json:"live_action"`
			Candidate string `json:"candidate_action"`
			LiveRule  string `json:"live_rule_id"`
			Examples  []struct {
				Agent string `json:"agent_id"`
				Call  string `json:"call_id"`
			} `json:"examples"`
		} `json:"groups"`
	}
	testenv.Eventually(t, 10*time.Second, "the divergence in the audit trail", func() bool {
		r := cli(t, dev, "policy", "shadow", "divergences", "--json", "--token-file", tokenFile)
		return r.Code == 0 && json.Unmarshal([]byte(r.Stdout), &sum) == nil && sum.Total > 0
	})
	if g := sum.Groups; sum.Total != 1 || len(g) != 1 || g[0].Tool != "demo__echo" || g[0].Live != "allow" || g[0].Candidate != "ask" ||
		g[0].LiveRule != "demo-echo" || len(g[0].Examples) != 1 || g[0].Examples[0].Call != "sh1" {
		t.Fatalf("divergences %+v: want one, echo allowed by demo-echo live, asked by the candidate, call sh1", sum)
	}
	if r := cli(t, dev, "policy", "shadow", "divergences", "--token-file", tokenFile); !strings.Contains(r.Stdout, "allow by demo-echo") || !strings.Contains(r.Stdout, "bot/sh1") {
		t.Errorf("divergences table:\n%s%s", r.Stdout, r.Stderr)
	}
	if status, page := bearerGet(t, dev.HTTPURL+"/shadow", strings.TrimSpace(string(token))); status != 200 ||
		!strings.Contains(page, "demo__echo") || !strings.Contains(page, `href="/calls/bot/sh1"`) || !strings.Contains(page, "<strong>On</strong>") {
		t.Errorf("the console's shadow page (status %d) does not show the divergence:\n%.2000s", status, page)
	}

	if r := cli(t, dev, "policy", "shadow", "stop", "--token-file", tokenFile); r.Code != 0 {
		t.Fatalf("shadow stop: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	testenv.Eventually(t, 10*time.Second, "both changes in the audit trail", func() bool {
		r := cli(t, dev, "audit", "query", "--type", "shadow_changed")
		return strings.Contains(r.Stdout, "shadow on: candidate") && strings.Contains(r.Stdout, "shadow off: candidate") && strings.Count(r.Stdout, "admin") >= 2
	})
}
