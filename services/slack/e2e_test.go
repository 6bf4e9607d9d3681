package slack_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/policies"
	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	airlockconfig "github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// TestMain removes the airlock build the end-to-end tests run.
func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// The end-to-end tests run the real `airlock dev` binary (policy, approval,
// executor, console and this Slack integration wired as in production)
// against the Slack fake, and act as Slack (signed posts to
// /slack/interactions), as an agent (the Go SDK) and as the console (the
// approval API).

// e2eRules route demo__write_file to Slack #ops for alice; agent
// bot-expire's calls expire after 2 seconds.
const e2eRules = `{"airlock": {"rules": [
  {"id": "slack-expiring", "priority": 1, "agent": "bot-expire", "server": "demo", "tool": "write_file",
   "effect": "ask", "risk": "high", "reason": "short deadline for the expiry test",
   "approvers": ["alice"], "notify": ["slack:#ops"], "timeout": "2s"},
  {"id": "slack-writes", "priority": 2, "server": "demo", "tool": "write_file",
   "effect": "ask", "risk": "high", "reason": "writes to the sandbox need a person",
   "approvers": ["alice"], "notify": ["console", "slack:#ops"], "timeout": "2m"}
 ], "profiles": {}, "bindings": {}}}`

type e2eEnv struct {
	f        *fakeSlack
	endpoint string
	nc       *nats.Conn
	js       jetstream.JetStream
	proc     *testenv.Process
	// api is the approval service as the console reaches it.
	api *approvalapi.Client
}

// startAirlock runs `airlock dev` against a new Slack fake; approval holds
// further lines of the approval section ("  notify_burst: 100\n").
func startAirlock(t *testing.T, approval ...string) *e2eEnv {
	t.Helper()
	f := startFakeSlack(t)
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "policy")
	if err := os.MkdirAll(policyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	rego, err := fs.ReadFile(policies.Default(), "airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(policyDir, "airlock.rego"), rego, 0o600))
	must(t, os.WriteFile(filepath.Join(policyDir, "data.json"), []byte(e2eRules), 0o600))
	natsPort, err := embedded.FreePort()
	must(t, err)
	httpPort, err := embedded.FreePort()
	must(t, err)
	// notify_timeout is long so that a decision that waited on Slack would
	// wait as long as Slack holds the card update (the outage subtest).
	cfg := fmt.Sprintf(`http:
  public_url: %s
approval:
  notify_timeout: 10m
%spolicy:
  dir: %s
executor:
  sandbox: %s
slack:
  bot_token: xoxb-e2e
  signing_secret: %s
  api_url: %s
  users:
    U_ALICE: alice
    U_BOB: bob
`, publicURL, strings.Join(approval, ""), policyDir, filepath.Join(dir, "sandbox"), signingSecret, f.GetAPIURL())
	cfgPath := filepath.Join(dir, "airlock.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))

	httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	p := testenv.StartAirlock(t, httpAddr, []string{"AIRLOCK_CONFIG=" + cfgPath},
		"dev", "--data", filepath.Join(dir, "data"), "--nats-port", fmt.Sprint(natsPort), "--http", httpAddr)
	nc, js := testenv.DevAdmin(t, filepath.Join(dir, "data"), fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	api := approvalapi.New(nc, testenv.DevFrontendKey(t, filepath.Join(dir, "data")), "console")
	return &e2eEnv{f: f, endpoint: "http://" + httpAddr + airlockslack.InteractionsPath, nc: nc, js: js, proc: p, api: api}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// submit sends a demo__write_file call as agent and waits for its card.
func (e *e2eEnv) submit(t *testing.T, agent, callID string) (*airlock.Client, apiCall, string, string) {
	t.Helper()
	client, err := airlock.New(e.nc, agent)
	must(t, err)
	_, err = client.Submit(context.Background(), airlock.Call{
		ID: callID, Server: "demo", Tool: "write_file", Thread: "thread-e2e",
		Args: map[string]any{"path": callID + ".txt", "content": "hello from " + callID}, Reason: "e2e test",
	})
	must(t, err)
	posted := e.f.next(t, "chat.postMessage")
	if posted.Form.Get("channel") != "#ops" || !strings.Contains(cardStrings(t, posted.Blocks()), "call `"+callID+"`") {
		t.Fatalf("expected the card of %s in #ops, got %v", callID, posted.Form)
	}
	// The approval service stores the card's channel/ts with the approval.
	var ch, ts string
	testenv.Eventually(t, 10*time.Second, "the approval record to hold the Slack ref", func() bool {
		rec, err := e.api.Get(context.Background(), agent, callID, 0)
		if err != nil {
			return false
		}
		for _, n := range rec.GetNotifications() {
			if n.GetChannel() == "slack" {
				ch, ts, _ = strings.Cut(n.GetRef(), "/")
				return true
			}
		}
		return false
	})
	return client, posted, ch, ts
}

func (e *e2eEnv) click(t *testing.T, payload map[string]any) {
	t.Helper()
	if code, resp := ackWhileHeld(t, e.f, e.endpoint, payload); code != http.StatusOK {
		t.Fatalf("interaction answered %d %q", code, resp)
	}
}

// nextUpdate waits for a chat.update of the card ch/ts and returns its text.
func (e *e2eEnv) nextUpdate(t *testing.T, ch, ts, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case u := <-e.f.Updates():
			text := cardStrings(t, u.Blocks())
			if u.Form.Get("channel") == ch && u.Form.Get("ts") == ts && strings.Contains(text, want) {
				return text
			}
		case <-time.After(time.Until(deadline)):
		}
	}
	t.Fatalf("card %s/%s was not updated to show %q within 15s", ch, ts, want)
	return ""
}

// cardUpdates are the chat.update calls of the card ch/ts Slack answered,
// in the order it answered them.
func (e *e2eEnv) cardUpdates(ch, ts string) []apiCall {
	var out []apiCall
	for _, c := range e.f.Calls() {
		if c.Method == "chat.update" && c.Form.Get("channel") == ch && c.Form.Get("ts") == ts {
			out = append(out, c)
		}
	}
	return out
}

// settledCard waits until an update of the card ch/ts that Slack refused
// (its text starting with older) has either landed since or been dropped
// by the notifier (it logs that with the card's ref): then no update of
// the card is still on its way.
func (e *e2eEnv) settledCard(t *testing.T, ch, ts, older, what string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, what+" to land again or be dropped", func() bool {
		for _, u := range e.cardUpdates(ch, ts) {
			if strings.HasPrefix(u.Form.Get("text"), older) {
				t.Logf("%s landed again", what)
				return true
			}
		}
		for line := range strings.Lines(e.proc.Output()) {
			if strings.Contains(line, "card update superseded") && strings.Contains(line, ch+"/"+ts) {
				t.Logf("%s was dropped: %s", what, strings.TrimSpace(line))
				return true
			}
		}
		return false
	})
}

// pauseExecutor pauses the executor's consumer, so that no approved call
// runs until the returned resume is called (once; the test's end resumes
// it otherwise).
func (e *e2eEnv) pauseExecutor(t *testing.T) (resume func()) {
	t.Helper()
	// "executor" is the executor's durable (executor.Durable), shared by
	// its replicas; airlock dev streams its events in the default stream.
	stream, durable := airlockconfig.Default().Stream.Name, "executor"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.js.PauseConsumer(ctx, stream, durable, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("pause the executor's consumer: %v", err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := e.js.ResumeConsumer(ctx, stream, durable); err != nil {
				t.Errorf("resume the executor's consumer: %v", err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

func await(t *testing.T, c *airlock.Client, callID string) airlock.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := c.Await(ctx, callID)
	must(t, err)
	return o
}

func TestEndToEndWithTheAirlockBinary(t *testing.T) {
	t.Parallel()
	e := startAirlock(t)

	t.Run("approve_in_slack_runs_the_call_and_updates_the_card", func(t *testing.T) {
		client, posted, ch, ts := e.submit(t, "bot", "e2e_approve")
		start := time.Now()
		e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionApprove))
		e.nextUpdate(t, ch, ts, "*Approved* by *alice* (slack)")
		t.Logf("click to updated card: %s", time.Since(start))
		if o := await(t, client, "e2e_approve"); o.Status != airlock.StatusCompleted {
			t.Fatalf("outcome %+v, want completed", o)
		}
		approved := testenv.WaitForEvent(t, e.js, subject.OfCall("bot", "e2e_approve"), subject.Approved, 10*time.Second)
		if a := approved.GetActor(); a.GetId() != "alice" || a.GetChannel() != "slack" {
			t.Fatalf("approved by %v, want alice via slack", a)
		}
		started, err := subject.Event("bot", "e2e_approve", subject.Started)
		must(t, err)
		if n := len(testenv.Events(t, e.js, started)); n != 1 {
			t.Fatalf("the call started %d times", n)
		}
	})

	t.Run("reject_via_modal_delivers_the_reason_to_the_agent", func(t *testing.T) {
		client, posted, ch, ts := e.submit(t, "bot", "e2e_reject")
		e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionReject))
		opened := e.f.next(t, "views.open")
		e.click(t, viewSubmission(t, "U_ALICE", opened, "not during the release freeze"))
		e.nextUpdate(t, ch, ts, "*Rejected* by *alice* (slack): `not during the release freeze`")
		o := await(t, client, "e2e_reject")
		if o.Status != airlock.StatusRejected || o.Reason != "not during the release freeze" {
			t.Fatalf("agent got %+v, want rejected with alice's reason", o)
		}
	})

	t.Run("unmapped_and_unauthorized_users_are_refused_and_recorded_then_console_approval_updates_the_card", func(t *testing.T) {
		client, posted, ch, ts := e.submit(t, "bot", "e2e_authz")

		e.click(t, buttonClick(t, "U_CAROL", posted, ch, ts, airlockslack.ActionApprove)) // not in slack.users
		e.click(t, buttonClick(t, "U_BOB", posted, ch, ts, airlockslack.ActionApprove))   // mapped, not an approver
		var refused []*airlockv1.Event
		testenv.Eventually(t, 15*time.Second, "two unauthorized_attempt events", func() bool {
			refused = nil
			for _, ev := range testenv.Events(t, e.js, subject.OfCall("bot", "e2e_authz")) {
				if ev.GetUnauthorizedAttempt() != nil {
					refused = append(refused, ev)
				}
			}
			return len(refused) == 2
		})
		who := map[string]bool{}
		for _, ev := range refused {
			who[ev.GetActor().GetId()] = true
		}
		if !who["slack:U_CAROL"] || !who["bob"] {
			t.Fatalf("refusals recorded for %v, want slack:U_CAROL (unmapped) and bob (not an approver)", who)
		}
		for range 2 {
			if eph := e.f.next(t, "chat.postEphemeral"); !strings.Contains(eph.Form.Get("text"), "recorded") {
				t.Fatalf("refused user told %q", eph.Form.Get("text"))
			}
		}

		// The console decides through the same approval API.
		resp, err := e.api.Decide(context.Background(), &airlockv1.DecideRequest{
			AgentId: "bot", CallId: "e2e_authz", Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE,
			Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"},
		})
		must(t, err)
		if !resp.GetChanged() {
			t.Fatalf("console approval changed nothing: %v", resp)
		}
		e.nextUpdate(t, ch, ts, "*Approved* by *alice* (console)")
		if o := await(t, client, "e2e_authz"); o.Status != airlock.StatusCompleted {
			t.Fatalf("outcome %+v", o)
		}
	})

	t.Run("slack_outage_neither_stops_the_console_nor_loses_the_outcome", func(t *testing.T) {
		client, _, ch, ts := e.submit(t, "bot", "e2e_outage")
		// Slack holds every call unanswered until the decision is answered:
		// a decision that waited on Slack could not be answered at all (or
		// only once the card update gave up, which the fake counts).
		e.f.Hold()
		defer e.f.Release()
		// Once released, the update that shows the approval is answered 503,
		// whichever held call is answered first (the card is also redrawn
		// once the call has run).
		approvedUpdate := func(c apiCall) bool {
			return c.Method == "chat.update" && c.Form.Get("ts") == ts && strings.HasPrefix(c.Form.Get("text"), "Approved: ")
		}
		e.f.Down(1, approvedUpdate)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The call runs only once the update showing the approval is held
		// by Slack: the executor's consumer is paused until then. A call
		// run at once can complete before that update begins, which the
		// newer state then supersedes unsent, and the outage meets no
		// update of the approval (seen under load).
		resumeExecutor := e.pauseExecutor(t)
		resp, err := e.api.Decide(ctx, &airlockv1.DecideRequest{
			AgentId: "bot", CallId: "e2e_outage", Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE,
			Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"},
		})
		waitedOnSlack := func() {
			t.Helper()
			if n := e.f.Abandoned(); n != 0 {
				t.Fatalf("the decision was answered only after %d held Slack calls were given up: it waited on Slack", n)
			}
		}
		waitedOnSlack()
		if err != nil || !resp.GetChanged() {
			t.Fatalf("console decision while Slack held every call: changed=%v, err %v", resp.GetChanged(), err)
		}
		testenv.Eventually(t, 10*time.Second, "the card update to reach the held Slack", func() bool { return e.f.Held("chat.update") > 0 })
		waitedOnSlack()
		resumeExecutor()
		// The call runs while Slack holds the card, so the update showing it
		// completed is asked for before Slack answers the one showing the
		// approval.
		// 10 s: under the Slack client's 15 s timeout, after which the held
		// request would be retried and the outage meet another call.
		testenv.Eventually(t, 10*time.Second, "the call to complete while Slack holds its card", func() bool {
			rec, err := e.api.Get(ctx, "bot", "e2e_outage", 0)
			return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED
		})
		// A held call given up by now (a machine slower than the Slack
		// client's timeout) says so plainly, before the outage meets its retry.
		waitedOnSlack()
		e.f.Release()
		// The update answered 503 is superseded by the one showing the call
		// completed, which draws the card; it must never land after it.
		e.nextUpdate(t, ch, ts, "The tool ran and completed.")
		e.settledCard(t, ch, ts, "Approved: ", "the update Slack refused")
		if refused := e.f.Refused(); len(refused) != 1 || !approvedUpdate(refused[0]) || refused[0].Form.Get("channel") != ch ||
			!strings.Contains(cardStrings(t, refused[0].Blocks()), "*Approved* by *alice* (console)") {
			t.Fatalf("the outage answered %v; want the update showing the approval only", refused)
		}
		if o := await(t, client, "e2e_outage"); o.Status != airlock.StatusCompleted {
			t.Fatalf("outcome %+v", o)
		}
		completed := "Approved, completed: "
		updates := e.cardUpdates(ch, ts)
		if last := updates[len(updates)-1].Form.Get("text"); !strings.HasPrefix(last, completed) {
			t.Fatalf("once settled the card shows %q; want the newest state, %q…", last, completed)
		}
		newest := false
		for _, u := range updates {
			text := u.Form.Get("text")
			if strings.HasPrefix(text, completed) {
				newest = true
			} else if newest {
				t.Fatalf("an update showing %q reached Slack after the one showing the call completed", text)
			}
		}
	})

	t.Run("expiry_updates_the_card_and_the_call_never_runs", func(t *testing.T) {
		client, _, ch, ts := e.submit(t, "bot-expire", "e2e_expire")
		e.nextUpdate(t, ch, ts, "*Expired*")
		if o := await(t, client, "e2e_expire"); o.Status != airlock.StatusExpired {
			t.Fatalf("outcome %+v, want expired", o)
		}
		// A reviewer's approval after the deadline changes nothing (each
		// assertion on its own, so that an approval that did count also
		// shows whether it ran).
		resp, err := e.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot-expire", CallId: "e2e_expire",
			Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}})
		if err != nil || resp.GetChanged() || resp.GetRecord().GetState() != airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED || !strings.Contains(resp.GetMessage(), "expired") {
			t.Errorf("a late approval was answered %v (%v), want nothing changed and the call still expired", resp, err)
		}
		if started, completed := testenv.Runs(t, e.js, "bot-expire", "e2e_expire"); started != 0 || completed != 0 {
			t.Errorf("the expired call started %d and completed %d times", started, completed)
		}
	})

	t.Run("click_on_the_expired_card_answers_with_the_current_state", func(t *testing.T) {
		_, posted, ch, ts := e.submit(t, "bot-expire", "e2e_stale")
		e.nextUpdate(t, ch, ts, "*Expired*")
		e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionApprove))
		e.nextUpdate(t, ch, ts, "*Expired*")
		if eph := e.f.next(t, "chat.postEphemeral"); !strings.Contains(eph.Form.Get("text"), "expired") {
			t.Fatalf("alice was told %q", eph.Form.Get("text"))
		}
	})
}
