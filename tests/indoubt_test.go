package tests

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A call that ended failed with outcome indeterminate asks a person whether
// it happened: the CLI and the console list it, a reviewer answers once on
// the console's form (never without its CSRF token) or with `airlock
// approvals resolve`, the trail records who said what, and the agent sees
// the answer through the SDK. The note is a person's text shown to others:
// escaped on the terminal and the page.
func TestACallThatEndedInDoubtIsResolvedByAPerson(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A gate-only call a person approves: nothing runs it, so its only end
	// is the one written below, as the executor writes it when it died while
	// a non-idempotent tool ran (tests/executor_kill_test.go makes one).
	id := mustSubmit(t, bot, airlock.Call{ID: "doubt-1", Tool: "demo__write_file", Args: map[string]any{"path": "a.txt", "content": "x"}, AgentRuns: true})
	waitPending(t, dev, adminToken(t, dev), id)
	if status, body := apiPost(t, dev.HTTPURL+"/api/v1/approvals/bot/doubt-1/approve", adminToken(t, dev), `{"revision":1}`); status != http.StatusOK {
		t.Fatalf("approve: %d %s", status, body)
	}
	if out, err := bot.AwaitDecision(ctx, id, 1); err != nil || out.Status != airlock.StatusApproved {
		t.Fatalf("the gate-only write: %v %v, want approved", out, err)
	}
	_, js := dev.Admin(t)
	failed := &airlockv1.Event{EventId: "bot.doubt-1.1.failed", AgentId: "bot", CallId: id, Revision: 1,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "executor"},
		Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "indeterminate", Outcome: "indeterminate",
			Message: "executor died while running a non-idempotent tool"}}}
	if _, err := bus.NewPublisher(js, "airlock/executor").Publish(ctx, failed, ""); err != nil {
		t.Fatal(err)
	}
	out, err := bot.Await(ctx, id)
	if err != nil || out.Status != airlock.StatusFailed || out.FailureOutcome != "indeterminate" || out.Resolution != nil {
		t.Fatalf("the agent's outcome: %+v %v, want failed, indeterminate, not resolved yet", out, err)
	}

	testenv.Eventually(t, 20*time.Second, "the CLI to list bot/doubt-1 in doubt", func() bool {
		r := cli(t, dev, "approvals", "in-doubt")
		return r.Code == 0 && strings.Contains(r.Stdout, "bot/doubt-1") && strings.Contains(r.Stdout, "demo__write_file") &&
			strings.Contains(r.Stdout, "airlock approvals resolve bot/doubt-1")
	})

	user, password := adminLogin(t, dev)
	s := signInAt(t, dev.HTTPURL, user, password)
	status, page := s.page("/in-doubt")
	if status != http.StatusOK || !strings.Contains(page, "bot/doubt-1") || !strings.Contains(page, `value="yes"`) {
		t.Fatalf("the in-doubt page: %d\n%s", status, page)
	}
	// The call page asks too, and its form returns there.
	status, page = s.page("/calls/bot/doubt-1")
	if status != http.StatusOK || !strings.Contains(page, "In doubt: did it happen?") || !strings.Contains(page, `action="/calls/bot/doubt-1/in-doubt"`) {
		t.Fatalf("the call page: %d\n%s", status, page)
	}
	csrf := csrfRE.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no CSRF token on the call page's form")
	}
	note := "checked the ledger \x1b]0;pwned\x07 <script>alert(1)</script>"
	form := url.Values{"happened": {"yes"}, "note": {note}, "from": {"call"}}
	if status, body := s.post("/calls/bot/doubt-1/in-doubt", form); status != http.StatusForbidden {
		t.Fatalf("a form without its CSRF token: %d, want 403\n%s", status, body)
	}
	form.Set("_csrf", csrf[1])
	if status, body := s.post("/calls/bot/doubt-1/in-doubt", form); status != http.StatusSeeOther {
		t.Fatalf("the reviewer's answer: %d\n%s", status, body)
	}
	if _, page := s.page("/calls/bot/doubt-1"); !strings.Contains(page, "said it happened") || strings.Contains(page, `value="yes"`) {
		t.Fatalf("the call page after the answer:\n%s", page)
	}

	res, err := bot.AwaitResolution(ctx, id, 1)
	if err != nil || !res.Happened || res.By != user || res.Note != note {
		t.Fatalf("the agent sees %+v %v, want happened, by %s, with the note", res, err, user)
	}
	if out, err := bot.Await(ctx, id); err != nil || out.Resolution == nil || !out.Resolution.Happened {
		t.Fatalf("Await after the answer: %+v %v, want the resolution with the outcome", out, err)
	}
	ev := lastEvent(t, js, "airlock.evt.bot.doubt-1.outcome_resolved")
	if ev.GetActor().GetId() != user || ev.GetActor().GetChannel() != "console" || !ev.GetOutcomeResolved().GetHappened() {
		t.Fatalf("outcome_resolved %v", ev)
	}

	if r := cli(t, dev, "approvals", "resolve", "bot/doubt-1", "--happened", "no", "--note", "it did not"); r.Code != 2 || !strings.Contains(r.Stderr, "resolved already") {
		t.Fatalf("another answer after the first: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := cli(t, dev, "approvals", "resolve", "bot/doubt-1", "--happened", "yes", "--note", note); r.Code != 1 || !strings.Contains(r.Stdout, "nothing changed") {
		t.Fatalf("the same answer again: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r := cli(t, dev, "approvals", "in-doubt", "--all")
	if r.Code != 0 || !strings.Contains(r.Stdout, "it happened") || strings.ContainsAny(r.Stdout, "\x1b\x07") {
		t.Fatalf("the answered list on a terminal: exit %d %q", r.Code, r.Stdout)
	}
	if r := cli(t, dev, "approvals", "in-doubt"); !strings.Contains(r.Stdout, "no call is in doubt") {
		t.Fatalf("open calls after the answer:\n%s", r.Stdout)
	}
	if _, page := s.page("/in-doubt?all=1"); strings.Contains(page, "<script>alert") || strings.Contains(page, "\x1b") || !strings.Contains(page, "checked the ledger") {
		t.Fatalf("the note on the page is not shown inertly:\n%s", page)
	}
}
