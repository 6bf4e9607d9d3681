package approval_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A hook that gives up waiting withdraws its call at once (`airlock hook
// --wait`, then up to 5 s of cancels) and tells its agent no. When this
// service's consumer is behind, the policy's approval_requested waits in
// the stream unrecorded: the agent's cancel found no record ("no approval
// for call bot/gave-up"), and the call was recorded pending a moment
// later, to wait for its deadline at the head of its thread's queue, the
// thread's next call behind it. Here a slow preview of another agent's
// call holds the service's only worker while bot withdraws its call.
func TestACallWithdrawnBeforeItIsRecordedIsNeverPutToPeople(t *testing.T) {
	rec := &recorder{name: "rec"}
	w, hold, release := heldWorld(t, rec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Revision 1 of "two" is recorded and sent back for changes before the
	// consumer falls behind (a revision follows only a request for changes).
	w.pending(&airlockv1.ToolCall{CallId: "two", AgentRuns: true}, nil)
	if _, err := w.decide("two", "alice", airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "smaller"); err != nil {
		t.Fatal(err)
	}
	w.waitState("two", 1, airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED)
	hold()
	thread := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true}
	}
	w.ask(&airlockv1.ToolCall{CallId: "gave-up", ThreadId: "sess", AgentRuns: true}, thread())
	w.ask(&airlockv1.ToolCall{CallId: "next", ThreadId: "sess", AgentRuns: true}, thread())
	w.ask(&airlockv1.ToolCall{CallId: "two", Revision: 2, AgentRuns: true}, nil)

	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	const reason = "the agent's hook stopped waiting after 1s; the agent was told no"
	if err := bot.Cancel(ctx, "gave-up", reason); err != nil {
		t.Fatalf("withdrawing a call put to people but not recorded yet: %v", err)
	}
	if out := await(t, w, "bot", "gave-up"); out.Status != airlock.StatusCanceled || out.Reason != reason {
		t.Fatalf("the agent read %s (%q), want canceled with its reason", out.Status, out.Reason)
	}
	if r, err := w.api.Get(ctx, "bot", "gave-up", 0); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("the withdrawn call's record: %v, %v", r.GetState(), err)
	}

	// The newest revision is the one withdrawn, not the one recorded
	// (sent back, which a cancel would not change).
	if err := bot.Cancel(ctx, "two", reason); err != nil {
		t.Fatalf("withdrawing revision 2, put to people but not recorded yet: %v", err)
	}
	if r, err := w.api.Get(ctx, "bot", "two", 2); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("revision 2 after its agent withdrew it: %v, %v", r.GetState(), err)
	}

	release() // the consumer catches up with the requests behind the slow one
	testenv.Eventually(t, 20*time.Second, "the thread's next call to get its turn and be announced", func() bool {
		return rec.has("announce:next")
	})
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 20*time.Second)
	if r := w.waitState("gave-up", 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED); r.GetDecidedBy().GetId() != "bot" {
		t.Fatalf("the withdrawn call was ended by %v, want its agent", r.GetDecidedBy())
	}
	if rec.has("announce:gave-up") {
		t.Fatal("the withdrawn call was announced to reviewers")
	}
	if n := len(w.events("bot", "gave-up", subject.Canceled)); n != 1 {
		t.Fatalf("the withdrawn call has %d canceled events, want 1", n)
	}
	if r, err := w.api.Get(ctx, "bot", "two", 2); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("revision 2 of the withdrawn call after the consumer caught up: %v, %v, want canceled", r.GetState(), err)
	}
	if r := w.waitState("next", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); r.GetQueued() {
		t.Fatal("the thread's next call still waits behind the withdrawn one")
	}
}

// heldWorld is a world whose approval service has one worker and whose
// executor answers previews only once release is called (at the test's
// end at the latest): hold asks a call of agent "blocker" that needs a
// preview and waits until its preview is asked for, so that every call
// asked after it waits in the stream, unrecorded, until release. rec, if
// not nil, is the service's channel.
func heldWorld(t *testing.T, rec *recorder, tweak ...func(*config.Config)) (w *world, hold, release func()) {
	t.Helper()
	w = newWorld(t, append([]func(*config.Config){func(c *config.Config) {
		c.Approval.Workers = 1
		c.Approval.PreviewTimeout = time.Minute
	}}, tweak...)...)
	asked, released := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	w.servePreviewBy(func(ctx context.Context) *airlockv1.Preview {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-released:
		case <-ctx.Done():
		}
		return &airlockv1.Preview{Unavailable: "a test's slow preview"}
	})
	if rec != nil {
		w.start(rec)
	} else {
		w.start()
	}
	hold = func() {
		t.Helper()
		w.ask(&airlockv1.ToolCall{AgentId: "blocker", CallId: "slow"}, nil)
		select {
		case <-asked:
		case <-time.After(30 * time.Second):
			t.Fatal("the executor was never asked for the slow call's preview")
		}
	}
	return w, hold, release
}

// An ended call's record leaves the bucket after approval.ended_retention,
// and the trail still asks about it: its agent's cancel then finds no
// record and must not take it for one not recorded yet — a canceled event
// after an approval would say a call that ran never did.
func TestACancelOfACallWhoseRecordLeftChangesNothing(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = time.Second })
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.pending(&airlockv1.ToolCall{CallId: "done", AgentRuns: true}, nil)
	if _, err := w.approve("done", "alice"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the approved call's record to leave the bucket", func() bool {
		_, err := w.api.Get(ctx, "bot", "done", 0)
		return err != nil
	})
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	err = bot.Cancel(ctx, "done", "too late")
	if err == nil || !strings.Contains(err.Error(), "waits for nobody: it ended approved") {
		t.Fatalf("canceling a call approved and gone from the bucket answered %v", err)
	}
	if n := len(w.events("bot", "done", subject.Canceled)); n != 0 {
		t.Fatalf("the approved call got %d canceled events", n)
	}
	if _, err := w.api.Get(ctx, "bot", "done", 0); err == nil {
		t.Fatal("the cancel wrote a record for the approved call")
	}
}

// stallTrailReads turns Direct Get off on the events stream and takes
// every Direct Get of approval_requested without answering, as a NATS
// configuration rendered before the approval user could read them does
// (refused, the request times out): each such read waits its 2 s.
func (w *world) stallTrailReads(ctx context.Context) {
	w.t.Helper()
	s, err := w.js.Stream(ctx, w.cfg.Stream.Name)
	if err != nil {
		w.t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.AllowDirect = false
	if _, err := w.js.UpdateStream(ctx, sc); err != nil {
		w.t.Fatal(err)
	}
	nc, _ := testenv.Connect(w.t, w.nats.URL())
	if _, err := nc.Subscribe(subject.DirectGet(w.cfg.Stream.Name, subject.OfType(subject.ApprovalRequested)), func(*nats.Msg) {}); err != nil {
		w.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		w.t.Fatal(err)
	}
}

// The agents' cancel endpoint answered one request at a time, for every
// agent, and a cancel now reads the trail: while its reads stall (2 s
// each), one agent's burst of cancels held another agent's cancel of its
// pending call behind all of them (40 × 2 s here). An agent has at most
// maxCancelsPerAgent handled at once; the rest are told so at once.
func TestOneAgentsBurstOfCancelsDoesNotHoldAnothersCancel(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "mine"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.stallTrailReads(ctx)

	nc, _ := testenv.Connect(t, w.nats.URL())
	const burst = 40
	answers := make(chan *nats.Msg, burst)
	sub, err := nc.ChanSubscribe(nats.NewInbox(), answers)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for i := range burst {
		body := fmt.Sprintf(`{"call_id":"never-%d","reason":"again"}`, i)
		if err := nc.PublishRequest(subject.AgentCancel("mallory"), sub.Subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.Cancel(ctx, "mine", "the MCP client canceled the request"); err != nil {
		t.Fatalf("bot's cancel of its pending call behind mallory's burst of %d: %v", burst, err)
	}
	if r, err := w.api.Get(ctx, "bot", "mine", 0); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("bot's call after its cancel: %v, %v", r.GetState(), err)
	}
	busy := 0
	for range burst {
		select {
		case m := <-answers:
			if strings.Contains(m.Header.Get("Nats-Service-Error"), "cancels being handled at once") {
				busy++
			}
		case <-ctx.Done():
			t.Fatal("mallory's burst was not answered in full")
		}
	}
	if want := burst - 4; busy < want {
		t.Fatalf("%d of mallory's %d cancels were told she has too many at once, want at least %d", busy, burst, want)
	}
}

// The record a withdraw writes before the consumer reaches the request is
// created ended, so it leaves the bucket after approval.ended_retention. A
// consumer behind by longer then created the record afresh, pending: the
// call its agent had been told was canceled was put to reviewers and could
// be approved after its canceled event (helper-181's F1).
func TestAWithdrawnCallIsNotPutToPeopleAfterItsRecordLeftTheBucket(t *testing.T) {
	rec := &recorder{name: "rec"}
	w, hold, release := heldWorld(t, rec, func(c *config.Config) { c.Approval.EndedRetention = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	hold()
	w.ask(&airlockv1.ToolCall{CallId: "gave-up"}, nil)
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.Cancel(ctx, "gave-up", "the MCP client canceled the request"); err != nil {
		t.Fatalf("withdrawing a call put to people but not recorded yet: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, "the withdrawn call's record to leave the bucket (ended_retention 1s)", func() bool {
		_, err := w.api.Get(ctx, "bot", "gave-up", 0)
		return err != nil
	})
	release() // the consumer reaches the withdrawn call's request
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 20*time.Second)
	if r, err := w.api.Get(ctx, "bot", "gave-up", 0); err == nil {
		t.Fatalf("the call its agent withdrew was recorded again after its record left the bucket: %v (announced: %v)", r.GetState(), rec.has("announce:gave-up"))
	}
	if n := len(w.events("bot", "gave-up", subject.Canceled)); n != 1 {
		t.Fatalf("%d canceled events, want 1", n)
	}
}

// While the trail cannot be read, a call with no record may still wait in
// the stream to be put to people: its cancel says to try again, not that
// there is no such call (helper-181's F3).
func TestAWithdrawWhoseTrailCannotBeReadSaysToTryAgain(t *testing.T) {
	w, hold, _ := heldWorld(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hold()
	w.ask(&airlockv1.ToolCall{CallId: "gave-up"}, nil)
	w.stallTrailReads(ctx)
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.Cancel(ctx, "gave-up", "gave up"); apierr.CodeOf(err) != apierr.Unavailable {
		t.Fatalf("the cancel of a call with no record whose trail could not be read answered %v, want unavailable (try again)", err)
	}
}

// A call whose newest revision ended without a record (refused past its
// agent's byte share) beside an older revision's record: the cancel
// answered success about the older revision, which the agent did not mean
// (helper-181's F5). It says the newest ended.
func TestACancelOfARevisionThatEndedUnrecordedNamesThatRevision(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.MaxBytesPerAgent = 1 })
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "c"}, nil)
	if _, err := w.decide("c", "alice", airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "use /tmp/b"); err != nil {
		t.Fatal(err)
	}
	w.waitState("c", 1, airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED)
	w.ask(&airlockv1.ToolCall{CallId: "c", Revision: 2}, nil)
	testenv.Eventually(t, 10*time.Second, "revision 2 to be refused without a record", func() bool {
		for _, ev := range w.events("bot", "c", subject.Canceled) {
			if ev.GetRevision() == 2 {
				return true
			}
		}
		return false
	})
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	err = bot.Cancel(context.Background(), "c", "gave up")
	if apierr.CodeOf(err) != apierr.NotFound || !strings.Contains(err.Error(), "bot/c rev 2 waits for nobody: it ended canceled") {
		t.Fatalf("the cancel of call c, whose revision 2 ended canceled without a record, answered %v", err)
	}
}

// The consumer's create and the withdraw's
// create of the same key, at random moments, on two replicas: each call
// ends canceled by its agent, with one canceled event that says so
// (helper-181's probe).
func TestWithdrawRacesTheConsumersCreate(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.Workers = 4 })
	w.servePreviewBy(func(ctx context.Context) *airlockv1.Preview {
		time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		return &airlockv1.Preview{Unavailable: "slow"}
	})
	w.start()
	w.start()
	nc, _ := testenv.Connect(t, w.nats.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		agent := fmt.Sprintf("a%02d", i)
		w.ask(&airlockv1.ToolCall{AgentId: agent, CallId: "c", ThreadId: "t"}, &airlockv1.Decision{QueuePerThread: i%2 == 0})
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
			c, err := airlock.New(nc, agent)
			if err != nil {
				errs <- err
				return
			}
			for {
				err = c.Cancel(ctx, "c", "withdrawn by "+agent)
				if err == nil || ctx.Err() != nil {
					break
				}
				t.Logf("%s: %v", agent, err)
				time.Sleep(20 * time.Millisecond)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 20*time.Second)
	for i := range n {
		agent := fmt.Sprintf("a%02d", i)
		r, err := w.api.Get(ctx, agent, "c", 0)
		if err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED || r.GetDecidedBy().GetId() != agent {
			t.Errorf("%s: record %v by %v, %v", agent, r.GetState(), r.GetDecidedBy().GetId(), err)
		}
		evs := w.events(agent, "c", subject.Canceled)
		if len(evs) != 1 || evs[0].GetActor().GetId() != agent || evs[0].GetCanceled().GetReason() != "withdrawn by "+agent {
			t.Errorf("%s: %d canceled events %v", agent, len(evs), evs)
		}
	}
}

// An agent names only its own calls: another agent's call
// put to people and not recorded yet, and call ids with subject tokens or
// wildcards, are refused without a record or an event (helper-181's probe).
func TestAWithdrawReachesNoOtherAgentsCall(t *testing.T) {
	w, hold, release := heldWorld(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hold()
	w.ask(&airlockv1.ToolCall{AgentId: "other", CallId: "theirs"}, nil)
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, _ := airlock.New(nc, "bot")
	for _, id := range []string{"theirs", "other.theirs", "*", ">", "other.theirs.1", "theirs.approval_requested", ""} {
		err := bot.Cancel(ctx, id, "mine?")
		t.Logf("%q: %v", id, err)
		if err == nil {
			t.Errorf("bot's cancel of %q landed", id)
		}
	}
	release()
	w.waitAgentState("other", "theirs", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
	if n := len(w.events("other", "theirs", subject.Canceled)); n != 0 {
		t.Fatalf("other's call got %d canceled events", n)
	}
}

// An agent may withdraw a call whose request still waits in the intake, the
// policy behind (MCP clients cancel requests they gave up on, hooks give up
// after --wait): there is neither a record nor an approval_requested yet,
// and the cancel answered "no approval for call …" while the call, allowed
// a moment later, ran after its agent was told it would not. The cancel now
// stores a `canceled` event of the revision the policy would record next,
// which the agent's wait reads; the policy, reaching the request, decides
// nothing (services/policy TestEachRevisionIsRecordedOnce). Here no policy
// runs, so bot's requests wait in the intake.
func TestACallThePolicyHasNotDecidedCanBeWithdrawn(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Limits.AgentCallsPerMinute = 4 })
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, _ := testenv.Connect(t, w.nats.URL())
	client := func(agent string) *airlock.Client {
		c, err := airlock.New(nc, agent)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	bot, idle := client("bot"), client("idle")
	if _, err := bot.Submit(ctx, airlock.Call{ID: "undecided", Server: "demo", Tool: "echo", Args: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	const reason = "the MCP client gave up on the request"
	if err := bot.Cancel(ctx, "undecided", reason); err != nil {
		t.Fatalf("withdrawing a call the policy has not decided: %v", err)
	}
	if out := await(t, w, "bot", "undecided"); out.Status != airlock.StatusCanceled || out.Reason != reason {
		t.Fatalf("the agent read %s (%q), want canceled with its reason", out.Status, out.Reason)
	}
	if err := bot.Cancel(ctx, "undecided", "again"); err != nil {
		t.Fatalf("withdrawing it again: %v", err)
	}
	evs := w.events("bot", "undecided", subject.Canceled)
	if len(evs) != 1 || evs[0].GetActor().GetId() != "bot" || evs[0].GetCanceled().GetReason() != reason || evs[0].GetRevision() != 1 {
		t.Fatalf("canceled events of the withdrawn call: %v, want one of revision 1 by bot with its reason", evs)
	}

	// publish stores an event of revision 1 of bot's call as the policy does.
	publish := func(call string, typ string) {
		t.Helper()
		ev := &airlockv1.Event{EventId: "bot." + call + ".1." + typ, AgentId: "bot", CallId: call, Revision: 1}
		switch typ {
		case subject.Requested:
			ev.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: call, Revision: 1, Server: "demo", Tool: "echo"}}}
		case subject.Allowed:
			ev.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW}}}
		}
		if _, err := w.policy.Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	// A revision that follows one sent back for changes, waiting for the
	// policy, is withdrawn as revision 2, whatever event came last (here a
	// reviewer's refused attempt on revision 1).
	publish("sent-back", subject.Requested)
	w.pending(&airlockv1.ToolCall{CallId: "sent-back", Server: "demo", Tool: "echo"}, nil)
	if _, err := w.decide("sent-back", "alice", airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "smaller"); err != nil {
		t.Fatal(err)
	}
	w.waitState("sent-back", 1, airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED)
	if _, err := bot.Submit(ctx, airlock.Call{ID: "sent-back", Revision: 2, Server: "demo", Tool: "echo", Args: map[string]any{"text": "smaller"}}); err != nil {
		t.Fatal(err)
	}
	attempt := &airlockv1.Event{EventId: "bot.sent-back.1.unauthorized_attempt", AgentId: "bot", CallId: "sent-back", Revision: 1,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "mallory"},
		Body:  &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{Action: "approve", Why: "not an approver"}}}
	if _, err := w.policy.Publish(ctx, attempt, ""); err != nil {
		t.Fatal(err)
	}
	// Not named, revision 2 is not withdrawn (helper-185: a cancel of a
	// call sent back withdrew a revision 2 nobody had submitted, and the
	// one submitted after it was dropped), nor is the cancel answered as
	// done while revision 2 goes on to be decided (helper-186): it says to
	// name the revision.
	_, err := bot.Withdraw(ctx, "sent-back", 0, reason)
	if mustCode(t, err, apierr.Conflict); !strings.Contains(err.Error(), "name the revision you submitted (revision 2)") {
		t.Fatalf("a cancel of the call sent back naming no revision: %v; want it to say to name revision 2", err)
	}
	if n := len(w.events("bot", "sent-back", subject.Canceled)); n != 0 {
		t.Fatalf("a cancel naming no revision withdrew revision 2 (%d canceled events)", n)
	}
	if _, err := bot.Withdraw(ctx, "sent-back", 2, reason); err != nil {
		t.Fatalf("withdrawing revision 2, waiting for the policy: %v", err)
	}
	if evs := w.events("bot", "sent-back", subject.Canceled); len(evs) != 1 || evs[0].GetRevision() != 2 {
		t.Fatalf("canceled events of the call sent back: %v, want one of revision 2", evs)
	}

	// An agent with nothing waiting for the policy withdraws nothing: a
	// mistyped id is told so, as before, and nothing is written.
	err = idle.Cancel(ctx, "undecided", reason)
	mustCode(t, err, apierr.NotFound)
	if n := len(w.events("idle", "undecided", subject.Canceled)); n != 0 {
		t.Fatalf("an agent with no request waiting stored %d canceled events", n)
	}

	// A call the policy is deciding, or decided, is not withdrawn this way.
	publish("deciding", subject.Requested)
	err = bot.Cancel(ctx, "deciding", reason) // sent again for 3 s
	if mustCode(t, err, apierr.Unavailable); !strings.Contains(err.Error(), "being decided") {
		t.Fatalf("a cancel of a call being decided: %v, want it to say so", err)
	}
	publish("allowed", subject.Requested)
	publish("allowed", subject.Allowed)
	err = bot.Cancel(ctx, "allowed", reason)
	if mustCode(t, err, apierr.NotFound); !strings.Contains(err.Error(), "calls that policy allowed or denied have none") {
		t.Fatalf("a cancel of an allowed call: %v, want it answered as before: no approval, allowed calls have none", err)
	}
	for _, call := range []string{"deciding", "allowed"} {
		if n := len(w.events("bot", call, subject.Canceled)); n != 0 {
			t.Fatalf("%s: %d canceled events, want none", call, n)
		}
	}

	// Each such withdrawal is an event in the trail, stored whether or not
	// the call was submitted while the agent has requests waiting: an agent
	// makes at most limits.agent_calls_per_minute of them a minute.
	for i := range 2 { // "undecided" and "sent-back" took two of the minute's four
		if err := bot.Cancel(ctx, fmt.Sprintf("flood-%d", i), reason); err != nil {
			t.Fatalf("withdrawal %d of the minute: %v", i+2, err)
		}
	}
	err = bot.Cancel(ctx, "flood-2", reason)
	if mustCode(t, err, apierr.Unavailable); !strings.Contains(err.Error(), "limits.agent_calls_per_minute") {
		t.Fatalf("the fifth withdrawal of the minute: %v, want it refused naming limits.agent_calls_per_minute", err)
	}
	if n := len(w.events("bot", "flood-2", subject.Canceled)); n != 0 {
		t.Fatalf("a withdrawal past the agent's bound stored %d canceled events", n)
	}
}
