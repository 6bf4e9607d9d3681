package approval_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// On a replicated events stream the policy records an allowed call's
// request and decision as one atomic batch. An agent withdraws each of
// many calls right after submitting it, two policy replicas and two
// approval replicas running (helper-184's probe): whoever wins each race,
// a revision has one end, a withdrawal answered is followed by no
// decision, and a call put to people is always withdrawn.
func TestCancelsRacingThePolicysBatchOnR3LeaveOneEndEach(t *testing.T) {
	c := testenv.StartCluster(t, 3)
	cfg := c.Config
	for range 2 {
		startPolicy(t, cfg)
		a, err := approval.NewFromConfig(context.Background(), testenv.Deps(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		testenv.RunService(t, a)
	}
	nc, js := testenv.Connect(t, cfg.NATS.URL)
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Every other call is put to people (a write): its ask is never
	// batched with its request, so a cancel may meet it between the two
	// (helper-185's probe).
	const n = 150
	answers := make([]error, n)
	testenv.Concurrently(n, 4, func(i int) {
		id := fmt.Sprintf("r3-%d", i)
		tool, args := "echo", map[string]any{"text": id}
		if i%2 == 1 {
			tool, args = "write_file", map[string]any{"path": id + ".txt", "content": "x"}
		}
		if _, err := bot.Submit(ctx, airlock.Call{ID: id, Server: "demo", Tool: tool, Args: args}); err != nil {
			answers[i] = err
			return
		}
		if i%3 == 0 {
			time.Sleep(time.Duration(i%7) * time.Millisecond) // cancels at varied moments of the policy's work
		}
		// As the gateway does: not recorded yet is tried again (the SDK
		// itself sends "cancel again in a moment" again).
		err := bot.Cancel(ctx, id, "gave up")
		for try := 0; apierr.CodeOf(err) == apierr.NotFound && try < 50; try++ {
			time.Sleep(10 * time.Millisecond)
			err = bot.Cancel(ctx, id, "gave up")
		}
		answers[i] = err
	})
	testenv.Settled(t, js, cfg.Intake.Name, policy.Durable, 60*time.Second)
	for i := range n {
		id := fmt.Sprintf("r3-%d", i)
		ask := i%2 == 1
		var joined string
		testenv.Eventually(t, 10*time.Second, id+" to end", func() bool {
			joined = " " + strings.Join(testenv.SubjectTypes(t, js, subject.OfCall("bot", id)), " ") + " "
			return strings.Contains(joined, " canceled ") || strings.Contains(joined, " allowed ")
		})
		ends := strings.Count(joined, " allowed ") + strings.Count(joined, " canceled ") + strings.Count(joined, " denied ")
		withdrawn := answers[i] == nil
		switch {
		case ends != 1:
			t.Errorf("%s: %d ends: %s", id, ends, joined)
		case ask && !withdrawn:
			t.Errorf("%s: put to people, and its withdrawal answered %v: %s", id, answers[i], joined)
		case withdrawn && strings.Contains(joined, " allowed "):
			t.Errorf("%s: withdrawn (answered), yet allowed: %s", id, joined)
		case !withdrawn && (apierr.CodeOf(answers[i]) != apierr.NotFound || strings.Contains(joined, " canceled ")):
			t.Errorf("%s: not withdrawn (%v), yet: %s", id, answers[i], joined)
		}
	}
}

// requestedRev1 records revision 1 of bot's call id as the policy does
// before it asks people (the world's ask publishes only approval_requested).
func (w *world) requestedRev1(id string) {
	w.t.Helper()
	ev := &airlockv1.Event{EventId: "bot." + id + ".1.requested", AgentId: "bot", CallId: id, Revision: 1,
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: id, Revision: 1, Server: "fs", Tool: "write_file"}}}}
	if _, err := w.policy.Publish(context.Background(), ev, ""); err != nil {
		w.t.Fatal(err)
	}
}

// Revision 2 of a call sent back for changes, waiting for the policy, is
// withdrawn as revision 2 whatever was stored after the changes_requested,
// and after revision 1's record left the bucket (helper-184, F1): the
// cancel read the call's last event of any type and answered "waits for
// nobody: its last event is decision refused / unauthorized attempt", or,
// with the record gone, "it ended changes requested".
func TestARevisionAfterOneSentBackIsWithdrawnWhateverCameLast(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		after     func(t *testing.T, w *world)
	}{
		{"a_late_approve_by_another_reviewer", 0, func(t *testing.T, w *world) {
			if _, err := w.approve("r2", "bob"); err != nil {
				t.Fatal(err)
			}
			testenv.WaitForEvent(t, w.js, subject.OfCall("bot", "r2"), subject.DecisionRefused, 10*time.Second)
		}},
		{"an_approve_by_someone_who_may_not", 0, func(t *testing.T, w *world) {
			_, err := w.approve("r2", "mallory")
			mustCode(t, err, apierr.NotAuthorized)
			testenv.WaitForEvent(t, w.js, subject.OfCall("bot", "r2"), subject.UnauthorizedAttempt, 10*time.Second)
		}},
		{"revision_1s_record_gone", time.Second, func(t *testing.T, w *world) {
			testenv.Eventually(t, 20*time.Second, "the record of r2 to leave the bucket", func() bool {
				_, err := w.api.Get(context.Background(), "bot", "r2", 0)
				return apierr.CodeOf(err) == apierr.NotFound
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, func(c *config.Config) {
				if tc.retention > 0 {
					c.Approval.EndedRetention = tc.retention
				}
			})
			w.start()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w.requestedRev1("r2")
			w.pending(&airlockv1.ToolCall{CallId: "r2"}, nil)
			if _, err := w.decide("r2", "alice", airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "smaller"); err != nil {
				t.Fatal(err)
			}
			w.waitState("r2", 1, airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED)
			tc.after(t, w)
			nc, _ := testenv.Connect(t, w.nats.URL())
			bot, err := airlock.New(nc, "bot")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bot.Submit(ctx, airlock.Call{ID: "r2", Revision: 2, Server: "fs", Tool: "write_file", Args: map[string]any{"path": "/tmp/y"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := bot.Withdraw(ctx, "r2", 2, "the MCP client gave up"); err != nil {
				t.Fatalf("withdrawing revision 2, waiting for the policy: %v", err)
			}
			if evs := w.events("bot", "r2", subject.Canceled); len(evs) != 1 || evs[0].GetRevision() != 2 {
				t.Fatalf("canceled events: %v, want one of revision 2", evs)
			}
		})
	}
}

// A withdrawal stored for a revision 1 the policy never recorded is in the
// encoding of the agent's own events (its request, in the intake, is not
// read): a JSON agent's wait must be able to read it.
func TestAWithdrawalIsInTheEncodingOfTheAgentsEvents(t *testing.T) {
	w := newWorld(t)
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// jbot's earlier call was recorded in protojson, as its requests are.
	earlier := &airlockv1.Event{EventId: "jbot.earlier.1.requested", AgentId: "jbot", CallId: "earlier", Revision: 1, Json: true,
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{AgentId: "jbot", CallId: "earlier", Revision: 1, Server: "demo", Tool: "echo", JsonEvents: true}}}}
	if _, err := w.policy.Publish(ctx, earlier, ""); err != nil {
		t.Fatal(err)
	}
	nc, _ := testenv.Connect(t, w.nats.URL())
	for _, tc := range []struct {
		agent string
		json  bool
	}{{"jbot", true}, {"bot", false}} {
		c, err := airlock.New(nc, tc.agent)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Submit(ctx, airlock.Call{ID: "late", Server: "demo", Tool: "echo", Args: map[string]any{"text": "hi"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(ctx, "late", "gave up"); err != nil {
			t.Fatal(err)
		}
		subj, _ := subject.Event(tc.agent, "late", subject.Canceled)
		m, err := bus.LastStored(ctx, nc, w.cfg.Stream.Name, subj)
		if err != nil || m == nil {
			t.Fatalf("%s's withdrawal: %v %v", tc.agent, m, err)
		}
		if got := envelope.IsJSON(m.Header); got != tc.json {
			t.Fatalf("%s's withdrawal is protojson: %v, want %v", tc.agent, got, tc.json)
		}
	}
}

// A cancel that meets a call the policy is deciding (its `requested`
// stored, its ask not yet: every call put to people passes through this)
// was answered not_found, which the REST API answers 404, as for a call
// with nothing to cancel: a REST client stopped, and the call then waited
// for people after its agent withdrew it (helper-185, F4). It is
// "unavailable: cancel again in a moment", which the SDK sends again: the
// withdrawal lands once the ask is stored.
func TestACancelThatMeetsACallBeingDecidedLandsOnceItIsAsked(t *testing.T) {
	w := newWorld(t)
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bot := w.agent("bot")
	if _, err := bot.Submit(ctx, airlock.Call{ID: "deciding", Server: "fs", Tool: "write_file", Args: map[string]any{"path": "/tmp/x"}}); err != nil {
		t.Fatal(err)
	}
	w.requestedRev1("deciding") // the policy recorded it; its ask follows
	// The cancels bot sends, seen as they are sent: a second one means the
	// first was answered "being decided".
	nc, _ := testenv.Connect(t, w.nats.URL())
	sent, err := nc.SubscribeSync(subject.AgentCancel("bot"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := bot.Withdraw(ctx, "deciding", 0, "the REST client gave up")
		answered <- err
	}()
	for range 2 {
		if _, err := sent.NextMsgWithContext(ctx); err != nil {
			t.Fatalf("waiting for bot's cancel to be sent again: %v", err)
		}
	}
	w.ask(&airlockv1.ToolCall{CallId: "deciding"}, nil)
	if err := <-answered; err != nil {
		t.Fatalf("a cancel that met the call being decided: %v; want it withdrawn once asked", err)
	}
	w.waitState("deciding", 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
}

// An `invalid` ends no call: a request refused over its agent's budget is
// submitted again, same id, and the policy records it then. Its withdrawal
// while it waits for the policy was answered "no approval" (a check added
// after helper-185 took `invalid` for the call's end), and the call then
// ran (helper-186, F1).
func TestACallSubmittedAgainAfterARefusalCanBeWithdrawn(t *testing.T) {
	w := newWorld(t)
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bot := w.agent("bot")
	inv := ingress.InvalidEvent(subject.AgentRequests("bot"), 7, 1, nil, &ingress.Refusal{Call: "again", Reason: "agent bot is over its budget of 1 calls a minute: submit it again later"})
	if _, err := w.policy.Publish(ctx, inv, ""); err != nil {
		t.Fatal(err)
	}
	// Submitted again, as it was told; no policy runs yet.
	if _, err := bot.Submit(ctx, airlock.Call{ID: "again", Server: "demo", Tool: "echo", Args: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bot.Withdraw(ctx, "again", 1, "the MCP client gave up"); err != nil {
		t.Fatalf("withdrawing a call submitted again after a refusal, waiting for the policy: %v", err)
	}
	startPolicy(t, w.cfg)
	testenv.Settled(t, w.js, w.cfg.Intake.Name, policy.Durable, 30*time.Second)
	if got := strings.Join(testenv.SubjectTypes(t, w.js, subject.OfCall("bot", "again")), " "); got != "invalid canceled" {
		t.Fatalf("the call's events: %s; want its refusal and its withdrawal, nothing decided", got)
	}
}

// agent is an SDK client of agent on a connection of its own.
func (w *world) agent(agent string) *airlock.Client {
	w.t.Helper()
	nc, _ := testenv.Connect(w.t, w.nats.URL())
	c, err := airlock.New(nc, agent)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// startPolicy runs a policy service replica on cfg.
func startPolicy(t *testing.T, cfg config.Config) {
	t.Helper()
	deps := testenv.Deps(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := policy.NewEngine(ctx, deps)
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.New(deps, e, e.Serve)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, s)
}
