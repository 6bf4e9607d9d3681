package approval_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func human(id string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: id, Channel: "console"}
}

func TestAgentCancelsOnlyItsOwnPendingCall(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "k1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	nc, _ := testenv.Connect(t, w.nats.URL())
	evil, _ := airlock.New(nc, "evil")
	// An agent names calls only in its own namespace: evil's k1 is not bot's.
	if err := evil.Cancel(ctx, "k1", "mine now"); err == nil || !strings.Contains(err.Error(), "no approval for call evil/k1") {
		t.Fatalf("another agent's cancel answered %v", err)
	}
	if rec, _ := w.api.Get(ctx, "bot", "k1", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		t.Fatalf("bot's call after evil's cancel: %v", rec.GetState())
	}

	bot, _ := airlock.New(nc, "bot")
	if err := bot.Cancel(ctx, "k1", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if out := await(t, w, "bot", "k1"); out.Status != airlock.StatusCanceled || out.Reason != "no longer needed" {
		t.Fatalf("agent got %+v", out)
	}
	if err := bot.Cancel(ctx, "k1", "again"); err != nil {
		t.Fatalf("canceling a canceled call should answer with its state, not fail: %v", err)
	}
	if err := bot.Cancel(ctx, "nope", ""); err == nil || !strings.Contains(err.Error(), "no approval for call bot/nope") {
		t.Fatalf("cancel of an unknown call answered %v", err)
	}
	if resp, err := w.approve("k1", "alice"); err != nil || resp.Changed {
		t.Fatalf("approving a canceled call: %v %v", resp, err)
	}
}

// A reason longer than the call's event may carry is refused before
// anything changes, whoever sends it — the hostile agent over the bus, a
// reviewer's rejection or cancel: the record stays pending, and a reason that fits
// then ends the call with its event, which the agent reads. (A 3 MB reason
// once moved the record while the event, over the stream's message size,
// was never stored and was retried for ever.)
func TestAReasonTooLongIsRefusedBeforeAnythingChanges(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "long", OnBehalfOf: "alice"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, _ := airlock.New(nc, "bot")
	long := strings.Repeat("x", 64<<10)
	for _, tt := range []struct {
		name string
		try  func() error
		want string
	}{
		{"the_agents_cancel_over_the_bus", func() error { return bot.Cancel(ctx, "long", long) }, "a reason of at most 4096 bytes"},
		// Refused by its size alone, before it is decoded: a body the bus
		// lets an agent publish that is not even JSON.
		{"the_agents_cancel_over_what_a_cancel_carries", func() error {
			m, err := nc.Request(subject.AgentCancel("bot"), []byte(`{"call_id":"long","reason":"`+long), 10*time.Second)
			if err != nil {
				return err
			}
			if e := m.Header.Get(micro.ErrorHeader); e != "" {
				return errors.New(e)
			}
			return nil
		}, "a reason of at most 4096 bytes"},
		{"a_reviewers_rejection", func() error {
			_, err := w.api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "long", Principal: human("alice"), Kind: airlockv1.DecisionKind_DECISION_KIND_REJECT, Reason: long})
			return err
		}, "keep it under 4096"},
		{"a_persons_cancel", func() error {
			_, err := w.api.Cancel(ctx, &airlockv1.CancelRequest{AgentId: "bot", CallId: "long", By: human("alice"), Reason: long})
			return err
		}, "keep it under 4096"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.try(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("answered %v; want it refused saying %q", err, tt.want)
			}
			if rec, _ := w.api.Get(ctx, "bot", "long", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
				t.Fatalf("the record moved to %v", rec.GetState())
			}
		})
	}
	if err := bot.Cancel(ctx, "long", strings.Repeat("y", 4000)); err != nil {
		t.Fatal(err)
	}
	if out := await(t, w, "bot", "long"); out.Status != airlock.StatusCanceled || len(out.Reason) != 4000 {
		t.Fatalf("agent got %s with a reason of %d bytes; want canceled with its 4000", out.Status, len(out.Reason))
	}
}

func TestOperatorCancelNeedsAnApproverOrTheRequester(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "oc", OnBehalfOf: "zoe", OnBehalfOfVerified: true}, nil)
	_, err := w.api.Cancel(context.Background(), &airlockv1.CancelRequest{AgentId: "bot", CallId: "oc", By: human("mallory")})
	mustCode(t, err, apierr.NotAuthorized)
	// A person an agent only claims to act for has no say over the call.
	w.pending(&airlockv1.ToolCall{CallId: "claimed", OnBehalfOf: "dave"}, nil)
	_, err = w.api.Cancel(context.Background(), &airlockv1.CancelRequest{AgentId: "bot", CallId: "claimed", By: human("dave"), Reason: "mine, says the agent"})
	mustCode(t, err, apierr.NotAuthorized)
	resp, err := w.api.Cancel(context.Background(), &airlockv1.CancelRequest{AgentId: "bot", CallId: "oc", By: human("zoe"), Reason: "changed my mind"})
	if err != nil || !resp.Changed || resp.Record.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("cancel by the requester: %v %v", resp, err)
	}
}

// An operator (the console's admin, vouched for as such by the console)
// withdraws any pending call; the vouching gives no say in a decision, and
// no other front-end can give it.
func TestAnOperatorCancelsAnyCallButDecidesNone(t *testing.T) {
	w := newWorld(t)
	w.start()
	operator := human("olga")
	operator.Operator = true
	w.pending(&airlockv1.ToolCall{CallId: "dec"}, nil)
	_, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "dec", Revision: 1, Principal: operator, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE})
	mustCode(t, err, apierr.NotAuthorized)
	w.pending(&airlockv1.ToolCall{CallId: "op", OnBehalfOf: "zoe", OnBehalfOfVerified: true}, nil)
	// Only the console, which holds people's roles, vouches for one.
	fk, err := w.deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	_, err = approvalapi.New(w.deps.NC, fk, "slack").Cancel(context.Background(), &airlockv1.CancelRequest{AgentId: "bot", CallId: "op", By: operator, Reason: "from slack"})
	mustCode(t, err, apierr.NotAuthorized)
	resp, err := w.api.Cancel(context.Background(), &airlockv1.CancelRequest{AgentId: "bot", CallId: "op", By: operator, Reason: "incident: stop it"})
	if err != nil || !resp.Changed || resp.Record.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED || resp.Record.GetDecidedBy().GetId() != "olga" {
		t.Fatalf("cancel by an operator: %v %v", resp, err)
	}
}

func TestApproveThreadAuthorizesEachCall(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "t1", ThreadId: "th"}, nil)
	w.pending(&airlockv1.ToolCall{CallId: "t2", ThreadId: "th"}, nil)
	w.pending(&airlockv1.ToolCall{CallId: "t3", ThreadId: "th", OnBehalfOf: "alice"}, nil)
	w.pending(&airlockv1.ToolCall{CallId: "t4", ThreadId: "other"}, nil)
	w.pending(&airlockv1.ToolCall{CallId: "t5", ThreadId: "th", AgentId: "evil"}, nil)
	var listed []*airlockv1.CallRef
	for _, c := range []struct{ agent, id string }{{"bot", "t1"}, {"bot", "t2"}, {"bot", "t3"}, {"bot", "t4"}, {"evil", "t5"}} {
		rec, err := w.api.Get(context.Background(), c.agent, c.id, 1)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, &airlockv1.CallRef{AgentId: c.agent, CallId: c.id, Revision: 1, ArgumentsDigest: rec.GetArgumentsDigest()})
	}
	resp, err := w.api.ApproveThread(context.Background(), &airlockv1.ApproveThreadRequest{AgentId: "bot", ThreadId: "th", Principal: human("alice"), Calls: listed})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 2 || len(resp.Refused) != 3 || !strings.Contains(resp.Refused["bot/t3"], "on their behalf") ||
		!strings.Contains(resp.Refused["bot/t4"], "not in thread") || !strings.Contains(resp.Refused["evil/t5"], "belongs to agent evil") {
		t.Fatalf("approve_thread answered %v", resp)
	}
	if rec, _ := w.api.Get(context.Background(), "evil", "t5", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		t.Fatal("another agent's call in a thread of the same name was approved")
	}
	for _, r := range resp.Results {
		if !r.Changed || r.Record.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_APPROVED {
			t.Fatalf("result %v", r)
		}
	}
	if rec, _ := w.api.Get(context.Background(), "bot", "t4", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		t.Fatal("a call of another thread was approved")
	}
}

// A thread approval is a vote for the arguments the reviewer was shown
// (each call's digest as the preview listed it): after alice edited a call
// that needs two approvals, bob's approval of the thread he saw before the
// edit does not count for her arguments; it counts once he saw them.
func TestApproveThreadVotesOnlyForTheArgumentsTheReviewerWasShown(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.answerEval(func(*airlockv1.ToolCall) *airlockv1.Decision {
		return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "write", Quorum: 2, Approvers: []string{"group:reviewers"}}
	})
	shown := w.pending(&airlockv1.ToolCall{CallId: "e1", ThreadId: "th"}, &airlockv1.Decision{Quorum: 2, Approvers: []string{"group:reviewers"}})
	edited, _ := structpb.NewStruct(map[string]any{"path": "/tmp/x", "text": "alice's words"})
	if _, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "e1", Revision: 1, Kind: approve,
		Principal: human("alice"), EditedArguments: edited, ArgumentsDigest: shown.GetArgumentsDigest()}); err != nil {
		t.Fatal(err)
	}
	thread := func(digest string) *airlockv1.ApproveThreadResponse {
		t.Helper()
		resp, err := w.api.ApproveThread(context.Background(), &airlockv1.ApproveThreadRequest{AgentId: "bot", ThreadId: "th", Principal: human("bob"),
			Calls: []*airlockv1.CallRef{{AgentId: "bot", CallId: "e1", Revision: 1, ArgumentsDigest: digest}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := thread(shown.GetArgumentsDigest()); len(resp.GetResults()) != 0 || !strings.Contains(resp.GetRefused()["bot/e1"], "edited") {
		t.Fatalf("bob's thread approval of the arguments before the edit: %v", resp)
	}
	now := w.waitState("e1", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
	if len(now.GetVotes()) != 1 {
		t.Fatalf("votes %v, want alice's only", now.GetVotes())
	}
	if resp := thread(now.GetArgumentsDigest()); len(resp.GetResults()) != 1 || !resp.GetResults()[0].GetChanged() {
		t.Fatalf("bob's thread approval of the edited arguments he was shown: %v", resp)
	}
	w.waitState("e1", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
}

func TestApproveThreadNeedsTheDigestEachCallWasShownWith(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "d1", ThreadId: "th"}, nil)
	_, err := w.api.ApproveThread(context.Background(), &airlockv1.ApproveThreadRequest{AgentId: "bot", ThreadId: "th", Principal: human("alice"),
		Calls: []*airlockv1.CallRef{{AgentId: "bot", CallId: "d1", Revision: 1}}})
	mustCode(t, err, apierr.InvalidRequest)
	w.waitState("d1", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
}

// One agent's calls with large arguments must not make the list too large
// to send: records are abridged (arguments left out, with a preview) and
// pages stay under the connection's max_payload; following
// next_page_token lists every record once.
func TestListAbridgesLargeRecordsAndPagesWithinTheMessageLimit(t *testing.T) {
	// A server with a small max_payload (production keeps NATS's 1 MiB),
	// so that the pages show with a few dozen records.
	w := newWorldOn(t, testenv.StartNATSWith(t, embedded.Options{MaxPayload: 64 << 10}))
	w.start()
	big := strings.Repeat("A", 40<<10)
	const n = 40
	for i := range n {
		args, _ := structpb.NewStruct(map[string]any{"path": "big.txt", "content": big})
		w.pending(&airlockv1.ToolCall{CallId: fmt.Sprintf("big%d", i), AgentId: "evil", Arguments: args, Reason: strings.Repeat("why ", 1000)}, nil)
	}
	w.pending(&airlockv1.ToolCall{CallId: "small"}, nil)
	seen := map[string]int{}
	testenv.Eventually(t, 10*time.Second, "every record in the list", func() bool {
		clear(seen)
		token, pages := "", 0
		for {
			resp, err := w.api.List(context.Background(), &airlockv1.ListRequest{PageToken: token})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			pages++
			for _, r := range resp.GetRecords() {
				seen[r.GetCall().GetCallId()]++
				if strings.HasPrefix(r.GetCall().GetCallId(), "big") && (!r.GetAbridged() || r.GetCall().GetArguments() != nil ||
					!strings.HasPrefix(r.GetArgumentsPreview(), `{"content":"AAAA`) || len(r.GetCall().GetReason()) > calls.ListReasonBytes+4) {
					t.Fatalf("a large record was listed whole: abridged=%v preview=%.40q reason %d bytes", r.GetAbridged(), r.GetArgumentsPreview(), len(r.GetCall().GetReason()))
				}
				if r.GetCall().GetCallId() == "small" && (r.GetAbridged() || r.GetCall().GetArguments() == nil) {
					t.Fatalf("a small record was abridged: %v", r)
				}
			}
			if token = resp.GetNextPageToken(); token == "" || pages > n+1 {
				break
			}
		}
		if pages < 2 {
			t.Fatalf("%d records in one page under a 64 KiB max_payload", len(seen))
		}
		return len(seen) == n+1
	})
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s listed %d times", id, k)
		}
	}
	if rec, err := w.api.Get(context.Background(), "evil", "big3", 0); err != nil || rec.GetAbridged() || len(rec.GetCall().GetArguments().GetFields()["content"].GetStringValue()) != len(big) {
		t.Fatalf("get does not return the whole record: %v", err)
	}
	if _, err := w.api.List(context.Background(), &airlockv1.ListRequest{PageToken: "not a token"}); apierr.CodeOf(err) != apierr.InvalidRequest {
		t.Fatalf("a made-up page token: %v", err)
	}
}

func TestListFiltersPendingCalls(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "ls1", AgentId: "a1"}, &airlockv1.Decision{Risk: airlockv1.Risk_RISK_HIGH})
	w.pending(&airlockv1.ToolCall{CallId: "ls2", AgentId: "a2"}, &airlockv1.Decision{Risk: airlockv1.Risk_RISK_LOW})
	if _, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "a2", CallId: "ls2", Kind: approve, Principal: human("bob")}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "airlock_approvals_pending to count the one pending call", func() bool {
		return w.gauge("airlock_approvals_pending") == 1
	})
	cases := []struct {
		name string
		req  *airlockv1.ListRequest
		want []string
	}{
		{"lists_pending_calls", &airlockv1.ListRequest{States: []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}}, []string{"ls1"}},
		{"filters_by_agent", &airlockv1.ListRequest{AgentId: "a2"}, []string{"ls2"}},
		{"filters_by_minimum_risk", &airlockv1.ListRequest{MinRisk: airlockv1.Risk_RISK_MEDIUM}, []string{"ls1"}},
		{"filters_by_tool_as_server__tool", &airlockv1.ListRequest{Tool: "fs__write_file", Limit: 1}, []string{"ls2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			testenv.Eventually(t, 10*time.Second, "the list to match", func() bool {
				resp, err := w.api.List(context.Background(), c.req)
				if err != nil {
					t.Fatal(err)
				}
				got = nil
				for _, r := range resp.Records {
					got = append(got, r.GetCall().GetCallId())
				}
				return strings.Join(got, ",") == strings.Join(c.want, ",")
			})
		})
	}
}

// Every channel is told at once; a channel that hangs delays neither the
// others nor the decision; the channels that announced are updated.
func TestNotifierFanOutIsolatesASlowChannel(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.NotifyTimeout = 3 * time.Second })
	stuck := &recorder{name: "stuck", block: true}
	fast := &recorder{name: "fast"}
	w.start(stuck, fast)
	w.ask(&airlockv1.ToolCall{CallId: "n1"}, nil)
	// Told while the stuck one hangs: before the stuck one gave up at
	// NotifyTimeout, however long a loaded machine takes to get there.
	testenv.Eventually(t, 10*time.Second, "the fast channel to be told", func() bool { return fast.has("announce:n1") })
	told, _ := fast.at("announce:n1")
	if gaveUp, ok := stuck.at("gave-up:n1"); ok && !told.Before(gaveUp) {
		t.Fatalf("the fast channel was told %s after the stuck one gave up: the hanging channel held it up", told.Sub(gaveUp))
	}
	if _, err := w.approve("n1", "alice"); err != nil {
		t.Fatalf("a hanging channel blocked the decision: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the fast channel to show the outcome", func() bool {
		return fast.has("update:n1:APPROVAL_STATE_APPROVED")
	})
	rec, _ := w.api.Get(context.Background(), "bot", "n1", 0)
	if len(rec.GetNotifications()) != 1 || rec.GetNotifications()[0].GetChannel() != "fast" || rec.GetNotifications()[0].GetRef() != "fast/n1" {
		t.Fatalf("notification refs %v", rec.GetNotifications())
	}
	kinds := map[string]bool{}
	testenv.Eventually(t, 10*time.Second, "notified events for announce and outcome", func() bool {
		for _, ev := range w.events("bot", "n1", "notified") {
			kinds[ev.GetNotified().GetChannel()+":"+ev.GetNotified().GetKind()] = true
		}
		return kinds["fast:announce"] && kinds["fast:outcome"]
	})
	if kinds["stuck:announce"] {
		t.Fatal("a failed delivery was recorded as notified")
	}
}

// A channel that hangs holds up neither the other channels' announcement
// nor the outcome they are shown: each channel's reference is stored as it
// answers, long before the hanging one times out.
func TestAHangingChannelDoesNotDelayTheOutcomeElsewhere(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.NotifyTimeout = time.Minute })
	stuck := &recorder{name: "stuck", block: true}
	fast := &recorder{name: "fast"}
	w.start(stuck, fast)
	w.ask(&airlockv1.ToolCall{CallId: "h1"}, nil)
	testenv.Eventually(t, 10*time.Second, "the fast channel's reference to be stored while the stuck one hangs", func() bool {
		rec, err := w.api.Get(context.Background(), "bot", "h1", 0)
		return err == nil && len(rec.GetNotifications()) == 1 && rec.GetNotifications()[0].GetChannel() == "fast"
	})
	if _, err := w.approve("h1", "alice"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the fast channel to show the outcome while the stuck one still hangs", func() bool {
		return fast.has("update:h1:APPROVAL_STATE_APPROVED")
	})
}

// A channel routed only on escalation ("escalate:pagerduty") is announced
// when the call escalates, not before, and then shown the outcome.
func TestEscalationAnnouncesToEscalationChannels(t *testing.T) {
	w := newWorld(t)
	first := &recorder{name: "first"}
	pager := &recorder{name: "pager", wants: func(rec *airlockv1.ApprovalRecord) bool { return rec.GetEscalated() }}
	w.start(first, pager)
	const escalateAfter = time.Second
	start := time.Now() // before the call exists: it cannot escalate before start + escalateAfter
	w.pending(&airlockv1.ToolCall{CallId: "e1"}, &airlockv1.Decision{
		Timeout: seconds(30), EscalateAfter: seconds(escalateAfter.Seconds()), EscalateTo: []string{"group:oncall"},
	})
	testenv.Eventually(t, 10*time.Second, "the first channel to be told", func() bool { return first.has("announce:e1") })
	// On a loaded machine the call may have escalated by now (after 1s):
	// the record is marked escalated before the escalation channels are
	// told, so read what the channel saw first, then the record.
	told := pager.has("announce:e1")
	if rec, err := w.api.Get(context.Background(), "bot", "e1", 0); err != nil {
		t.Fatal(err)
	} else if told && !rec.GetEscalated() {
		t.Fatal("the escalation channel was told before the call escalated")
	}
	testenv.Eventually(t, 10*time.Second, "the escalation channel to be told on escalation", func() bool { return pager.has("announce:e1") })
	if at, _ := pager.at("announce:e1"); at.Before(start.Add(escalateAfter)) {
		t.Fatalf("the escalation channel was told %s after the call was asked, before escalate_after (%s)", at.Sub(start), escalateAfter)
	}
	if len(first.seenOf("announce:e1")) != 1 {
		t.Fatal("escalation announced the call again on a channel that already had it")
	}
	if _, err := w.approve("e1", "dave"); err != nil {
		t.Fatalf("the escalated approver could not decide: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "both channels to show the outcome", func() bool {
		return first.has("update:e1:APPROVAL_STATE_APPROVED") && pager.has("update:e1:APPROVAL_STATE_APPROVED")
	})
}

func TestReminderThenEscalationWidensApprovers(t *testing.T) {
	// The test runs each sweep (SweepForTest): dave's first try must come
	// before the escalation, which a sweeper of its own could make, on a
	// loaded machine, before that try (1.5 s after the call was asked).
	w := newWorld(t, func(c *config.Config) { c.Approval.SweepInterval = time.Hour })
	ch := &recorder{name: "rec"}
	w.start(ch)
	ctx := context.Background()
	w.pending(&airlockv1.ToolCall{CallId: "r1"}, &airlockv1.Decision{
		Timeout: seconds(30), RemindAfter: seconds(0.2), EscalateAfter: seconds(1.5), EscalateTo: []string{"group:oncall"},
	})
	_, err := w.approve("r1", "dave")
	mustCode(t, err, apierr.NotAuthorized)
	// A sweep fires one timer: the escalation first if both are due (a
	// loaded machine's first sweep past 1.5 s), the reminder at the next.
	testenv.Eventually(t, 10*time.Second, "a reminder", func() bool {
		w.service.SweepForTest(ctx)
		rec, err := w.api.Get(ctx, "bot", "r1", 0)
		return err == nil && rec.GetReminded() && ch.has("remind:r1")
	})
	testenv.Eventually(t, 10*time.Second, "the escalation", func() bool {
		w.service.SweepForTest(ctx)
		rec, err := w.api.Get(ctx, "bot", "r1", 0)
		return err == nil && rec.GetEscalated()
	})
	resp, err := w.approve("r1", "dave")
	if err != nil || !resp.Changed {
		t.Fatalf("dave after escalation: %v %v", resp, err)
	}
	// A channel's notified event is recorded once it was told, after the
	// record says escalated: wait for both, then count them.
	var kinds map[string]int
	testenv.Eventually(t, 10*time.Second, "notified events for the reminder and the escalation", func() bool {
		kinds = map[string]int{}
		for _, ev := range w.events("bot", "r1", "notified") {
			kinds[ev.GetNotified().GetKind()]++
		}
		return kinds["remind"] > 0 && kinds["escalate"] > 0
	})
	if kinds["remind"] != 1 || kinds["escalate"] != 1 {
		t.Fatalf("notified kinds %v, want one remind and one escalate", kinds)
	}
}

// With two replicas sweeping the same records, an expiry is one CAS write.
func TestTwoReplicasExpireACallOnce(t *testing.T) {
	w := newWorld(t)
	w.start()
	first := w.replica
	w.start()
	w.ask(&airlockv1.ToolCall{CallId: "x1"}, &airlockv1.Decision{Timeout: seconds(0.3)})
	testenv.WaitForEvent(t, w.js, "airlock.evt.bot.x1.>", "expired", 10*time.Second)
	// Count once neither replica can still be expiring x1: each has begun a
	// sweep with x1's expiry in its index, so its sweeps that saw x1 pending
	// are over (a replica sweeps one pass at a time). Two calls asked now are
	// written after the expiry: a sweep that counts two pending calls has
	// read an index holding both, hence the expiry (one would be ambiguous:
	// x1 itself was one pending call).
	w.ask(&airlockv1.ToolCall{CallId: "x2"}, nil)
	w.ask(&airlockv1.ToolCall{CallId: "x3"}, nil)
	for i, replica := range []svc.Deps{first, w.replica} {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("replica %d to sweep with x1 expired", i+1), func() bool {
			return gaugeOf(t, replica, "airlock_approvals_pending") == 2
		})
	}
	kv, err := w.js.KeyValue(context.Background(), w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := bus.History(context.Background(), kv, "bot.x1.1")
	if err != nil {
		t.Fatal(err)
	}
	expiries := 0
	for _, e := range hist {
		rec := &airlockv1.ApprovalRecord{}
		if err := proto.Unmarshal(e.Value(), rec); err != nil {
			t.Fatal(err)
		}
		if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED {
			expiries++
		}
	}
	if expiries != 1 {
		t.Fatalf("%d writes to expired, want 1", expiries)
	}
	if n := len(w.events("bot", "x1", "expired")); n != 1 {
		t.Fatalf("%d expired events, want 1", n)
	}
}

// A replica that wrote a decision and died before publishing its event
// leaves a decided record without an event; a running replica publishes it
// — an approval sealed, so that the executor runs it.
func TestDecisionWhoseEventWasLostIsPublished(t *testing.T) {
	tests := []struct {
		name  string
		state airlockv1.ApprovalState
		typ   string
		check func(*testing.T, *airlockv1.Event, seal.Key)
	}{
		{"a_rejection_with_its_reason", airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, "rejected", func(t *testing.T, ev *airlockv1.Event, _ seal.Key) {
			if ev.GetRejected().GetReason() != "too risky" {
				t.Fatalf("republished rejection %v", ev)
			}
		}},
		{"an_approval_sealed_for_the_executor", airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, "approved", func(t *testing.T, ev *airlockv1.Event, k seal.Key) {
			if _, err := k.VerifyDecision(ev); err != nil {
				t.Fatalf("the republished approval would not run: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.start()
			rec := w.pending(&airlockv1.ToolCall{CallId: "lost"}, nil)
			kv, err := w.js.KeyValue(context.Background(), w.cfg.Buckets.Approvals)
			if err != nil {
				t.Fatal(err)
			}
			// Stand in for the replica that died: write the decision, publish nothing.
			rec.State, rec.DecidedBy, rec.Reason = tt.state, human("bob"), "too risky"
			rec.UpdatedAt = timestamppb.New(time.Now().Add(-5 * time.Second))
			data, _ := proto.Marshal(rec)
			if _, err := kv.Put(context.Background(), "bot.lost.1", data); err != nil {
				t.Fatal(err)
			}
			ev := testenv.WaitForEvent(t, w.js, "airlock.evt.bot.lost.>", tt.typ, 10*time.Second)
			if ev.GetEventId() != "bot.lost.1."+tt.typ {
				t.Fatalf("republished event %v", ev)
			}
			k, err := w.deps.DecisionKey()
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, ev, k)
		})
	}
}

func TestExecutorProgressMovesApprovedRecords(t *testing.T) {
	w := newWorld(t)
	ch := &recorder{name: "rec"}
	w.start(ch)
	w.pending(&airlockv1.ToolCall{CallId: "ex"}, nil)
	if _, err := w.approve("ex", "alice"); err != nil {
		t.Fatal(err)
	}
	exec := w.deps.Publisher("executor")
	for _, ev := range []*airlockv1.Event{
		{EventId: "ex.1.started", AgentId: "bot", CallId: "ex", Revision: 1, Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "e1"}}},
		{EventId: "ex.1.completed", AgentId: "bot", CallId: "ex", Revision: 1, Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: "{}"}}},
		// An allowed call has no approval record: ignored, not retried forever.
		{EventId: "free.1.started", AgentId: "bot", CallId: "free", Revision: 1, Body: &airlockv1.Event_Started{Started: &airlockv1.Started{}}},
	} {
		if _, err := exec.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	w.waitState("ex", 1, airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED)
	testenv.Eventually(t, 10*time.Second, "the channel to show completion", func() bool {
		return ch.has("update:ex:APPROVAL_STATE_COMPLETED")
	})
}

func TestStandingGrantsCreateListRevoke(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "g1", OnBehalfOf: "zoe"}, nil)
	ctx := context.Background()

	_, err := w.api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: "bot", FromCallId: "g1", By: human("mallory")})
	mustCode(t, err, apierr.NotAuthorized)
	_, err = w.api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: "bot", FromCallId: "g1", By: human("zoe")})
	mustCode(t, err, apierr.NotAuthorized)

	g, err := w.api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: "bot", FromCallId: "g1", By: human("alice"),
		Grant: &airlockv1.StandingGrant{UsesLeft: 2, ArgumentGlobs: map[string]string{"/path": "/tmp/*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetAgentId() != "bot" || g.GetServer() != "fs" || g.GetTool() != "write_file" || g.GetUsesLeft() != 2 || !g.GetLimitedUses() || g.GetCreatedBy().GetId() != "alice" {
		t.Fatalf("grant %v", g)
	}
	// The policy service reads it from the grants bucket by id.
	kv, err := w.js.KeyValue(ctx, w.cfg.Buckets.Grants)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, g.GetId())
	if err != nil {
		t.Fatal(err)
	}
	stored := &airlockv1.StandingGrant{}
	if err := proto.Unmarshal(e.Value(), stored); err != nil || !proto.Equal(stored, g) {
		t.Fatalf("stored grant %v (%v)", stored, err)
	}
	list, err := w.api.ListGrants(ctx, false)
	if err != nil || len(list) != 1 {
		t.Fatalf("list %v %v", list, err)
	}
	_, err = w.api.RevokeGrant(ctx, &airlockv1.RevokeGrantRequest{GrantId: g.GetId(), By: human("mallory")})
	mustCode(t, err, apierr.NotAuthorized)
	rv, err := w.api.RevokeGrant(ctx, &airlockv1.RevokeGrantRequest{GrantId: g.GetId(), By: human("bob")})
	if err != nil || !rv.GetRevoked() || rv.GetRevokedBy().GetId() != "bob" {
		t.Fatalf("revoke %v %v", rv, err)
	}
	if list, _ := w.api.ListGrants(ctx, false); len(list) != 0 {
		t.Fatalf("a revoked grant is listed as active: %v", list)
	}
	if list, _ := w.api.ListGrants(ctx, true); len(list) != 1 {
		t.Fatalf("include_inactive lists %d grants", len(list))
	}
	_, err = w.api.RevokeGrant(ctx, &airlockv1.RevokeGrantRequest{GrantId: "grant_nope", By: human("bob")})
	mustCode(t, err, apierr.NotFound)
	// Said to a person at a terminal or a page: where the grants are listed,
	// not the service's subject (grants.list).
	if !strings.Contains(err.Error(), "`airlock approvals grants`, the console's Grants page or GET /api/v1/grants lists the existing ones") {
		t.Fatalf("revoking no grant says %v", err)
	}
}

func TestMalformedRequestsAreRefusedWithASentence(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "m1"}, nil)
	cases := []struct {
		name string
		req  *airlockv1.DecideRequest
		code apierr.Code
	}{
		{"refuses_a_decision_without_principal", &airlockv1.DecideRequest{AgentId: "bot", CallId: "m1", Kind: approve}, apierr.InvalidRequest},
		{"refuses_a_decision_without_kind", &airlockv1.DecideRequest{AgentId: "bot", CallId: "m1", Principal: human("alice")}, apierr.InvalidRequest},
		{"refuses_a_bad_call_id", &airlockv1.DecideRequest{AgentId: "bot", CallId: "a.b", Kind: approve, Principal: human("alice")}, apierr.InvalidRequest},
		{"answers_not_found_for_an_unknown_call", &airlockv1.DecideRequest{AgentId: "bot", CallId: "nope", Kind: approve, Principal: human("alice")}, apierr.NotFound},
		{"refuses_an_agent_as_decider", &airlockv1.DecideRequest{AgentId: "bot", CallId: "m1", Kind: approve, Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"}}, apierr.NotAuthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.api.Decide(context.Background(), c.req)
			mustCode(t, err, c.code)
		})
	}
	if rec, _ := w.api.Get(context.Background(), "bot", "m1", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		t.Fatalf("a malformed request changed the record: %v", rec)
	}
}

// The service rides out a NATS restart: the endpoints, the consumer and the
// index that feeds lists and timers all resume.
func TestServiceKeepsWorkingAcrossANATSRestart(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "before"}, nil)
	w.nats.Restart()
	w.waitServing()
	// Recorded (the consumer resumed), not waited for as pending: a
	// loaded machine's first read can come after its 3 s deadline.
	w.recorded(&airlockv1.ToolCall{CallId: "after"}, &airlockv1.Decision{Timeout: seconds(3)})
	if _, err := w.approve("before", "alice"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the index to list the approval made after the restart", func() bool {
		resp, err := w.api.List(context.Background(), &airlockv1.ListRequest{States: []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_APPROVED}})
		return err == nil && len(resp.Records) == 1 && resp.Records[0].GetCall().GetCallId() == "before"
	})
	testenv.WaitForEvent(t, w.js, "airlock.evt.bot.after.>", "expired", 10*time.Second)
}

// TestOnlySealedRequestsDecide: a decide request that no front-end sealed —
// delivered by a consumer's delivery subject, a reply, a forged publish —
// changes nothing, whoever it names, and is recorded; the approvals the
// service does issue are sealed for the executor.
func TestOnlySealedRequestsDecide(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "seal1"}, nil)
	forged := approvalapi.New(w.deps.NC, seal.NewKey(), "console")
	_, err := forged.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "seal1", Kind: approve, Principal: human("alice")})
	mustCode(t, err, apierr.NotAuthorized)
	unsealed := approvalapi.New(w.deps.NC, seal.Key{}, "")
	_, err = unsealed.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "seal1", Kind: approve, Principal: human("alice")})
	mustCode(t, err, apierr.NotAuthorized)
	if rec, _ := w.api.Get(context.Background(), "bot", "seal1", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(rec.GetVotes()) != 0 {
		t.Fatalf("an unsealed decision changed the record: %v", rec)
	}
	testenv.Eventually(t, 10*time.Second, "two unauthorized_attempt events", func() bool {
		return len(w.events("bot", "seal1", "unauthorized_attempt")) == 2
	})

	if _, err := w.approve("seal1", "alice"); err != nil {
		t.Fatal(err)
	}
	ev := testenv.WaitForEvent(t, w.js, "airlock.evt.bot.seal1.>", "approved", 10*time.Second)
	dk, _ := w.deps.DecisionKey()
	if _, err := dk.VerifyDecision(ev); err != nil {
		t.Fatalf("the approved event is not sealed with the decision key: %v", err)
	}
}
