package airlock_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A gate-only call's answer is its decision: allowed, or approved (with a
// reviewer's edited arguments, which the agent must run instead).
func TestAwaitDecisionAnswersAGateOnlyCallWithItsDecision(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	edited, _ := structpb.NewStruct(map[string]any{"command": "git status -s"})
	for _, tt := range []struct {
		name string
		ev   *airlockv1.Event
		want airlock.Status
	}{
		{"allowed_by_policy", &airlockv1.Event{Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{
			Call: &airlockv1.ToolCall{AgentRuns: true}, Decision: &airlockv1.Decision{Reason: "read-only"}}}}, airlock.StatusAllowed},
		{"approved_with_edited_arguments", &airlockv1.Event{Actor: &airlockv1.Actor{Id: "alice"}, Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{
			Call: &airlockv1.ToolCall{AgentRuns: true, Arguments: edited}, Edited: true}}}, airlock.StatusApproved},
		{"denied", &airlockv1.Event{Body: &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Decision: &airlockv1.Decision{Reason: "no"}}}}, airlock.StatusDenied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, err := c.Submit(ctx, airlock.Call{Tool: "claude__Bash", Args: map[string]any{"command": "git status"}, AgentRuns: true})
			if err != nil {
				t.Fatal(err)
			}
			tt.ev.AgentId, tt.ev.CallId, tt.ev.Revision = "bot", id, 1
			if _, err := deps.Publisher("policy").Publish(ctx, tt.ev, ""); err != nil {
				t.Fatal(err)
			}
			out, err := c.AwaitDecision(ctx, id, 1)
			if err != nil || out.Status != tt.want {
				t.Fatalf("outcome %+v, %v; want %s", out, err, tt.want)
			}
			if tt.want == airlock.StatusApproved && (out.DecidedBy != "alice" || out.Arguments["command"] != "git status -s" || !out.Allowed()) {
				t.Fatalf("approval %+v", out)
			}
		})
	}
}

func TestReportPutsTheAgentsReportInTheIntakeStream(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	huge := `"` + strings.Repeat("x", airlock.MaxReportResultBytes+10) + `"`
	if err := c.Report(ctx, "c1", 1, airlock.Report{Result: json.RawMessage(huge), Latency: time.Second, Args: map[string]any{"command": "ls"}}); err != nil {
		t.Fatal(err)
	}
	stream, err := deps.JS.Stream(ctx, deps.Config.Intake.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The intake stores it under the agent alone: the body names the call.
	m, err := stream.GetLastMsgForSubject(ctx, subject.RequestsPrefix+".bot")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetCallId() != "c1" || ev.GetRevision() != 1 {
		t.Fatalf("the report names call %q revision %d, want c1 revision 1", ev.GetCallId(), ev.GetRevision())
	}
	rep := ev.GetReported()
	if rep == nil || !rep.GetTruncated() || !json.Valid([]byte(rep.GetResultJson())) || len(rep.GetResultJson()) > airlock.MaxReportResultBytes || rep.GetArguments() == nil {
		t.Fatalf("report %v", rep)
	}
	if err := c.Report(ctx, "c 1", 1, airlock.Report{}); err == nil {
		t.Fatal("reported on a call id that is not one")
	}
}
