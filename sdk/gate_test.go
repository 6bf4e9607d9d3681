package airlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// gateRig is a NATS server, the services' dependencies on it and agent
// bot's client, with a context that ends with the test (10 s at most).
func gateRig(t *testing.T) (svc.Deps, *airlock.Client, context.Context) {
	t.Helper()
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return deps, c, ctx
}

// A gate-only call's answer is its decision: allowed, or approved. Await
// and AwaitRevision end there too (the agent runs the tool itself), whether
// the decision was stored before they started or arrives while they wait;
// a call airlock's executor runs does not end at its decision.
func TestAGateOnlyCallEndsWithItsDecision(t *testing.T) {
	deps, c, ctx := gateRig(t)
	pub := deps.Publisher("policy")
	gate := &airlockv1.ToolCall{AgentRuns: true}
	await := map[string]func(context.Context, string) (airlock.Outcome, error){
		"AwaitDecision": func(ctx context.Context, id string) (airlock.Outcome, error) { return c.AwaitDecision(ctx, id, 1) },
		"Await":         func(ctx context.Context, id string) (airlock.Outcome, error) { return c.Await(ctx, id) },
		"AwaitRevision": func(ctx context.Context, id string) (airlock.Outcome, error) { return c.AwaitRevision(ctx, id, 1) },
	}
	for _, tt := range []struct {
		name string
		ev   *airlockv1.Event
		want airlock.Status
	}{
		{"allowed_by_policy", &airlockv1.Event{Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{
			Call: gate, Decision: &airlockv1.Decision{Reason: "read-only"}}}}, airlock.StatusAllowed},
		{"approved", &airlockv1.Event{Actor: &airlockv1.Actor{Id: "alice"}, Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{
			Call: gate, Votes: []*airlockv1.Vote{{Comment: "fine"}}}}}, airlock.StatusApproved},
		{"denied", &airlockv1.Event{Body: &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Decision: &airlockv1.Decision{Reason: "no"}}}}, airlock.StatusDenied},
	} {
		for name, wait := range await {
			for _, live := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/live=%v", tt.name, name, live), func(t *testing.T) {
					id, err := c.Submit(ctx, airlock.Call{Tool: "claude__Bash", Args: map[string]any{"command": "git status"}, AgentRuns: true})
					if err != nil {
						t.Fatal(err)
					}
					// What the policy service records first.
					req := &airlockv1.Event{AgentId: "bot", CallId: id, Revision: 1, Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: gate}}}
					if _, err := pub.Publish(ctx, req, ""); err != nil {
						t.Fatal(err)
					}
					ev := proto.Clone(tt.ev).(*airlockv1.Event)
					ev.AgentId, ev.CallId, ev.Revision = "bot", id, 1
					decide := func() {
						if _, err := pub.Publish(ctx, ev, ""); err != nil {
							t.Error(err)
						}
					}
					if live {
						time.AfterFunc(200*time.Millisecond, decide)
					} else {
						decide()
					}
					out, err := wait(ctx, id)
					if err != nil || out.Status != tt.want {
						t.Fatalf("outcome %+v, %v; want %s", out, err, tt.want)
					}
					if tt.want == airlock.StatusApproved && (out.DecidedBy != "alice" || out.Reason != "fine" || !out.Allowed()) {
						t.Fatalf("approval %+v", out)
					}
				})
			}
		}
	}

	// Once the agent's report is recorded, it is the gate-only call's outcome.
	id, err := c.Submit(ctx, airlock.Call{Tool: "claude__Bash", Args: map[string]any{"command": "ls"}, AgentRuns: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*airlockv1.Event{
		{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: gate}}},
		{Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: gate, Decision: &airlockv1.Decision{}}}},
		{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `"ok"`, AgentRan: true}}},
	} {
		ev.AgentId, ev.CallId, ev.Revision = "bot", id, 1
		if _, err := pub.Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.Await(ctx, id); err != nil || out.Status != airlock.StatusCompleted || !out.AgentRan || string(out.Result) != `"ok"` {
		t.Fatalf("Await after the report: %+v %v", out, err)
	}

	// A call airlock's executor runs: its decision is not its end.
	id, err = c.Submit(ctx, airlock.Call{Tool: "demo__echo"})
	if err != nil {
		t.Fatal(err)
	}
	allowed := &airlockv1.Event{AgentId: "bot", CallId: id, Revision: 1, Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: &airlockv1.ToolCall{}}}}
	if _, err := pub.Publish(ctx, allowed, ""); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer qcancel()
	if out, err := c.Await(qctx, id); err == nil {
		t.Fatalf("Await of an executor-run call ended at its decision: %+v", out)
	}
}

func TestReportPutsTheAgentsReportInTheIntakeStream(t *testing.T) {
	deps, c, ctx := gateRig(t)
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
