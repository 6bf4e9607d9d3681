package domain

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

var (
	t0  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir = NewDirectory(map[string][]string{"reviewers": {"alice", "bob"}, "oncall": {"dave"}}, map[string][]string{"group:reviewers": {"erin"}})
	set = Settings{DefaultTimeout: 5 * time.Minute, DefaultApprovers: []string{"group:reviewers"}}
	// allow is the policy's answer about edited arguments it lets run.
	allow = &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, RuleId: "tmp"}
)

func human(id string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: id, Channel: "console"}
}

func requested(d *airlockv1.Decision, deadline *timestamppb.Timestamp) *airlockv1.Event {
	args, _ := structpb.NewStruct(map[string]any{"path": "/etc/hosts"})
	return &airlockv1.Event{EventId: "x", Time: timestamppb.New(t0), Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{
		Call:     &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", OnBehalfOf: "zoe", Server: "fs", Tool: "write_file", Arguments: args},
		Decision: d, Deadline: deadline,
	}}}
}

func pending(t *testing.T, d *airlockv1.Decision) *airlockv1.ApprovalRecord {
	t.Helper()
	rec, err := NewRecord(requested(d, nil), set, t0)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestNewRecordDeadline(t *testing.T) {
	cases := []struct {
		name     string
		d        *airlockv1.Decision
		deadline *timestamppb.Timestamp
		want     time.Time
	}{
		{"uses_the_default_timeout_when_policy_names_none", &airlockv1.Decision{}, nil, t0.Add(5 * time.Minute)},
		{"uses_the_decision_timeout", &airlockv1.Decision{Timeout: durationpb.New(time.Minute)}, nil, t0.Add(time.Minute)},
		{"uses_the_event_deadline_above_all", &airlockv1.Decision{Timeout: durationpb.New(time.Minute)}, timestamppb.New(t0.Add(time.Hour)), t0.Add(time.Hour)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := NewRecord(requested(c.d, c.deadline), set, t0.Add(time.Hour)) // the clock is late: redelivery
			if err != nil {
				t.Fatal(err)
			}
			if got := Deadline(rec); !got.Equal(c.want) {
				t.Fatalf("deadline %v, want %v", got, c.want)
			}
			if rec.GetState() != Pending || Revision(rec) != 1 || RefOf(rec).Key() != "bot.c1.1" {
				t.Fatalf("record %v", rec)
			}
		})
	}
}

func TestNewRecordRefusesAnEventWithoutACall(t *testing.T) {
	_, err := NewRecord(&airlockv1.Event{Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{}}}, set, t0)
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("err = %v, want *Invalid", err)
	}
}

func TestAuthorize(t *testing.T) {
	// carol's groups are vouched for by a front-end (the console's single sign-on).
	carol := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "carol", Channel: "console", Groups: []string{"oncall"}}
	cases := []struct {
		name      string
		approvers []string
		who       string
		refused   string // part of the reason, "" = allowed
		vouched   *airlockv1.Actor
	}{
		{"allows_a_named_principal", []string{"carol"}, "carol", "", nil},
		{"allows_a_member_of_a_configured_group", []string{"group:oncall"}, "dave", "", nil},
		{"allows_a_console_user_through_their_groups", []string{"group:reviewers"}, "erin", "", nil},
		{"refuses_someone_outside_the_approvers", []string{"group:oncall"}, "alice", "not among the approvers", nil},
		{"refuses_the_principal_the_call_acts_for_even_if_an_approver", []string{"zoe"}, "zoe", "on their behalf", nil},
		{"refuses_an_empty_principal", []string{"group:reviewers"}, "", "no principal", nil},
		{"does_not_treat_a_group_name_as_a_principal", []string{"group:oncall"}, "oncall", "not among the approvers", nil},
		{"allows_the_person_through_a_group_a_front_end_vouched_for", []string{"group:oncall"}, "carol", "", carol},
		{"keeps_the_configured_groups_beside_vouched_ones", []string{"group:reviewers"}, "alice", "", carol},
		{"gives_nobody_else_the_vouched_group", []string{"group:oncall"}, "bob", "not among the approvers", carol},
		{"gives_the_person_no_group_that_was_not_vouched", []string{"group:reviewers"}, "carol", "not among the approvers", carol},
		{"gives_the_person_nothing_in_a_request_that_vouches_nothing", []string{"group:oncall"}, "carol", "not among the approvers", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := pending(t, &airlockv1.Decision{Approvers: c.approvers})
			r := Authorize(rec, dir.Vouched(c.vouched), c.who, "approve")
			switch {
			case c.refused == "" && r != nil:
				t.Fatalf("refused: %s", r.Why)
			case c.refused != "" && (r == nil || !strings.Contains(r.Why, c.refused)):
				t.Fatalf("refusal %v, want one saying %q", r, c.refused)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	edited, _ := structpb.NewStruct(map[string]any{"path": "/tmp/hosts"})
	editedDigest, _ := canon.Digest(edited)
	deny := &airlockv1.Decision{Action: airlockv1.Action_ACTION_DENY, RuleId: "no-hosts", Reason: "hosts files are off limits"}
	stricter := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "hosts", Quorum: 2, Risk: airlockv1.Risk_RISK_CRITICAL}
	otherGroup := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "hosts", Approvers: []string{"bob"}}
	cases := []struct {
		name      string
		d         *airlockv1.Decision
		decisions []Decision
		at        time.Time
		wantState airlockv1.ApprovalState
		wantEvent string // of the last decision
		applied   bool   // of the last decision
		errKind   string // "refusal" or "invalid" for the last decision
	}{
		{"approves_with_quorum_one", nil, []Decision{{Kind: Approve, By: human("alice")}}, t0, Approved, "approved", true, ""},
		{"rejects", nil, []Decision{{Kind: Reject, By: human("bob"), Reason: "no"}}, t0, Rejected, "rejected", true, ""},
		{"requests_changes_with_feedback", nil, []Decision{{Kind: RequestChanges, By: human("bob"), Reason: "use /tmp"}}, t0, ChangesRequested, "changes_requested", true, ""},
		{"refuses_change_requests_without_feedback", nil, []Decision{{Kind: RequestChanges, By: human("bob")}}, t0, Pending, "", false, "invalid"},
		{"refuses_edits_on_a_rejection", nil, []Decision{{Kind: Reject, By: human("bob"), Edited: edited, Redecided: allow}}, t0, Pending, "", false, "invalid"},
		{"keeps_quorum_two_pending_after_one_vote", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice")}}, t0, Pending, "", true, ""},
		{"does_not_count_the_same_person_twice", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice")}, {Kind: Approve, By: human("alice")}}, t0, Pending, "", false, ""},
		{"approves_when_a_second_person_votes", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice")}, {Kind: Approve, By: human("bob")}}, t0, Approved, "approved", true, ""},
		{"lets_one_person_reject_a_quorum_call", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice")}, {Kind: Reject, By: human("bob")}}, t0, Rejected, "rejected", true, ""},
		{"never_changes_a_decided_call", nil, []Decision{{Kind: Reject, By: human("bob")}, {Kind: Approve, By: human("alice")}}, t0, Rejected, "", false, ""},
		{"expires_instead_of_deciding_after_the_deadline", nil, []Decision{{Kind: Approve, By: human("alice")}}, t0.Add(5 * time.Minute), Expired, "expired", false, ""},
		{"refuses_an_outsider_and_changes_nothing", nil, []Decision{{Kind: Approve, By: human("mallory")}}, t0, Pending, "", false, "refusal"},
		{"refuses_an_outsider_even_after_the_decision", nil, []Decision{{Kind: Approve, By: human("alice")}, {Kind: Reject, By: human("mallory")}}, t0, Approved, "", false, "refusal"},
		{"approves_edited_arguments", nil, []Decision{{Kind: Approve, By: human("alice"), Edited: edited, Redecided: allow}}, t0, Approved, "approved", true, ""},
		{"resets_votes_for_other_arguments_when_edited", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice")}, {Kind: Approve, By: human("bob"), Edited: edited, Redecided: allow}}, t0, Pending, "", true, ""},
		{"does_not_count_a_vote_for_edited_arguments_its_voter_has_not_seen", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice"), Edited: edited, Redecided: allow}, {Kind: Approve, By: human("bob"), SawDigest: "digest-of-the-original"}}, t0, Pending, "", false, ""},
		{"refuses_an_edit_the_policy_denies", nil, []Decision{{Kind: Approve, By: human("alice"), Edited: edited, Redecided: deny}}, t0, Pending, "", false, "refusal"},
		{"refuses_an_edit_the_policy_did_not_decide", nil, []Decision{{Kind: Approve, By: human("alice"), Edited: edited}}, t0, Pending, "", false, "invalid"},
		{"applies_a_stricter_quorum_to_the_edited_call", nil, []Decision{{Kind: Approve, By: human("alice"), Edited: edited, Redecided: stricter}}, t0, Pending, "", true, ""},
		{"refuses_an_editor_the_edited_calls_rule_does_not_name", nil, []Decision{{Kind: Approve, By: human("alice"), Edited: edited, Redecided: otherGroup}}, t0, Pending, "", false, "refusal"},
		{"lets_an_editor_the_edited_calls_rule_names_approve", nil, []Decision{{Kind: Approve, By: human("bob"), Edited: edited, Redecided: otherGroup}}, t0, Approved, "approved", true, ""},
		{"does_not_count_a_vote_for_arguments_other_than_these", nil, []Decision{{Kind: Approve, By: human("alice"), SawDigest: "digest-of-other-arguments"}}, t0, Pending, "", false, ""},
		{"counts_a_vote_for_edited_arguments_its_voter_has_seen", &airlockv1.Decision{Quorum: 2}, []Decision{{Kind: Approve, By: human("alice"), Edited: edited, Redecided: allow}, {Kind: Approve, By: human("bob"), SawDigest: editedDigest}}, t0, Approved, "approved", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := pending(t, c.d)
			var out Outcome
			var err error
			for i, d := range c.decisions {
				out, err = Decide(rec, d, dir, c.at)
				if i < len(c.decisions)-1 && err != nil {
					t.Fatalf("decision %d: %v", i, err)
				}
				if out.Record != nil {
					rec = out.Record
				}
			}
			var ref *Refusal
			var inv *Invalid
			switch c.errKind {
			case "refusal":
				if !errors.As(err, &ref) {
					t.Fatalf("err = %v, want a refusal", err)
				}
			case "invalid":
				if !errors.As(err, &inv) {
					t.Fatalf("err = %v, want invalid", err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
			}
			if rec.GetState() != c.wantState || out.Event != c.wantEvent || out.Applied != c.applied {
				t.Fatalf("state %v event %q applied %v (%q); want %v %q %v", rec.GetState(), out.Event, out.Applied, out.Message, c.wantState, c.wantEvent, c.applied)
			}
		})
	}
}

// A gate-only call runs with the arguments the agent asked for: an
// approval cannot edit them (it would approve something that never runs).
func TestAGateOnlyCallsArgumentsCannotBeEdited(t *testing.T) {
	edited, _ := structpb.NewStruct(map[string]any{"command": "git status"})
	rec := pending(t, nil)
	rec.Call.AgentRuns = true
	_, err := Decide(rec, Decision{Kind: Approve, By: human("alice"), Edited: edited}, dir, t0)
	var inv *Invalid
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "gate-only") {
		t.Fatalf("edited approval of a gate-only call: %v, want it refused as invalid", err)
	}
	out, err := Decide(rec, Decision{Kind: Approve, By: human("alice")}, dir, t0)
	if err != nil || out.Event != "approved" {
		t.Fatalf("plain approval of a gate-only call: %v %q", err, out.Event)
	}
}

func TestDecideDoesNotModifyItsInput(t *testing.T) {
	rec := pending(t, nil)
	before := proto.Clone(rec)
	if _, err := Decide(rec, Decision{Kind: Approve, By: human("alice")}, dir, t0); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(rec, before) {
		t.Fatal("Decide changed the record it was given: a CAS retry would see a corrupted record")
	}
}

func TestApprovedEventBindsTheArgumentsThatRun(t *testing.T) {
	edited, _ := structpb.NewStruct(map[string]any{"path": "/tmp/hosts"})
	rec := pending(t, &airlockv1.Decision{PolicyRevision: "p7"})
	out, err := Decide(rec, Decision{Kind: Approve, By: human("alice"), Edited: edited, Redecided: allow}, dir, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := FinalEvent(out.Record)
	if err != nil {
		t.Fatal(err)
	}
	a := ev.GetApproved()
	want, _ := canon.Digest(edited)
	orig, _ := canon.Digest(rec.GetCall().GetArguments())
	if ev.GetEventId() != "bot.c1.1.approved" || a.GetArgumentsDigest() != want || a.GetOriginalArgumentsDigest() != orig ||
		!proto.Equal(a.GetCall().GetArguments(), edited) || a.GetPolicyRevision() != "p7" || ev.GetActor().GetId() != "alice" {
		t.Fatalf("approved event %v", ev)
	}
	again, _ := FinalEvent(out.Record)
	if !proto.Equal(ev, again) {
		t.Fatal("the decision event is not a function of the record: republishing it would not deduplicate")
	}
}

func TestCancel(t *testing.T) {
	agent := func(id string) *airlockv1.Actor {
		return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: id}
	}
	operator := func(id string) *airlockv1.Actor {
		a := human(id)
		a.Operator = true
		return a
	}
	cases := []struct {
		name    string
		by      *airlockv1.Actor
		refused bool
		// verified: airlock verified whom the call acts for (zoe).
		verified bool
	}{
		{"lets_the_agent_cancel_its_own_call", agent("bot"), false, false},
		{"refuses_another_agent", agent("other"), true, false},
		{"lets_an_approver_cancel", human("alice"), false, false},
		{"lets_the_person_the_call_acts_for_withdraw_it", human("zoe"), false, true},
		{"refuses_a_person_the_agent_merely_named", human("zoe"), true, false},
		{"refuses_anyone_else", human("mallory"), true, true},
		{"lets_an_operator_cancel_any_call", operator("olga"), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := pending(t, nil)
			rec.GetCall().OnBehalfOfVerified = c.verified
			out, err := Cancel(rec, c.by, "", dir, t0)
			var r *Refusal
			if c.refused != errors.As(err, &r) {
				t.Fatalf("err = %v", err)
			}
			if !c.refused && (out.Record.GetState() != Canceled || out.Event != "canceled") {
				t.Fatalf("outcome %v", out)
			}
		})
	}
}

func TestTimers(t *testing.T) {
	d := &airlockv1.Decision{RemindAfter: durationpb.New(time.Minute), EscalateAfter: durationpb.New(2 * time.Minute), EscalateTo: []string{"group:oncall"}}
	rec := pending(t, d)
	if _, _, ok := DueTimer(rec, t0.Add(30*time.Second)); ok {
		t.Fatal("a timer fired early")
	}
	next, tm, ok := DueTimer(rec, t0.Add(61*time.Second))
	if !ok || tm != Remind || !next.GetReminded() {
		t.Fatalf("reminder: %v %v", tm, ok)
	}
	if _, _, ok := DueTimer(next, t0.Add(90*time.Second)); ok {
		t.Fatal("the reminder fired twice")
	}
	if Authorize(next, dir, "dave", "approve") == nil {
		t.Fatal("dave may approve before escalation")
	}
	esc, tm, ok := DueTimer(next, t0.Add(121*time.Second))
	if !ok || tm != Escalate || !esc.GetEscalated() {
		t.Fatalf("escalation: %v %v", tm, ok)
	}
	if r := Authorize(esc, dir, "dave", "approve"); r != nil {
		t.Fatalf("escalation did not widen the approvers: %s", r.Why)
	}
	if _, _, ok := DueTimer(esc, t0.Add(4*time.Minute)); ok {
		t.Fatal("a timer fired after everything was done")
	}
	if _, _, ok := DueTimer(rec, t0.Add(6*time.Minute)); ok {
		t.Fatal("a timer fired past the deadline")
	}
	if out := Expire(rec, t0.Add(5*time.Minute)); out.Record.GetState() != Expired || out.Event != "expired" {
		t.Fatalf("expire at the deadline: %v", out)
	}
	if out := Expire(rec, t0.Add(4*time.Minute)); out.Record != nil {
		t.Fatal("expired before the deadline")
	}
}

// NextDue is the first moment the sweeper has work for a pending record:
// just before it neither Expire nor DueTimer changes the record, at it one
// of them does — whichever of the deadline, the reminder and the
// escalation comes first, leaving out timers already done.
func TestNextDueIsTheFirstMomentTheSweeperHasWork(t *testing.T) {
	remind, escalate := durationpb.New(time.Minute), durationpb.New(2*time.Minute)
	oncall := []string{"group:oncall"}
	tests := []struct {
		name string
		d    *airlockv1.Decision
		mark func(*airlockv1.ApprovalRecord)
		want time.Duration // after t0
	}{
		{"a_record_without_timers_is_due_at_its_deadline", nil, nil, 5 * time.Minute},
		{"a_reminder_comes_first", &airlockv1.Decision{RemindAfter: remind, EscalateAfter: escalate, EscalateTo: oncall}, nil, time.Minute},
		{"an_escalation_before_the_reminder_comes_first", &airlockv1.Decision{RemindAfter: escalate, EscalateAfter: remind, EscalateTo: oncall}, nil, time.Minute},
		{"a_reminder_done_leaves_the_escalation", &airlockv1.Decision{RemindAfter: remind, EscalateAfter: escalate, EscalateTo: oncall}, func(r *airlockv1.ApprovalRecord) { r.Reminded = true }, 2 * time.Minute},
		{"both_done_leave_the_deadline", &airlockv1.Decision{RemindAfter: remind, EscalateAfter: escalate, EscalateTo: oncall}, func(r *airlockv1.ApprovalRecord) { r.Reminded, r.Escalated = true, true }, 5 * time.Minute},
		{"an_escalation_to_nobody_never_fires", &airlockv1.Decision{EscalateAfter: remind}, nil, 5 * time.Minute},
		{"a_timer_after_the_deadline_never_fires", &airlockv1.Decision{RemindAfter: durationpb.New(time.Hour)}, nil, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := pending(t, tt.d)
			if tt.mark != nil {
				tt.mark(rec)
			}
			at := NextDue(rec)
			if want := t0.Add(tt.want); !at.Equal(want) {
				t.Fatalf("due %v after t0, want %v", at.Sub(t0), tt.want)
			}
			work := func(now time.Time) bool {
				_, _, timer := DueTimer(rec, now)
				return timer || Expire(rec, now).Record != nil
			}
			if work(at.Add(-time.Nanosecond)) {
				t.Fatal("the sweeper has work before the record is due")
			}
			if !work(at) {
				t.Fatal("the sweeper has no work when the record is due")
			}
		})
	}
}

func TestExecutionProgress(t *testing.T) {
	rec := pending(t, nil)
	if Started(rec, t0) != nil || Finished(rec, true, t0) != nil {
		t.Fatal("a pending call moved on an executor event")
	}
	out, _ := Decide(rec, Decision{Kind: Approve, By: human("alice")}, dir, t0)
	run := Started(out.Record, t0)
	if run.GetState() != Executing || Started(run, t0) != nil {
		t.Fatalf("started: %v", run)
	}
	if done := Finished(run, false, t0); done.GetState() != Failed || Finished(done, true, t0) != nil {
		t.Fatalf("finished: %v", done)
	}
}

func TestGrants(t *testing.T) {
	rec := pending(t, nil)
	_, err := NewGrant(rec, &airlockv1.StandingGrant{}, human("mallory"), dir, "g1", t0)
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("an outsider created a grant: %v", err)
	}
	if _, err := NewGrant(rec, &airlockv1.StandingGrant{ArgumentGlobs: map[string]string{"path": "/tmp/*"}}, human("alice"), dir, "g1", t0); err == nil {
		t.Fatal("accepted an argument constraint that is not a JSON pointer")
	}
	g, err := NewGrant(rec, &airlockv1.StandingGrant{UsesLeft: 2, ArgumentGlobs: map[string]string{"/path": "/tmp/*"}}, human("alice"), dir, "g1", t0)
	if err != nil {
		t.Fatal(err)
	}
	if g.GetAgentId() != "bot" || g.GetServer() != "fs" || g.GetTool() != "write_file" || !g.GetLimitedUses() || g.GetUsesLeft() != 2 || !GrantActive(g, t0) {
		t.Fatalf("grant %v", g)
	}
	if g.GetRuleId() != rec.GetDecision().GetRuleId() {
		t.Fatalf("grant rule %q, want the asking rule %q", g.GetRuleId(), rec.GetDecision().GetRuleId())
	}
	quorum2 := pending(t, &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Approvers: []string{"alice", "bob"}, Quorum: 2})
	if _, err := NewGrant(quorum2, &airlockv1.StandingGrant{}, human("alice"), dir, "g2", t0); err == nil {
		t.Fatal("one approver turned a call needing two approvals into a standing grant")
	}
	if _, _, err := Revoke(g, rec, human("mallory"), dir); !errors.As(err, &r) {
		t.Fatalf("an outsider revoked a grant: %v", err)
	}
	rv, changed, err := Revoke(g, rec, human("bob"), dir)
	if err != nil || !changed || !rv.GetRevoked() || rv.GetRevokedBy().GetId() != "bob" || GrantActive(rv, t0) {
		t.Fatalf("revoke: %v %v %v", rv, changed, err)
	}
	if _, changed, _ := Revoke(rv, rec, human("alice"), dir); changed {
		t.Fatal("revoking twice changed the grant")
	}
	used := proto.Clone(g).(*airlockv1.StandingGrant)
	used.UsesLeft = 0
	if GrantActive(used, t0) {
		t.Fatal("a used-up grant is active")
	}
}

// A grant records the risk of the call it is made from as the highest it
// answers; a request may lower that, never raise it.
func TestAGrantAnswersNoCallRiskierThanTheOneItIsMadeFrom(t *testing.T) {
	rec := pending(t, &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Approvers: []string{"alice", "bob"}, Quorum: 1, Risk: airlockv1.Risk_RISK_MEDIUM})
	for _, tt := range []struct {
		name string
		want airlockv1.Risk
		got  airlockv1.Risk // RISK_UNSPECIFIED: refused
	}{
		{"an_unspecified_cap_is_the_calls_risk", airlockv1.Risk_RISK_UNSPECIFIED, airlockv1.Risk_RISK_MEDIUM},
		{"a_lower_cap_is_kept", airlockv1.Risk_RISK_LOW, airlockv1.Risk_RISK_LOW},
		{"the_calls_own_risk_is_kept", airlockv1.Risk_RISK_MEDIUM, airlockv1.Risk_RISK_MEDIUM},
		{"a_higher_cap_is_refused", airlockv1.Risk_RISK_CRITICAL, airlockv1.Risk_RISK_UNSPECIFIED},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGrant(rec, &airlockv1.StandingGrant{MaxRisk: tt.want}, human("alice"), dir, "g1", t0)
			if tt.got == airlockv1.Risk_RISK_UNSPECIFIED {
				if err == nil || !strings.Contains(err.Error(), "riskier than the one reviewed") {
					t.Fatalf("a grant asking for %v from a medium call: %v, %v", tt.want, g, err)
				}
				return
			}
			if err != nil || g.GetMaxRisk() != tt.got {
				t.Fatalf("max risk %v (%v), want %v", g.GetMaxRisk(), err, tt.got)
			}
		})
	}
}

// A grant's numeric range is kept only when its ends are finite, exact and
// in order and it holds the number of the call it is made from.
func TestAGrantsRangeMustBeWellFormedAndHoldTheCallsOwnNumber(t *testing.T) {
	rec := pending(t, nil)
	rec.Call.Arguments.Fields["size"] = structpb.NewNumberValue(5)
	rec.Call.Arguments.Fields["label"] = structpb.NewStringValue("5")
	ranged := func(ptr string, lo, hi float64) *airlockv1.StandingGrant {
		return &airlockv1.StandingGrant{OnlyListedArguments: true, AnyArguments: []string{"/path"},
			ArgumentRanges: map[string]*airlockv1.NumberRange{ptr: {Min: lo, Max: hi}}}
	}
	tests := []struct {
		name  string
		want  *airlockv1.StandingGrant
		error string // substring of the refusal; "" when the grant is made
	}{
		{"a_range_around_the_calls_number_is_kept", ranged("/size", 1, 10), ""},
		{"a_range_that_is_a_single_number_is_kept", ranged("/size", 5, 5), ""},
		{"a_range_missing_the_calls_number_is_refused", ranged("/size", 6, 10), "does not hold the call's own value 5"},
		{"a_range_on_a_string_that_reads_as_a_number_is_refused", ranged("/label", 1, 10), `does not hold the call's own value "5"`},
		{"a_range_on_a_missing_argument_is_refused", ranged("/count", 1, 10), "does not hold the call's own value null"},
		{"a_range_in_the_wrong_order_is_refused", ranged("/size", 10, 1), "give them in order"},
		{"a_range_with_an_infinite_end_is_refused", ranged("/size", 1, math.Inf(1)), "finite"},
		{"a_range_with_a_nan_end_is_refused", ranged("/size", math.NaN(), 10), "finite"},
		{"a_range_past_exact_integers_is_refused", ranged("/size", 1, 1<<60), "every integer is still exact"},
		{"a_range_not_on_a_json_pointer_is_refused", ranged("size", 1, 10), "not on a JSON pointer"},
		{"a_range_on_a_pinned_argument_is_refused", &airlockv1.StandingGrant{ArgumentValues: map[string]*structpb.Value{"/size": structpb.NewNumberValue(5)},
			ArgumentRanges: map[string]*airlockv1.NumberRange{"/size": {Min: 1, Max: 10}}}, "keep one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGrant(rec, tt.want, human("alice"), dir, "g1", t0)
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("NewGrant = %v, %v; want a refusal saying %q", g, err, tt.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(g.GetArgumentRanges()["/size"], tt.want.GetArgumentRanges()["/size"]) {
				t.Fatalf("grant ranges %v; want %v", g.GetArgumentRanges(), tt.want.GetArgumentRanges())
			}
		})
	}
}

func TestSelfConfirmation(t *testing.T) {
	dir := NewDirectory(map[string][]string{"reviewers": {"alice", "bob"}})
	rec := func(approvers []string, onBehalfOf string, verified bool) *airlockv1.ApprovalRecord {
		return &airlockv1.ApprovalRecord{
			Call:     &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", OnBehalfOf: onBehalfOf, OnBehalfOfVerified: verified},
			Decision: &airlockv1.Decision{Approvers: approvers},
		}
	}
	for _, tc := range []struct {
		name      string
		rec       *airlockv1.ApprovalRecord
		principal string
		ok        bool
	}{
		{"the_verified_requester_confirms_a_rule_that_names_the_requester", rec([]string{Requester}, "dana", true), "dana", true},
		{"nobody_else_confirms_it", rec([]string{Requester}, "dana", true), "alice", false},
		{"an_unverified_requester_does_not_confirm", rec([]string{Requester}, "dana", false), "dana", false},
		{"an_ordinary_rule_still_refuses_the_requester", rec([]string{"group:reviewers"}, "alice", true), "alice", false},
		{"an_ordinary_rule_lets_a_reviewer_decide", rec([]string{"group:reviewers"}, "alice", true), "bob", true},
		{"requester_or_reviewers_lets_either_decide", rec([]string{Requester, "group:reviewers"}, "dana", true), "bob", true},
		{"requester_or_reviewers_lets_the_requester_decide", rec([]string{Requester, "group:reviewers"}, "dana", true), "dana", true},
		{"an_agent_naming_itself_requester_gains_nothing", rec([]string{Requester}, "", false), "", false},
		{"a_principal_named_requester_is_nobody", rec([]string{Requester}, "dana", true), "requester", false},
		{"a_principal_named_requester_is_nobody_beside_a_group", rec([]string{Requester, "group:reviewers"}, "dana", true), "requester", false},
		{"a_principal_named_requester_is_nobody_even_as_the_verified_requester", rec([]string{Requester}, Requester, true), Requester, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := Authorize(tc.rec, dir, tc.principal, "approve"); (r == nil) != tc.ok {
				t.Fatalf("Authorize(%q) = %v, want ok=%v", tc.principal, r, tc.ok)
			}
		})
	}
}

func TestTheRequesterRemembersTheirOwnDecision(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"command": "git commit -m 'fix'"})
	digest, _ := canon.Digest(args)
	rec := &airlockv1.ApprovalRecord{
		Call:            &airlockv1.ToolCall{CallId: "c1", AgentId: "laptop", Server: "claude", Tool: "Bash", Arguments: args, OnBehalfOf: "dana", OnBehalfOfVerified: true},
		Decision:        &airlockv1.Decision{Approvers: []string{Requester}, RuleId: "coding-shell-ask"},
		State:           Pending,
		ArgumentsDigest: digest,
	}
	for _, tt := range []struct {
		name string
		by   string
		want *airlockv1.StandingGrant
		ok   bool
	}{
		{"a_prefix_of_the_reviewed_command", "dana", &airlockv1.StandingGrant{CommandPrefixes: map[string]string{"/command": "git commit"}, UsesLeft: 5}, true},
		{"the_exact_arguments_reviewed", "dana", &airlockv1.StandingGrant{ArgumentsDigest: digest}, true},
		{"a_prefix_that_does_not_start_the_command", "dana", &airlockv1.StandingGrant{CommandPrefixes: map[string]string{"/command": "rm"}}, false},
		{"a_prefix_on_a_missing_argument", "dana", &airlockv1.StandingGrant{CommandPrefixes: map[string]string{"/cmd": "git"}}, false},
		{"arguments_other_than_the_reviewed_ones", "dana", &airlockv1.StandingGrant{ArgumentsDigest: strings.Repeat("0", 64)}, false},
		{"someone_who_may_not_decide_the_call", "bob", &airlockv1.StandingGrant{CommandPrefixes: map[string]string{"/command": "git commit"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGrant(rec, tt.want, human(tt.by), dir, "g1", t0)
			if (err == nil) != tt.ok {
				t.Fatalf("NewGrant: %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && (g.GetCreatedBy().GetId() != tt.by || g.GetRuleId() != "coding-shell-ask" ||
				len(g.GetCommandPrefixes()) != len(tt.want.GetCommandPrefixes()) || g.GetArgumentsDigest() != tt.want.GetArgumentsDigest()) {
				t.Fatalf("grant %v", g)
			}
		})
	}
}
