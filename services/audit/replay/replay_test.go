package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// The candidate here is a plain function: "ask for every write"; the real
// evaluator is exercised by `airlock policy replay`'s test.
func TestReplayCountsChangesGrantsAndRedactedArguments(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := bus.NewPublisher(deps.JS, "airlock/policy")
	decided := func(i int, tool string, action airlockv1.Action, grant string, redact ...string) {
		args, _ := structpb.NewStruct(map[string]any{"path": "/p", "token": "secret"})
		call := &airlockv1.ToolCall{CallId: fmt.Sprintf("c%d", i), AgentId: "bot", Server: "fs", Tool: tool, Arguments: args, Revision: 1}
		d := &airlockv1.Decision{Action: action, RuleId: "old", GrantId: grant, Redact: redact}
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
	decided(3, "write_file", airlockv1.Action_ACTION_ALLOW, "grant-1")    // a grant allowed it: not re-decided
	decided(4, "write_file", airlockv1.Action_ACTION_ASK, "")             // unchanged
	decided(5, "read_file", airlockv1.Action_ACTION_ALLOW, "")            // unchanged
	decided(6, "read_file", airlockv1.Action_ACTION_DENY, "")             // deny → allow

	var seenToken []string
	decide := func(_ context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
		seenToken = append(seenToken, call.GetArguments().GetFields()["token"].GetStringValue())
		if at.IsZero() {
			t.Error("decided without the recorded time")
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
		{"five calls re-decided, the granted one skipped", rep.Replayed == 5 && rep.Granted == 1},
		{"three changed, two unchanged", rep.Changed == 3 && rep.Unchanged == 2},
		{"a rule-only change is counted apart", rep.RuleChanged == 1},
		{"the redacted call is flagged", rep.Redacted == 1},
		{"transitions most frequent first", len(rep.Transitions) == 2 && rep.Transitions[0].From == "allow" && rep.Transitions[0].To == "ask" && rep.Transitions[0].Count == 2},
		{"the candidate sees a redacted value masked, others as recorded", len(seenToken) == 5 && seenToken[0] == "secret" && seenToken[1] == "[REDACTED]"},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s: does not hold: %+v", c.name, rep)
		}
	}
}
