package replay_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// decidedAt is when the policy decided call i, as recorded.
func decidedAt(i int) time.Time { return time.Date(2025, 3, 1, 9, i, 0, 0, time.UTC) }

// The candidate here is a plain function: "ask for every write"; the real
// evaluator is exercised by `airlock policy replay`'s test.
func TestReplayCountsChangesGrantsAndRedactedArguments(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := bus.NewPublisher(deps.JS, "airlock/policy")
	decided := func(i int, tool string, action airlockv1.Action, grant string, redact ...string) {
		args, _ := structpb.NewStruct(map[string]any{"path": "/p", "token": "secret"})
		call := &airlockv1.ToolCall{CallId: fmt.Sprintf("c%d", i), AgentId: "bot", Server: "fs", Tool: tool, Arguments: args, Revision: 1}
		d := &airlockv1.Decision{Action: action, RuleId: "old", GrantId: grant, Redact: redact, DecidedAt: timestamppb.New(decidedAt(i))}
		ev := &airlockv1.Event{EventId: "bot." + call.CallId + ".1.decision", AgentId: "bot", CallId: call.CallId, Revision: 1}
		switch action {
		case airlockv1.Action_ACTION_ALLOW:
			ev.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call, Decision: d}}
		case airlockv1.Action_ACTION_ASK:
			ev.Body = &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: d}}
		default:
			ev.Body = &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Call: call, Decision: d}}
		}
		if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	decided(1, "write_file", airlockv1.Action_ACTION_ALLOW, "")           // flips allow → ask
	decided(2, "write_file", airlockv1.Action_ACTION_ALLOW, "", "/token") // flips, and was redacted
	decided(3, "write_file", airlockv1.Action_ACTION_ALLOW, "grant-1")    // a grant allowed it: re-decided, flips
	decided(4, "write_file", airlockv1.Action_ACTION_ASK, "")             // unchanged
	decided(5, "read_file", airlockv1.Action_ACTION_ALLOW, "")            // unchanged
	decided(6, "read_file", airlockv1.Action_ACTION_DENY, "")             // deny → allow

	var seenToken []string
	decide := func(_ context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
		seenToken = append(seenToken, call.GetArguments().GetFields()["token"].GetStringValue())
		if i, _ := strconv.Atoi(strings.TrimPrefix(call.CallId, "c")); !at.Equal(decidedAt(i)) {
			t.Errorf("%s decided as of %s, not as of its recorded decided_at %s", call.CallId, at, decidedAt(i))
		}
		if call.Tool == "write_file" {
			return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "new"}, nil
		}
		return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, RuleId: "old"}, nil
	}
	rep, err := replay.Run(context.Background(), store.NewStream(deps.JS, deps.Config.Stream.Name, nil), decide, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ok   bool
	}{
		{"six calls re-decided, the granted one too", rep.Replayed == 6 && rep.Granted == 1},
		{"four changed, two unchanged", rep.Changed == 4 && rep.Unchanged == 2},
		{"a rule-only change is counted apart", rep.RuleChanged == 1},
		{"the redacted call is flagged", rep.Redacted == 1},
		{"transitions most frequent first", len(rep.Transitions) == 2 && rep.Transitions[0].From == "allow" && rep.Transitions[0].To == "ask" && rep.Transitions[0].Count == 3},
		{"a change names the grant that allowed the call", rep.Transitions[0].Examples[2].BeforeGrant == "grant-1"},
		{"the candidate sees a redacted value masked, others as recorded", len(seenToken) == 6 && seenToken[0] == "secret" && seenToken[1] == "[REDACTED]"},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s: does not hold: %+v", c.name, rep)
		}
	}
}

// WithGrants answers an ask with the first grant in force that applies,
// never a deny or an allow, and spends nothing.
func TestWithGrantsAnswersOnlyAsksWithAGrantThatApplies(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	limited := &airlockv1.StandingGrant{Id: "g-once", Tool: "write_file", LimitedUses: true, UsesLeft: 1}
	other := &airlockv1.StandingGrant{Id: "g-other", Tool: "delete_file"}
	var judgedAt []time.Time
	applies := func(g *airlockv1.StandingGrant, call *airlockv1.ToolCall, d *airlockv1.Decision, when time.Time) bool {
		judgedAt = append(judgedAt, when)
		return g.Tool == call.Tool && g.UsesLeft > 0
	}
	for _, tt := range []struct {
		name, tool string
		policy     airlockv1.Action
		want       airlockv1.Action
		grant      string
	}{
		{"an_ask_a_grant_covers_is_allowed_naming_it", "write_file", airlockv1.Action_ACTION_ASK, airlockv1.Action_ACTION_ALLOW, "g-once"},
		{"the_same_grant_answers_again_nothing_spent", "write_file", airlockv1.Action_ACTION_ASK, airlockv1.Action_ACTION_ALLOW, "g-once"},
		{"an_ask_no_grant_covers_stays", "read_file", airlockv1.Action_ACTION_ASK, airlockv1.Action_ACTION_ASK, ""},
		{"a_deny_is_never_answered", "write_file", airlockv1.Action_ACTION_DENY, airlockv1.Action_ACTION_DENY, ""},
		{"an_allow_stays_the_policys", "write_file", airlockv1.Action_ACTION_ALLOW, airlockv1.Action_ACTION_ALLOW, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			decide := replay.WithGrants(func(context.Context, *airlockv1.ToolCall, time.Time) (*airlockv1.Decision, error) {
				return &airlockv1.Decision{Action: tt.policy, RuleId: "r", Reason: "the policy's"}, nil
			}, []*airlockv1.StandingGrant{other, limited}, applies)
			d, err := decide(ctx, &airlockv1.ToolCall{Tool: tt.tool}, at)
			if err != nil || d.GetAction() != tt.want || d.GetGrantId() != tt.grant || d.GetRuleId() != "r" {
				t.Fatalf("decided %v by grant %q (rule %q, err %v); want %v by grant %q", d.GetAction(), d.GetGrantId(), d.GetRuleId(), err, tt.want, tt.grant)
			}
			if limited.UsesLeft != 1 {
				t.Fatalf("a grant was spent: %d uses left", limited.UsesLeft)
			}
		})
	}
	for _, when := range judgedAt {
		if !when.Equal(at) {
			t.Errorf("a grant was judged at %s, not at the call's time %s", when, at)
		}
	}
}
