package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A standing grant answers only calls as risky as the ones it was made
// for: once a rule rates key files high, neither an adopted suggestion
// over an approved directory nor a reviewer's grant made from a routine
// call in the REST API allows a key file written inside that directory —
// a person is asked — while routine writes there still run.
func TestAStandingGrantNeverAnswersACallRiskierThanItWasMadeFor(t *testing.T) {
	w := newLearnWorld(t)
	root := w.signIn("root")
	// Priority 150: the default "write" rule (130) still asks about every
	// write; this one only raises the risk of a key file anywhere. (A key
	// file a suggestion's glob reaches: it never reaches a dotfile or a
	// hidden directory such as .ssh.)
	w.putHighRiskRule(root, `{"id":"key-files","priority":150,"server":"fs","tool":"write_file","args":{"/path":"**/*.pem"},"effect":"ask","risk":"high","reason":"key files"}`,
		"/srv/x/probe.pem")

	// An adopted suggestion: approved writes in two subdirectories of docs.
	w.record([]historyKind{{weight: 1, agent: "writer-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/app/docs/%s/page-%d.md", []string{"guide", "api"}[r.IntN(2)], r.IntN(40)), "content": fmt.Sprintf("# %d", r.IntN(1000))}
	}, verdict: always(approve)}}, 8)
	var adopted bool
	for _, s := range w.report().Suggestions {
		if s.Agent != "writer-bot" {
			continue
		}
		if !strings.Contains(s.Grant.GetArgumentGlobs()["/path"], "/srv/app/docs/guide/[!./]*") || s.Grant.GetMaxRisk() != airlockv1.Risk_RISK_MEDIUM {
			t.Fatalf("proposed %s (max risk %v): want /srv/app/docs/guide/[!./]* for medium risk", s.Scope, s.Grant.GetMaxRisk())
		}
		if status, body := root.post("/suggestions/"+s.ID+"/adopt", url.Values{}); status != http.StatusSeeOther {
			t.Fatalf("adopt %s: %d\n%s", s.ID, status, body)
		}
		adopted = true
	}
	if !adopted {
		t.Fatalf("no suggestion for writer-bot: %+v", w.report().Skipped)
	}

	// A reviewer's grant made through the REST API from a routine call.
	first := w.submit("wiki-bot", "fs", "write_file", map[string]any{"path": "/srv/wiki/guide/start.md", "content": "x"})
	if got := w.decisionOf(first); got != subject.ApprovalRequested {
		t.Fatalf("wiki-bot's first write: %s, want asked", got)
	}
	alice := w.signIn("alice")
	body, _ := json.Marshal(map[string]any{"from_call_id": first.CallId, "agent_id": "wiki-bot",
		"argument_globs": map[string]string{"/path": "/srv/wiki/**"}, "any_arguments": []string{"/content"}})
	var reply string
	// The approval service records the ask a moment after the policy makes it.
	testenv.Eventually(t, 10*time.Second, "a grant created from "+first.CallId, func() bool {
		var status int
		status, reply = alice.apiJSON(http.MethodPost, "/api/v1/grants", string(body))
		return status == http.StatusCreated
	})
	var created struct {
		Grant struct {
			MaxRisk string `json:"max_risk"`
		} `json:"grant"`
	}
	if err := json.Unmarshal([]byte(reply), &created); err != nil || created.Grant.MaxRisk != "RISK_MEDIUM" {
		t.Errorf("the grant made from a medium-risk call does not record it (%v): %s", err, reply)
	}

	write := func(agent, path string) string {
		return w.decisionOf(w.submit(agent, "fs", "write_file", map[string]any{"path": path, "content": "ssh-ed25519 AAAA attacker"}))
	}
	// The policy service applies a new grant when its watch sees it: both
	// grants allow a routine write first, so the asks below are theirs.
	for _, c := range []struct{ agent, routine, key string }{
		{"writer-bot", "/srv/app/docs/guide/page-1.md", "/srv/app/docs/guide/deploy.pem"},
		{"wiki-bot", "/srv/wiki/api/next.md", "/srv/wiki/deploy.pem"},
	} {
		testenv.Eventually(t, 10*time.Second, c.agent+"'s grant in force", func() bool { return write(c.agent, c.routine) == subject.Allowed })
		key := w.submit(c.agent, "fs", "write_file", map[string]any{"path": c.key, "content": "ssh-ed25519 AAAA attacker"})
		if got := w.decisionOf(key); got != subject.ApprovalRequested {
			t.Errorf("%s writing %s under its grant: %s, want a person asked", c.agent, c.key, got)
			continue
		}
		// Asked by the grant's own rule: only the risk kept the grant out.
		ev := testenv.WaitForEvent(t, w.deps.JS, "airlock.evt."+c.agent+"."+key.CallId+".>", subject.ApprovalRequested, 10*time.Second)
		if d := ev.GetApprovalRequested().GetDecision(); d.GetRuleId() != "write" || d.GetRisk() != airlockv1.Risk_RISK_HIGH {
			t.Errorf("%s writing %s: asked by %s at %v, want rule write at high risk", c.agent, c.key, d.GetRuleId(), d.GetRisk())
		}
	}
}

// putHighRiskRule puts a run-time rule through the REST API as admin and
// waits until a fs write_file to probe is asked about at high risk.
func (w *learnWorld) putHighRiskRule(admin *session, rule, probe string) {
	w.t.Helper()
	if status, body := admin.apiJSON(http.MethodPost, "/api/v1/rules", rule); status != http.StatusOK {
		w.t.Fatalf("put the risk rule: %d %s", status, body)
	}
	testenv.Eventually(w.t, 10*time.Second, "the risk rule in force", func() bool {
		c := w.submit("probe-bot", "fs", "write_file", map[string]any{"path": probe, "content": "x"})
		ev := testenv.WaitForEvent(w.t, w.deps.JS, "airlock.evt.probe-bot."+c.CallId+".>", subject.ApprovalRequested, 10*time.Second)
		return ev.GetApprovalRequested().GetDecision().GetRisk() == airlockv1.Risk_RISK_HIGH
	})
}
