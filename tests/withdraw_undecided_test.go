package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// pausePolicy holds the policy service behind (its intake consumer paused)
// until the returned function resumes it and waits for it to settle.
func pausePolicy(t *testing.T, js jetstream.JetStream) (resume func()) {
	t.Helper()
	intake := config.Default().Intake.Name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PauseConsumer(ctx, intake, "policy", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.ResumeConsumer(ctx, intake, "policy"); err != nil {
			t.Fatal(err)
		}
		testenv.Settled(t, js, intake, "policy", 30*time.Second)
	}
}

// An agent withdraws a call while its request still waits for the policy
// (the policy behind: here its consumer paused). The cancel answered "no
// approval for call …", the hook told its agent no and the MCP gateway
// gave up, and once the policy caught up the call was allowed and ran.
// Through a real `airlock dev`, with the agent's own credential and the
// services' own permissions: the cancel lands, the agent reads it, and the
// policy, resumed, decides nothing and the executor runs nothing.
func TestACallWithdrawnBeforeThePolicyDecidedItNeverRuns(t *testing.T) {
	t.Parallel() // an airlock dev of its own
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	echoCompletes(ctx, t, bot) // the policy serves before it is paused
	resume := pausePolicy(t, js)
	if _, err := bot.Submit(ctx, airlock.Call{ID: "gave-up", Server: "demo", Tool: "echo", Args: map[string]any{"text": "late"}}); err != nil {
		t.Fatal(err)
	}
	const reason = "the MCP client gave up on the request"
	if err := bot.Cancel(ctx, "gave-up", reason); err != nil {
		t.Fatalf("withdrawing a call the policy has not decided: %v", err)
	}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	out, err := bot.Await(actx, "gave-up")
	acancel()
	if err != nil || out.Status != airlock.StatusCanceled || out.Reason != reason {
		t.Fatalf("the agent read %+v, %v; want canceled with its reason", out, err)
	}

	resume()
	// The next call is decided and run: the policy did reach the request.
	echoCompletes(ctx, t, bot)
	if got := strings.Join(testenv.SubjectTypes(t, js, subject.OfCall("bot", "gave-up")), " "); got != subject.Canceled {
		t.Fatalf("the withdrawn call's events: %s; want only canceled (nothing decided, nothing run)", got)
	}
}

// The same over the REST API with an agent token (helper-184's review,
// F3): the cancel answered 503 "read its state after the cancel" (it read
// an approval record such a call does not have), the wait answered 404 "no
// call", and a call submitted again under the id was answered 202 while
// the policy dropped it as withdrawn.
func TestARESTCallWithdrawnBeforeThePolicyDecidedItIsCanceled(t *testing.T) {
	t.Parallel() // an airlock dev of its own
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	bot := agentToken(t, dev, adminToken(t, dev), "bot")
	if status, body := apiPost(t, dev.HTTPURL+"/api/v1/calls", bot, `{"call_id":"warm","tool":"demo__echo","arguments":{"text":"w"}}`); status != http.StatusAccepted {
		t.Fatalf("a first call: %d %s", status, body)
	}
	if status, body := bearerGet(t, dev.HTTPURL+"/api/v1/calls/warm?wait=20s", bot); status != http.StatusOK || !strings.Contains(body, "completed") {
		t.Fatalf("a first call: %d %s", status, body)
	}
	resume := pausePolicy(t, js)
	if status, body := apiPost(t, dev.HTTPURL+"/api/v1/calls", bot, `{"call_id":"rw","tool":"demo__echo","arguments":{"text":"x"}}`); status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", status, body)
	}
	for _, try := range []string{"first", "again"} {
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/calls/rw/cancel", bot, `{"reason":"the REST client gave up"}`); status != http.StatusOK || !strings.Contains(body, `"canceled"`) {
			t.Fatalf("the %s REST cancel of a call the policy has not decided: %d %s; want 200 canceled", try, status, body)
		}
	}
	resume()
	if status, body := bearerGet(t, dev.HTTPURL+"/api/v1/calls/rw?wait=2s", bot); status != http.StatusOK || !strings.Contains(body, `"canceled"`) || !strings.Contains(body, "the REST client gave up") {
		t.Fatalf("the REST wait of the withdrawn call: %d %s; want 200 canceled with its reason", status, body)
	}
	status, body := apiPost(t, dev.HTTPURL+"/api/v1/calls", bot, `{"call_id":"rw","tool":"demo__echo","arguments":{"text":"something else"}}`)
	if status != http.StatusConflict || !strings.Contains(body, "withdrawn by its agent before it was decided") {
		t.Fatalf("a call submitted under the withdrawn id: %d %s; want 409 saying the id was withdrawn", status, body)
	}
	if got := strings.Join(testenv.SubjectTypes(t, js, subject.OfCall("bot", "rw")), " "); got != subject.Canceled {
		t.Fatalf("the withdrawn call's events: %s; want only canceled", got)
	}
}

// Revision 2 of a call sent back for changes is withdrawn while it waits
// for the policy. The cancel read the call's last event, whatever it was:
// in a real dev the notifiers' `notified` events follow changes_requested,
// and someone without the right clicking approve leaves an
// unauthorized_attempt, so the cancel answered "waits for nobody: its last
// event is …" and revision 2 ran once the policy caught up (helper-184,
// F1).
func TestARevisionWithdrawnAfterChangesWereRequestedNeverRuns(t *testing.T) {
	t.Parallel() // an airlock dev of its own
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	api := dev.API(t)
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := []string{"notified", "clicked"}
	for _, id := range ids {
		sendBack(ctx, t, dev, bot, id)
	}
	// Someone who may not decide clicks approve on "clicked": refused, and
	// recorded on the call after its changes_requested.
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "clicked", Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Principal: apprReviewer("mallory")}); apierr.CodeOf(err) != apierr.NotAuthorized {
		t.Fatalf("mallory's approve: %v, want not_authorized", err)
	}
	testenv.WaitForEvent(t, js, subject.OfCall("bot", "clicked"), subject.UnauthorizedAttempt, 10*time.Second)

	resume := pausePolicy(t, js)
	for _, id := range ids {
		if _, err := bot.Submit(ctx, airlock.Call{ID: id, Revision: 2, Server: "demo", Tool: "echo", Args: map[string]any{"text": "revised"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := bot.Withdraw(ctx, id, 2, "the agent gave up on revision 2"); err != nil {
			t.Fatalf("%s: withdrawing revision 2 while it waits for the policy: %v", id, err)
		}
	}
	resume()
	for _, id := range ids {
		got := " " + strings.Join(testenv.SubjectTypes(t, js, subject.OfCall("bot", id)), " ") + " "
		if !strings.HasSuffix(got, " canceled ") || strings.Count(got, " requested ") != 1 {
			t.Fatalf("%s: events%s; want revision 2 withdrawn (canceled last), never recorded, decided or run", id, got)
		}
		if canceled := testenv.WaitForEvent(t, js, subject.OfCall("bot", id), subject.Canceled, time.Second); canceled.GetRevision() != 2 {
			t.Fatalf("%s: the withdrawal names revision %d, want 2", id, canceled.GetRevision())
		}
	}
}

// An agent withdraws each of many calls right after submitting it, the
// policy running, as an MCP client that gives up at once would (retrying
// "cancel again in a moment", as the gateway does). Whoever wins each
// race, the trail holds one end per call, nothing is decided or run after
// a withdrawal that was answered, and no call whose withdrawal was
// answered waits for people; nor does any other (helper-184, F2: the
// cancel answered "waits for nobody" when the policy put the call to
// people meanwhile, and the call waited for a reviewer after its client
// gave up).
func TestCancelsRacingThePolicyLeaveNoCallRunOrWaiting(t *testing.T) {
	t.Parallel() // an airlock dev of its own
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	echoCompletes(ctx, t, bot) // the policy serves
	const n = 120
	answers := make([]error, n)
	testenv.Concurrently(n, 3, func(i int) {
		id := fmt.Sprintf("race-%d", i)
		tool, args := "echo", map[string]any{"text": id}
		if i%2 == 1 {
			tool, args = "write_file", map[string]any{"path": id + ".txt", "content": "x"}
		}
		if _, err := bot.Submit(ctx, airlock.Call{ID: id, Server: "demo", Tool: tool, Args: args}); err != nil {
			answers[i] = err
			return
		}
		err := bot.Cancel(ctx, id, "gave up")
		for try := 0; apierr.CodeOf(err) == apierr.NotFound && try < 50; try++ {
			time.Sleep(20 * time.Millisecond)
			err = bot.Cancel(ctx, id, "gave up")
		}
		answers[i] = err
	})
	testenv.Settled(t, js, config.Default().Intake.Name, "policy", 60*time.Second)
	for i := range n {
		id := fmt.Sprintf("race-%d", i)
		// Landed, or "no approval" for a call the policy allowed first.
		if answers[i] != nil && apierr.CodeOf(answers[i]) != apierr.NotFound {
			t.Errorf("%s: the withdrawal was answered %v; want it to land, or no approval for a call the policy allowed", id, answers[i])
			continue
		}
		withdrawn := answers[i] == nil
		// Its end: canceled (withdrawn), or the run of a call the policy
		// allowed first (channels may record notified events after it).
		var got string
		ended := func() bool {
			got = " " + strings.Join(testenv.SubjectTypes(t, js, subject.OfCall("bot", id)), " ") + " "
			return strings.Contains(got, " canceled ") || strings.Contains(got, " completed ") || strings.Contains(got, " denied ")
		}
		for deadline := time.Now().Add(10 * time.Second); !ended() && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		ends := 0
		for _, typ := range []string{subject.Allowed, subject.Denied, subject.Canceled, subject.Approved, subject.Rejected, subject.Expired} {
			ends += strings.Count(got, " "+typ+" ")
		}
		switch {
		case !ended():
			t.Errorf("%s: never ended (withdrawal answered %v):%s", id, answers[i], got)
		case ends != 1:
			t.Errorf("%s: %d ends:%s", id, ends, got)
		case withdrawn && (strings.Contains(got, " allowed ") || strings.Contains(got, " started ")):
			t.Errorf("%s: withdrawn, yet decided or run:%s", id, got)
		case !withdrawn && !strings.Contains(got, " allowed "):
			t.Errorf("%s: not withdrawn (%v), and not allowed either:%s", id, answers[i], got)
		}
	}
}

// A cancel of a call sent back for changes, naming no revision, while
// another request of the agent waits for the policy, stored a withdrawal of
// revision 2, which nobody had submitted: the revision 2 the agent then
// submitted with the changes asked for was dropped by the policy
// (helper-185, F1). Unnamed, revision 2 is left free, and the cancel says
// to name it (helper-186: answered "nothing changed", it let a revision 2
// that did wait go on to be decided).
func TestACancelOfACallSentBackLeavesItsNextRevisionFree(t *testing.T) {
	t.Parallel() // an airlock dev of its own
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	api := dev.API(t)
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "sent-back"
	sendBack(ctx, t, dev, bot, id)
	resume := pausePolicy(t, js)
	if _, err := bot.Submit(ctx, airlock.Call{ID: "busy", Server: "demo", Tool: "echo", Args: map[string]any{"text": "busy"}}); err != nil {
		t.Fatal(err)
	}
	w, err := bot.Withdraw(ctx, id, 0, "the client gave up")
	resume()
	if apierr.CodeOf(err) != apierr.Conflict || !strings.Contains(err.Error(), "name the revision you submitted") {
		t.Fatalf("the cancel of a call sent back, naming no revision, answered %+v, %v; want a conflict saying to name the revision", w, err)
	}
	if _, err := bot.Submit(ctx, airlock.Call{ID: id, Revision: 2, Server: "demo", Tool: "write_file", Args: map[string]any{"path": "b.txt", "content": "x"}}); err != nil {
		t.Fatal(err)
	}
	if rec := apprWaitPending(t, api, id); rec.GetCall().GetRevision() != 2 {
		t.Fatalf("the pending record is of revision %d, want the revision 2 submitted after the cancel", rec.GetCall().GetRevision())
	}
}

// An agent that speaks JSON over NATS (README's protocol: every event of a
// call it requested in JSON is protojson) withdraws its first call while
// the policy is behind. The approval service does not read the request,
// and the agent had no event yet: the withdrawal was stored in protobuf,
// which the agent cannot read (helper-185, F3). Its cancel says it reads
// JSON (json_events).
func TestAJSONAgentsFirstCallWithdrawnIsToldInJSON(t *testing.T) {
	t.Parallel() // an airlock dev of its own
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	dev.Agent(t, "json-bot")
	a := dialJSONAgent(t, dev.Creds("json-bot"), dev.NATSURL)
	resume := pausePolicy(t, js)
	defer resume()
	ch := a.follow("jw-1")
	a.submit("jw-1", `{"requested":{"call":{"call_id":"jw-1","tool":"demo__echo","arguments":{"text":"late"}}}}`)
	reply, err := a.nc.Request("airlock.agent.json-bot.cancel", []byte(`{"call_id":"jw-1","reason":"the client gave up","json_events":true}`), 10*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), `"canceled"`) {
		t.Fatalf("the cancel of the JSON agent's call: %v %v; want canceled", reply, err)
	}
	select {
	case ev := <-ch:
		if !strings.HasSuffix(ev.Subject, ".canceled") {
			t.Fatalf("the JSON agent read %s, want its call's canceled event", ev.Subject)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the JSON agent read no end of its withdrawn call in JSON (its follower reads only JSON)")
	}
}

// sendBack submits bot's write of id.txt, and has admin request changes
// to it once it waits for a person.
func sendBack(ctx context.Context, t *testing.T, dev *devProcess, bot *airlock.Client, id string) {
	t.Helper()
	api := dev.API(t)
	_, js := dev.Admin(t)
	if _, err := bot.Submit(ctx, airlock.Call{ID: id, Server: "demo", Tool: "write_file", Args: map[string]any{"path": id + ".txt", "content": "x"}}); err != nil {
		t.Fatal(err)
	}
	apprWaitPending(t, api, id)
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES,
		Reason: "write it elsewhere", Principal: apprReviewer("admin")}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForEvent(t, js, subject.OfCall("bot", id), subject.ChangesRequested, 10*time.Second)
}

// echoCompletes runs an auto-allowed call through bot and fails the test
// unless it completes.
func echoCompletes(ctx context.Context, t *testing.T, bot *airlock.Client) {
	t.Helper()
	if out, err := bot.Do(ctx, airlock.Call{Server: "demo", Tool: "echo", Args: map[string]any{"text": "hi"}}); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("an echo: %+v %v; want it completed", out, err)
	}
}
