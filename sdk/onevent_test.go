package airlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestOnEventSeesTheApprovalRequestBeforeTheOutcome: a front-end following
// a call (Await without a deadline, or DoFast) sees its approval request —
// also one stored before it started following — and a failed call's own
// error result comes with the outcome.
func TestOnEventSeesTheApprovalRequestBeforeTheOutcome(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("policy")
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	w, err := c.Watch(airlock.WatchAlso(subject.ApprovalRequested))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ask := func(call string) {
		ev := &airlockv1.Event{EventId: "bot." + call + ".1.decision", AgentId: "bot", CallId: call, Revision: 1,
			Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Decision: &airlockv1.Decision{Approvers: []string{"requester"}}}}}
		if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	fail := func(call string) {
		ev := &airlockv1.Event{EventId: "bot." + call + ".1.result", AgentId: "bot", CallId: call, Revision: 1,
			Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "tool_error", Outcome: "error", ResultJson: `{"isError":true}`}}}
		if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, c2 := range []struct {
		name   string
		follow func(ctx context.Context, call string, hook airlock.AwaitOption) (airlock.Outcome, error)
	}{
		{"await_reads_a_stored_request_for_approval", func(ctx context.Context, call string, hook airlock.AwaitOption) (airlock.Outcome, error) {
			if _, err := c.Submit(ctx, airlock.Call{ID: call, Tool: "fs__write_file"}); err != nil {
				return airlock.Outcome{}, err
			}
			ask(call) // before Await starts: read from the stream
			return c.AwaitRevision(context.Background(), call, 1, hook)
		}},
		{"dofast_sees_it_live", func(ctx context.Context, call string, hook airlock.AwaitOption) (airlock.Outcome, error) {
			// Once DoFast has submitted (it registers first), the policy asks.
			// The intake stores requests under the agent alone: a new message
			// in it is this call's request.
			intake, err := deps.JS.Stream(ctx, deps.Config.Intake.Name)
			if err != nil {
				return airlock.Outcome{}, err
			}
			info, err := intake.Info(ctx)
			if err != nil {
				return airlock.Outcome{}, err
			}
			before := info.State.LastSeq
			go func() {
				for ctx.Err() == nil {
					if info, err := intake.Info(ctx); err == nil && info.State.LastSeq > before {
						ask(call)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			return w.DoFast(ctx, airlock.Call{ID: call, Tool: "fs__write_file"}, hook)
		}},
	} {
		t.Run(c2.name, func(t *testing.T) {
			call := "c-" + c2.name[:5]
			var mu sync.Mutex
			var seen []string
			asked := make(chan struct{}, 4)
			hook := airlock.OnEvent(func(ev *airlockv1.Event) {
				mu.Lock()
				seen = append(seen, ev.GetAgentId()+"/"+ev.GetCallId())
				mu.Unlock()
				if ev.GetApprovalRequested() != nil {
					asked <- struct{}{}
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() {
				select {
				case <-asked:
					fail(call)
				case <-ctx.Done():
				}
			}()
			out, err := c2.follow(ctx, call, hook)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != airlock.StatusFailed || string(out.Result) != `{"isError":true}` {
				t.Fatalf("outcome %+v", out)
			}
		})
	}
}
