package approval_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

const approve = airlockv1.DecisionKind_DECISION_KIND_APPROVE

// A: approve → one approved event bound to the arguments and policy revision.
func TestScenarioA_ApprovalPublishesOneApprovedEvent(t *testing.T) {
	w := newWorld(t)
	w.start()
	rec := w.pending(&airlockv1.ToolCall{CallId: "a1"}, nil)
	if rec.GetDeadline().AsTime().Sub(rec.GetCreatedAt().AsTime()) != 5*time.Minute {
		t.Fatalf("deadline %v is not the 5 min default after %v", rec.GetDeadline().AsTime(), rec.GetCreatedAt().AsTime())
	}
	if got := rec.GetDecision().GetApprovers(); len(got) != 1 || got[0] != "group:reviewers" {
		t.Fatalf("a decision naming no approvers should fall back to group:reviewers, got %v", got)
	}
	resp, err := w.approve("a1", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Changed || resp.Record.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_APPROVED {
		t.Fatalf("approve answered %v", resp)
	}
	again, err := w.approve("a1", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed || !strings.Contains(again.Message, "already approved by alice") {
		t.Fatalf("a second approval should change nothing and say so, got changed=%v %q", again.Changed, again.Message)
	}
	evs := w.events("bot", "a1", "approved")
	if len(evs) != 1 {
		t.Fatalf("%d approved events, want 1", len(evs))
	}
	a := evs[0].GetApproved()
	want, _ := canon.Digest(rec.GetCall().GetArguments())
	if a.GetArgumentsDigest() != want || a.GetPolicyRevision() != "rev-test" || a.GetEdited() {
		t.Fatalf("approved event is not bound to the call: %v", a)
	}
	if act := evs[0].GetActor(); act.GetType() != airlockv1.ActorType_ACTOR_TYPE_HUMAN || act.GetId() != "alice" || act.GetChannel() != "console" {
		t.Fatalf("approved event actor %v", act)
	}
	if evs[0].GetEventId() != "bot.a1.1.approved" {
		t.Fatalf("approved event id %q is not deterministic", evs[0].GetEventId())
	}
}

// C: reject → the agent's Await gets the reason; nothing is approved.
func TestScenarioC_RejectionReasonReachesTheAgent(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "c1"}, nil)
	if _, err := w.decide("c1", "bob", airlockv1.DecisionKind_DECISION_KIND_REJECT, "not on a Friday"); err != nil {
		t.Fatal(err)
	}
	out := await(t, w, "bot", "c1")
	if out.Status != airlock.StatusRejected || out.Reason != "not on a Friday" || out.DecidedBy != "bob" {
		t.Fatalf("agent got %+v", out)
	}
	if n := len(w.events("bot", "c1", "approved")); n != 0 {
		t.Fatalf("%d approved events after a rejection", n)
	}
}

// D: someone not among the approvers is refused, nothing changes, and the
// attempt is recorded with who and why.
func TestScenarioD_UnauthorizedDeciderIsRefusedAndRecorded(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "d1"}, &airlockv1.Decision{Approvers: []string{"group:oncall"}})
	_, err := w.approve("d1", "alice")
	mustCode(t, err, apierr.NotAuthorized)
	if !strings.Contains(err.Error(), "alice is not among the approvers") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	ev := testenv.WaitForEvent(t, w.js, "airlock.evt.bot.d1.>", "unauthorized_attempt", 10*time.Second)
	if ev.GetActor().GetId() != "alice" || ev.GetUnauthorizedAttempt().GetAction() != "approve" || ev.GetUnauthorizedAttempt().GetWhy() == "" {
		t.Fatalf("unauthorized_attempt %v", ev)
	}
	if rec, _ := w.api.Get(context.Background(), "bot", "d1", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(rec.GetVotes()) != 0 {
		t.Fatalf("a refused attempt changed the record: %v", rec)
	}
	if _, err := w.approve("d1", "dave"); err != nil {
		t.Fatalf("dave is in group oncall and should be able to approve: %v", err)
	}
}

// E: 100 concurrent approvals (double clicks, Slack retries, several
// reviewers, two replicas) → one transition, one approved event.
func TestScenarioE_HundredConcurrentApprovalsMakeOneTransition(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.start() // a second replica shares the endpoints and the bucket
	w.pending(&airlockv1.ToolCall{CallId: "e1"}, nil)
	people := []string{"alice", "bob", "carol", "erin"}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changed int
		errs    []error
	)
	started := time.Now()
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := w.approve("e1", people[i%len(people)])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if resp.Changed {
				changed++
			}
		}()
	}
	wg.Wait()
	t.Logf("100 concurrent approvals answered in %s", time.Since(started))
	if len(errs) > 0 {
		t.Fatalf("%d approvals failed, first: %v", len(errs), errs[0])
	}
	if changed != 1 {
		t.Fatalf("%d approvals reported a change, want exactly 1", changed)
	}
	rec, _ := w.api.Get(context.Background(), "bot", "e1", 0)
	if len(rec.GetVotes()) != 1 {
		t.Fatalf("%d votes recorded, want 1", len(rec.GetVotes()))
	}
	if n := len(w.events("bot", "e1", "approved")); n != 1 {
		t.Fatalf("%d approved events, want 1", n)
	}
}

// F: past its deadline a call expires (the agent is told), and a later
// approval changes nothing.
func TestScenarioF_DeadlinePassesCallExpiresLaterApprovalRefused(t *testing.T) {
	w := newWorld(t)
	w.start()
	// Not waiting for "pending": on a busy machine the call may expire before a poll sees it.
	w.ask(&airlockv1.ToolCall{CallId: "f1"}, &airlockv1.Decision{Timeout: seconds(0.4)})
	testenv.WaitForEvent(t, w.js, "airlock.evt.bot.f1.>", "expired", 10*time.Second)
	resp, err := w.approve("f1", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Changed || resp.Record.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED || !strings.Contains(resp.Message, "expired") {
		t.Fatalf("late approval answered changed=%v state=%v %q", resp.Changed, resp.Record.GetState(), resp.Message)
	}
	if n := len(w.events("bot", "f1", "approved")); n != 0 {
		t.Fatalf("%d approved events for an expired call", n)
	}
	if out := await(t, w, "bot", "f1"); out.Status != airlock.StatusExpired {
		t.Fatalf("agent got %+v", out)
	}
}

// B: request changes → the feedback reaches Await; the revised call is a new
// revision that is pending and decided afresh.
func TestScenarioB_ChangesRequestedThenRevisionIsDecidedAfresh(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "b1"}, nil)
	_, err := w.decide("b1", "alice", airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "")
	mustCode(t, err, apierr.InvalidRequest) // feedback is required
	if _, err := w.decide("b1", "alice", airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "write to /tmp/y instead"); err != nil {
		t.Fatal(err)
	}
	out := await(t, w, "bot", "b1")
	if out.Status != airlock.StatusChangesRequested || out.Feedback != "write to /tmp/y instead" {
		t.Fatalf("agent got %+v", out)
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/y", "text": "hello"})
	w.pending(&airlockv1.ToolCall{CallId: "b1", Revision: 2, Arguments: args}, nil)

	// A decision about the superseded revision is refused; the new one is decided.
	_, err = w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "b1", Revision: 1, Kind: approve,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}})
	mustCode(t, err, apierr.Conflict)
	// Once a call has two revisions, a decision must name the one its person reviewed.
	_, err = w.approve("b1", "alice")
	mustCode(t, err, apierr.InvalidRequest)
	resp, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "b1", Revision: 2, Kind: approve,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Changed || resp.Record.GetCall().GetRevision() != 2 {
		t.Fatalf("approval of the revision answered %v", resp)
	}
	evs := w.events("bot", "b1", "approved")
	if len(evs) != 1 || evs[0].GetRevision() != 2 || evs[0].GetApproved().GetCall().GetArguments().GetFields()["path"].GetStringValue() != "/tmp/y" {
		t.Fatalf("approved events %v", evs)
	}
}

// I (seed 004): approve with edited arguments → the approved event carries
// the edited arguments and their digest; the original is kept.
func TestEditedApprovalCarriesEditedArgumentsAndDigest(t *testing.T) {
	w := newWorld(t)
	w.start()
	rec := w.pending(&airlockv1.ToolCall{CallId: "i1"}, nil)
	edited, _ := structpb.NewStruct(map[string]any{"path": "/tmp/safe", "text": "hello"})
	resp, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "i1", Kind: approve, EditedArguments: edited,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Changed || !proto.Equal(resp.Record.GetEditedArguments(), edited) {
		t.Fatalf("edit answered %v", resp)
	}
	evs := w.events("bot", "i1", "approved")
	if len(evs) != 1 {
		t.Fatalf("%d approved events", len(evs))
	}
	a := evs[0].GetApproved()
	editedDigest, _ := canon.Digest(edited)
	origDigest, _ := canon.Digest(rec.GetCall().GetArguments())
	switch {
	case !a.GetEdited():
		t.Fatal("approved event does not say it was edited")
	case !proto.Equal(a.GetCall().GetArguments(), edited):
		t.Fatalf("approved call runs %v, want the edited arguments", a.GetCall().GetArguments())
	case a.GetArgumentsDigest() != editedDigest:
		t.Fatalf("arguments_digest %s is not the digest of the edited arguments %s", a.GetArgumentsDigest(), editedDigest)
	case !proto.Equal(a.GetOriginalArguments(), rec.GetCall().GetArguments()) || a.GetOriginalArgumentsDigest() != origDigest:
		t.Fatal("the original arguments and digest are not kept")
	}
}

// J: quorum 2 counts distinct people; the requester cannot approve.
func TestQuorumOfTwoCountsDistinctPrincipals(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "j1", OnBehalfOf: "carol"}, &airlockv1.Decision{Quorum: 2})
	steps := []struct {
		who         string
		wantChanged bool
		wantState   airlockv1.ApprovalState
		wantCode    apierr.Code
	}{
		{"alice", true, airlockv1.ApprovalState_APPROVAL_STATE_PENDING, ""},
		{"alice", false, airlockv1.ApprovalState_APPROVAL_STATE_PENDING, ""},
		{"carol", false, 0, apierr.NotAuthorized},
		{"bob", true, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, ""},
	}
	for _, st := range steps {
		resp, err := w.approve("j1", st.who)
		if st.wantCode != "" {
			mustCode(t, err, st.wantCode)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.who, err)
		}
		if resp.Changed != st.wantChanged || resp.Record.GetState() != st.wantState {
			t.Fatalf("%s approving: changed=%v state=%v (%q), want changed=%v state=%v", st.who, resp.Changed, resp.Record.GetState(), resp.Message, st.wantChanged, st.wantState)
		}
	}
	evs := w.events("bot", "j1", "approved")
	if len(evs) != 1 || len(evs[0].GetApproved().GetVotes()) != 2 {
		t.Fatalf("approved events %v", evs)
	}
}

func TestRequesterCannotApproveTheirOwnCall(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "own", OnBehalfOf: "alice"}, nil)
	_, err := w.approve("own", "alice")
	mustCode(t, err, apierr.NotAuthorized)
	if !strings.Contains(err.Error(), "on their behalf") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	ev := testenv.WaitForEvent(t, w.js, "airlock.evt.bot.own.>", "unauthorized_attempt", 10*time.Second)
	if ev.GetActor().GetId() != "alice" {
		t.Fatalf("unauthorized_attempt actor %v", ev.GetActor())
	}
}

// L: the service restarts while calls are pending; decisions and expiry
// still work because everything is in the records.
func TestRestartWhilePendingKeepsDecisionsAndDeadlines(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "l1"}, nil)
	// Recorded, not waited for as pending: a loaded machine's first read
	// can come after its 3 s deadline.
	w.recorded(&airlockv1.ToolCall{CallId: "l2"}, &airlockv1.Decision{Timeout: seconds(3)})
	w.stopAll()

	w.start()
	if _, err := w.approve("l1", "alice"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForEvent(t, w.js, "airlock.evt.bot.l1.>", "approved", 10*time.Second)
	testenv.WaitForEvent(t, w.js, "airlock.evt.bot.l2.>", "expired", 10*time.Second)
	if n := len(w.events("bot", "l2", "expired")); n != 1 {
		t.Fatalf("%d expired events, want 1", n)
	}
}

func await(t *testing.T, w *world, agent, callID string) airlock.Outcome {
	t.Helper()
	nc, _ := testenv.Connect(t, w.nats.URL())
	c, err := airlock.New(nc, agent)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.Await(ctx, callID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A revision that policy allows without a person cancels the earlier
// revision still waiting for one: otherwise a reviewer could later approve
// the old revision and both would run.
func TestLaterRevisionAllowedByPolicyCancelsThePendingOne(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "s1"}, nil)
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/ok"})
	call := &airlockv1.ToolCall{CallId: "s1", AgentId: "bot", Revision: 2, Server: "fs", Tool: "read_file", Arguments: args}
	ev := &airlockv1.Event{
		EventId: "bot.s1.2.decision", AgentId: "bot", CallId: "s1", Revision: 2,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
		Body:  &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call, Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW}}},
	}
	if _, err := w.policy.Publish(context.Background(), ev, ""); err != nil {
		t.Fatal(err)
	}
	w.waitState("s1", 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
	if resp, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "s1", Revision: 1, Kind: approve,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}}); err == nil && resp.GetChanged() {
		t.Fatal("the superseded revision was approved")
	}
	if evs := w.events("bot", "s1", "approved"); len(evs) != 0 {
		t.Fatalf("approved events %v", evs)
	}
}

// TestAnEditIsRedecidedByThePolicy: edited arguments are a new call as far
// as the policy goes. A deny refuses the edit (recorded), a stricter ask
// applies to the edited call, an allow leaves the reviewer's approval as
// it is, and without an answer from the policy nothing is approved.
func TestAnEditIsRedecidedByThePolicy(t *testing.T) {
	w := newWorld(t)
	w.start()
	secret, _ := structpb.NewStruct(map[string]any{"path": "secret/keys.txt", "text": "x"})
	ask := func(d *airlockv1.Decision) func(*airlockv1.ToolCall) *airlockv1.Decision {
		return func(*airlockv1.ToolCall) *airlockv1.Decision { d.Action = airlockv1.Action_ACTION_ASK; return d }
	}
	tests := []struct {
		name      string
		policy    func(*airlockv1.ToolCall) *airlockv1.Decision
		editor    string
		wantCode  apierr.Code
		wantState airlockv1.ApprovalState
		wantVotes string // "1/2": votes of quorum
		wantRisk  airlockv1.Risk
		wantWhy   string
	}{
		{"a_deny_rule_refuses_the_edit_and_the_call_stays_pending",
			func(*airlockv1.ToolCall) *airlockv1.Decision {
				return &airlockv1.Decision{Action: airlockv1.Action_ACTION_DENY, RuleId: "no-secrets", Reason: "secret/ is off limits"}
			}, "carol", apierr.NotAuthorized, airlockv1.ApprovalState_APPROVAL_STATE_PENDING, "0/1", airlockv1.Risk_RISK_UNSPECIFIED, "the policy denies the call with the edited arguments (rule no-secrets: secret/ is off limits)"},
		{"a_stricter_ask_raises_risk_and_quorum_of_the_edited_call",
			ask(&airlockv1.Decision{RuleId: "secrets", Risk: airlockv1.Risk_RISK_CRITICAL, Quorum: 2, Approvers: []string{"group:reviewers"}, Reason: "secrets need two"}),
			"carol", "", airlockv1.ApprovalState_APPROVAL_STATE_PENDING, "1/2", airlockv1.Risk_RISK_CRITICAL, ""},
		{"other_approvers_for_the_edited_call_refuse_an_editor_outside_them",
			ask(&airlockv1.Decision{RuleId: "secrets", Approvers: []string{"group:oncall"}, Reason: "on-call decides secrets"}),
			"carol", apierr.NotAuthorized, airlockv1.ApprovalState_APPROVAL_STATE_PENDING, "0/1", airlockv1.Risk_RISK_UNSPECIFIED, "carol is not among the approvers"},
		{"an_allow_keeps_the_reviewers_approval",
			func(*airlockv1.ToolCall) *airlockv1.Decision {
				return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, RuleId: "tmp"}
			},
			"carol", "", airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, "1/1", airlockv1.Risk_RISK_UNSPECIFIED, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("re%d", i)
			w.pending(&airlockv1.ToolCall{CallId: id}, nil)
			w.answerEval(tt.policy)
			resp, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Kind: approve, EditedArguments: secret,
				Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: tt.editor}})
			if tt.wantCode != "" {
				mustCode(t, err, tt.wantCode)
				if !strings.Contains(err.Error(), tt.wantWhy) {
					t.Errorf("refusal %q does not say %q", err, tt.wantWhy)
				}
				testenv.Eventually(t, 10*time.Second, "the refused edit to be recorded", func() bool {
					return len(w.events("bot", id, subject.UnauthorizedAttempt)) == 1
				})
			} else if err != nil {
				t.Fatal(err)
			}
			rec, err := w.api.Get(context.Background(), "bot", id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%d/%d", len(rec.GetVotes()), max(rec.GetDecision().GetQuorum(), 1)); rec.GetState() != tt.wantState || got != tt.wantVotes {
				t.Errorf("record %s with %s votes, want %s with %s (answer %v)", rec.GetState(), got, tt.wantState, tt.wantVotes, resp)
			}
			if tt.wantCode != "" && rec.GetEditedArguments() != nil {
				t.Errorf("a refused edit was stored: %v", rec.GetEditedArguments())
			}
			if tt.wantRisk != airlockv1.Risk_RISK_UNSPECIFIED && rec.GetDecision().GetRisk() != tt.wantRisk {
				t.Errorf("risk %s, want %s", rec.GetDecision().GetRisk(), tt.wantRisk)
			}
		})
	}
	t.Run("without_an_answer_from_the_policy_nothing_is_approved", func(t *testing.T) {
		w.pending(&airlockv1.ToolCall{CallId: "re-down"}, nil)
		w.stopEval()
		_, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: "re-down", Kind: approve, EditedArguments: secret,
			Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "carol"}})
		mustCode(t, err, apierr.Unavailable)
		if rec, _ := w.api.Get(context.Background(), "bot", "re-down", 0); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(rec.GetVotes()) != 0 {
			t.Errorf("the call changed without the policy's answer: %v", rec)
		}
	})
}

// An agent chooses its revision numbers: a later revision numbered
// 4294967295 supersedes the pending one at once and holds nothing up (the
// service looked up every revision below it, minutes under the index lock).
func TestARevisionNumberTheAgentChoseCostsNothingToSupersede(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.pending(&airlockv1.ToolCall{CallId: "big"}, nil)
	const last = math.MaxUint32
	call := &airlockv1.ToolCall{CallId: "big", AgentId: "bot", Revision: last, Server: "demo", Tool: "echo", Arguments: &structpb.Struct{}}
	ev := &airlockv1.Event{
		EventId: fmt.Sprintf("bot.big.%d.decision", uint32(last)), AgentId: "bot", CallId: "big", Revision: last,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
		Body:  &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call, Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW}}},
	}
	if _, err := w.policy.Publish(context.Background(), ev, ""); err != nil {
		t.Fatal(err)
	}
	w.waitState("big", 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
	w.pending(&airlockv1.ToolCall{CallId: "next"}, nil) // the service goes on
}
