package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/console"
)

// The shadow page and its API group the candidate's divergences by tool
// and both rules, newest examples first, and show what an agent (or a
// candidate's reason quoting its arguments) wrote as inert text.
func TestShadowDivergencesAreGroupedByRuleAndToolWithEscapedExamples(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	row := func(seq uint64, call, tool, decision, live, cand, digest, reason string) console.AuditRow {
		return console.AuditRow{Seq: seq, Time: now.Add(time.Duration(seq) * time.Second), Type: "shadow_divergence", Agent: "bot", Call: call, Tool: tool,
			Decision: decision, RuleID: live, DecidedBy: "shadow:rule:" + cand, PolicyRevision: digest, Reason: reason}
	}
	hostile := "the candidate would ask (rule echo-asks): path <script>alert(1)</script>\u202egnp.exe"
	mem := &memAudit{rows: []console.AuditRow{
		row(1, "e1", "demo__echo", "allow→ask", "demo-echo", "echo-asks", "cand1", hostile),
		row(2, "e2", "demo__echo", "allow→ask", "demo-echo", "echo-asks", "cand1", hostile),
		row(3, "w1", "fs__write_file", "ask→deny", "write", "no-writes", "cand1", "no writes"),
		row(4, "old", "demo__echo", "allow→deny", "demo-echo", "x", "other", "another candidate"),
		{Seq: 5, Time: now, Type: "allowed", Agent: "bot", Call: "e1", Tool: "demo__echo", Decision: "allow"},
	}}
	_, e.srv = e.startConsoleWith(console.Options{Audit: mem})
	auditor := e.browser()
	auditor.signIn("audrey")

	p := auditor.get("/shadow?candidate=cand1")
	if p.Status != http.StatusOK {
		t.Fatalf("%d\n%s", p.Status, p.Body)
	}
	for _, want := range []string{"3 live call(s)", "demo__echo", "demo-echo", "echo-asks", "fs__write_file", "no-writes",
		`href="/calls/bot/e2"`, "&lt;script&gt;alert(1)&lt;/script&gt;", `\u202e`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the shadow page lacks %q", want)
		}
	}
	for _, never := range []string{"<script>alert", "\u202e", "another candidate"} {
		if strings.Contains(p.Body, never) {
			t.Errorf("the shadow page holds %q", never)
		}
	}
	if first, second := strings.Index(p.Body, "bot/e2"), strings.Index(p.Body, "bot/e1"); first < 0 || second < first {
		t.Errorf("examples are not newest first")
	}

	var sum console.ShadowSummary
	api := auditor.get("/api/v1/policy/shadow/divergences?candidate=cand1&since=1h")
	if err := json.Unmarshal([]byte(api.Body), &sum); err != nil || api.Status != http.StatusOK {
		t.Fatalf("%d %v\n%s", api.Status, err, api.Body)
	}
	if sum.Total != 3 || len(sum.Groups) != 2 || sum.Groups[0].Count != 2 || sum.Groups[0].Live != "allow" || sum.Groups[0].Candidate != "ask" ||
		sum.Groups[0].CandidateRule != "echo-asks" || len(sum.Groups[0].Examples) != 2 {
		t.Errorf("summary %+v", sum)
	}

	reviewer := e.browser()
	reviewer.signIn("alice")
	if p := reviewer.get("/shadow"); p.Status != http.StatusForbidden {
		t.Errorf("a reviewer reads the shadow page: %d", p.Status)
	}
	if p := reviewer.post("/api/v1/policy/shadow", nil); p.Status != http.StatusForbidden && p.Status != http.StatusUnauthorized {
		t.Errorf("a reviewer starts shadow: %d", p.Status)
	}
}
