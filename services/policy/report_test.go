package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// gateOnly submits a gate-only call (the agent runs the tool itself).
func gateOnly(t *testing.T, js jetstream.JetStream, agent, call, server, tool string, args map[string]any) {
	t.Helper()
	st, err := structpb.NewStruct(args)
	if err != nil {
		t.Fatal(err)
	}
	publishRequest(t, js, &airlockv1.ToolCall{CallId: call, AgentId: agent, Server: server, Tool: tool, Arguments: st, Revision: 1, AgentRuns: true})
}

// publishReport puts an agent's report in the intake stream, on the
// reporting agent's own subject (as NATS permissions confine it).
func publishReport(t *testing.T, js jetstream.JetStream, agent, call string, rep *airlockv1.Reported) {
	t.Helper()
	publishReportOn(t, js, "", agent, call, rep)
}

// publishReportOn is publishReport on subject subj ("": the call's own).
func publishReportOn(t *testing.T, js jetstream.JetStream, subj, agent, call string, rep *airlockv1.Reported) {
	t.Helper()
	ev := &airlockv1.Event{AgentId: agent, CallId: call, Revision: 1, Body: &airlockv1.Event_Reported{Reported: rep}}
	msg, err := bus.EncodeRequest(ev, "agent/"+agent, "")
	if err != nil {
		t.Fatal(err)
	}
	if subj != "" {
		msg.Subject = subj
	}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// ledger is the call's execution ledger (its exec.* events).
func ledger(t *testing.T, js jetstream.JetStream, agent, call string) []*airlockv1.Event {
	return testenv.Events(t, js, subject.OfExecution(agent, call))
}

// refusedReports are the call's unauthorized_attempt events with action report.
func refusedReports(t *testing.T, js jetstream.JetStream, agent, call string) []string {
	var out []string
	for _, ev := range testenv.Events(t, js, subject.OfCall(agent, call)) {
		if u := ev.GetUnauthorizedAttempt(); u != nil && u.GetAction() == "report" {
			out = append(out, u.GetWhy())
		}
	}
	return out
}

func waitRefusedReport(t *testing.T, js jetstream.JetStream, agent, call string, n int) []string {
	t.Helper()
	var got []string
	testenv.Eventually(t, 10*time.Second, "a refused report on "+call, func() bool {
		got = refusedReports(t, js, agent, call)
		return len(got) >= n
	})
	return got
}

func TestAReportOfAnAllowedGateOnlyCallBecomesItsOnlyOutcome(t *testing.T) {
	n := testenv.StartNATS(t)
	_, deps := replica(t, testenv.Config(n.URL()))
	js := deps.JS

	gateOnly(t, js, "bot", "g1", "demo", "echo", map[string]any{"text": "hi"})
	if ev := waitDecision(t, js, "bot", "g1"); envelope.TypeOf(ev) != subject.Allowed {
		t.Fatalf("decision %s, want allowed", envelope.TypeOf(ev))
	}
	publishReport(t, js, "bot", "g1", &airlockv1.Reported{ResultJson: `{"stdout":"hi"}`})
	var got []*airlockv1.Event
	testenv.Eventually(t, 10*time.Second, "the report on the ledger", func() bool {
		got = ledger(t, js, "bot", "g1")
		return len(got) > 0
	})
	c := got[0].GetCompleted()
	if c == nil || !c.GetAgentRan() || c.GetResultJson() != `{"stdout":"hi"}` || got[0].GetActor().GetId() != "bot" {
		t.Fatalf("ledger event %v", got[0])
	}

	// A second report of the same call, with another result, is refused and
	// recorded; the ledger keeps the first.
	publishReport(t, js, "bot", "g1", &airlockv1.Reported{Failed: true, Error: "changed my mind"})
	why := waitRefusedReport(t, js, "bot", "g1", 1)
	if n := len(ledger(t, js, "bot", "g1")); n != 1 {
		t.Fatalf("ledger holds %d events after a second report, want 1", n)
	}
	t.Logf("second report refused: %s", why[0])
}

// The intake stores a report under its agent alone: the call it reports on
// is the one its body names, whatever call token it was published on.
func TestAReportIsAboutTheCallItsBodyNames(t *testing.T) {
	n := testenv.StartNATS(t)
	_, deps := replica(t, testenv.Config(n.URL()))
	js := deps.JS

	gateOnly(t, js, "bot", "g1", "demo", "echo", map[string]any{"text": "hi"})
	gateOnly(t, js, "bot", "decoy", "demo", "echo", map[string]any{"text": "hi"})
	waitDecision(t, js, "bot", "g1")
	waitDecision(t, js, "bot", "decoy")
	publishReportOn(t, js, "airlock.req.bot.decoy", "bot", "g1", &airlockv1.Reported{ResultJson: `"done"`})
	testenv.Eventually(t, 10*time.Second, "the report on g1's ledger", func() bool {
		return len(ledger(t, js, "bot", "g1")) == 1
	})
	if n := len(ledger(t, js, "bot", "decoy")); n != 0 {
		t.Fatalf("the call named by the subject's token got %d ledger events", n)
	}
}

func TestReportsAirlockDidNotAllowAreRefusedAndRecorded(t *testing.T) {
	n := testenv.StartNATS(t)
	_, deps := replica(t, testenv.Config(n.URL()))
	js := deps.JS

	gateOnly(t, js, "bot", "denied", "fs", "delete_file", map[string]any{"path": "/etc/passwd"})
	gateOnly(t, js, "bot", "pending", "demo", "write_file", map[string]any{"path": "/tmp/x"})
	submit(t, js, "bot", "executor_runs", "demo", "echo", map[string]any{"text": "hi"})
	gateOnly(t, js, "victim", "theirs", "demo", "echo", map[string]any{"text": "hi"})
	for _, c := range []struct{ agent, call string }{{"bot", "denied"}, {"bot", "pending"}, {"bot", "executor_runs"}, {"victim", "theirs"}} {
		waitDecision(t, js, c.agent, c.call)
	}
	tests := []struct {
		name, call string
	}{
		{"a_denied_call", "denied"},
		{"a_call_still_waiting_for_a_person", "pending"},
		{"a_call_airlocks_executor_runs", "executor_runs"},
		// The agent can publish only on its own subject token, so naming
		// another agent's call id names a call of its own that does not exist.
		{"another_agents_call_id", "theirs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			publishReport(t, js, "bot", tt.call, &airlockv1.Reported{ResultJson: `"done"`})
			why := waitRefusedReport(t, js, "bot", tt.call, 1)
			t.Logf("refused: %s", why[0])
			if n := len(ledger(t, js, "bot", tt.call)); n != 0 {
				t.Fatalf("the refused report reached the ledger (%d events)", n)
			}
		})
	}
	if n := len(ledger(t, js, "victim", "theirs")); n != 0 {
		t.Fatalf("another agent's call got an outcome from bot's report")
	}
}
