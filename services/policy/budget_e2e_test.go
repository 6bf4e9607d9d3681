package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestOneAgentCannotFillTheEventsStream (R5 F1): an agent that floods the
// intake with large requests the policy denies (no max_pending bound holds
// them) had every one recorded, twice (requested and denied), until the
// events stream reached stream.max_bytes and no agent's call was decided.
// With its budget spent, its further requests are refused with a small
// event saying so, then dropped; another agent's call is still decided.
func TestOneAgentCannotFillTheEventsStream(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	const budgetBytes = 1 << 20
	cfg.Limits.AgentCallsPerMinute, cfg.Limits.AgentRequestBytesPerMinute = 4, budgetBytes
	deps := testenv.Deps(t, cfg)
	engine, err := policy.NewEngine(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := policy.New(deps, engine)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, svc)

	ctx := context.Background()
	events, err := deps.JS.Stream(ctx, cfg.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	streamBytes := func() uint64 {
		info, err := events.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Bytes
	}
	// A call the default policy denies (fs-delete-etc), with 200 KiB of
	// arguments.
	request := func(agent, call, filler string) {
		msg := nats.NewMsg(fmt.Sprintf("airlock.req.%s.%s", agent, call))
		msg.Data = []byte(`{"requested":{"call":{"callId":"` + call + `","server":"fs","tool":"delete_file","arguments":{"path":"/etc/passwd","content":"` + filler + `"}}}}`)
		msg.Header.Set("Content-Type", "application/json")
		if _, err := deps.JS.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	before := streamBytes()
	const flood = 40
	filler := strings.Repeat("x", 200<<10)
	for i := range flood {
		request("bot", fmt.Sprintf("f%d", i), filler)
	}
	testenv.Settled(t, deps.JS, cfg.Intake.Name, policy.Durable, 60*time.Second)

	// Each recorded call is stored twice (requested, denied), and charged
	// so: the budget's bytes, and a little more for the refusals and the
	// budget refilled while the test runs. Charged once, the calls' twice
	// (R9 F6: 1.6 MiB here); without the budget: 16 MiB.
	if grew := streamBytes() - before; grew > budgetBytes+budgetBytes/4 {
		t.Fatalf("the events stream grew by %d bytes from one agent's flood, want at most %d (its byte budget and the refusals)", grew, budgetBytes+budgetBytes/4)
	}
	told := slices.ContainsFunc(testenv.Events(t, deps.JS, subject.OfAgent("bot")), func(ev *airlockv1.Event) bool {
		return strings.Contains(ev.GetInvalid().GetReason(), "limits.agent_calls_per_minute") && ev.GetInvalid().GetRawExcerpt() == ""
	})
	if !told {
		t.Fatal("no over-budget request of bot was answered with an invalid event naming limits.agent_calls_per_minute (and no excerpt)")
	}
	if dropped := testutil.ToFloat64(deps.Metrics.Handled.WithLabelValues("policy", "over_budget_dropped")); dropped == 0 {
		t.Fatal("none of bot's requests past its refusals was dropped (airlock_messages_handled_total outcome over_budget_dropped)")
	}
	request("victim", "v1", "small")
	testenv.WaitForEvent(t, deps.JS, subject.OfCall("victim", "v1"), subject.Denied, 10*time.Second)
}

// TestAnOverBudgetNoticeNamesTheRevisionAsked: the notice named only the
// call, so an agent following revision 1 of a call while it submitted
// revision 2 over its budget took the notice for an answer about revision
// 1. It names the revision the request asked for, in either encoding, and
// 1 for a request that names none; so does the refusal recorded for the
// first requests over the budget.
func TestAnOverBudgetNoticeNamesTheRevisionAsked(t *testing.T) {
	_, deps, notices := overBudgetReplica(t, 1)
	publishJSON := func(call, body string) {
		msg := nats.NewMsg("airlock.req.bot." + call)
		msg.Data = []byte(body)
		msg.Header.Set("Content-Type", "application/json")
		if _, err := deps.JS.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	// The minute's one call, within the budget.
	submit(t, deps.JS, "bot", "first", "fs", "delete_file", map[string]any{"path": "/etc/passwd"})
	testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", "first"), subject.Denied, 10*time.Second)
	for _, tc := range []struct {
		name, call string
		publish    func()
		want       uint32
	}{
		{"json_revision_2", "j2", func() {
			publishJSON("j2", `{"requested":{"call":{"callId":"j2","revision":2,"server":"fs","tool":"delete_file","arguments":{}}}}`)
		}, 2},
		{"json_no_revision", "j0", func() {
			publishJSON("j0", `{"requested":{"call":{"callId":"j0","server":"fs","tool":"delete_file","arguments":{}}}}`)
		}, 1},
		{"protobuf_revision_3", "p3", func() {
			publishRequest(t, deps.JS, &airlockv1.ToolCall{CallId: "p3", AgentId: "bot", Revision: 3, Server: "fs", Tool: "delete_file"})
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.publish()
			select {
			case m := <-notices:
				n, err := ingress.DecodeOverBudget(m.Data, "bot", tc.call)
				if err != nil {
					t.Fatalf("notice on %s: %v", m.Subject, err)
				}
				var raw map[string]any
				if err := json.Unmarshal(m.Data, &raw); err != nil {
					t.Fatal(err)
				}
				if n.Revision != tc.want || raw["revision"] != float64(tc.want) || !strings.Contains(n.Reason, fmt.Sprintf("revision %d of call %s", tc.want, tc.call)) {
					t.Fatalf("notice %s; want revision %d named in the JSON and the reason", m.Data, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no over-budget notice for call %s", tc.call)
			}
		})
	}
	// The minute's one refusal (j2, the first over the budget) is recorded
	// with the revision it asked for too: without one it was taken for an
	// end of whatever revision a wait awaited.
	if ev := testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", "j2"), subject.Invalid, 10*time.Second); ev.GetRevision() != 2 {
		t.Fatalf("the refusal of j2's revision 2 over the budget is recorded with revision %d; want 2", ev.GetRevision())
	}
}

// TestARepeatOverBudgetDoesNotEndItsRecordedRevision (R7 F1): a repeat of
// an already recorded revision over the budget was refused with an
// `invalid` event naming that revision, which every waiter took for the
// revision's end although it still waited for a decision. The repeat is
// answered by the notice alone; a request for a revision never recorded
// is still refused with a stored `invalid`, which ends a wait on it.
func TestARepeatOverBudgetDoesNotEndItsRecordedRevision(t *testing.T) {
	cfg, deps, notices := overBudgetReplica(t, 2)
	args := map[string]any{"path": "/etc/passwd"}
	// The minute's two calls, within the budget: one recorded, and a
	// harmless repeat of it.
	submit(t, deps.JS, "bot", "recorded", "fs", "delete_file", args)
	testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", "recorded"), subject.Denied, 10*time.Second)
	submit(t, deps.JS, "bot", "recorded", "fs", "delete_file", args)
	testenv.Settled(t, deps.JS, cfg.Intake.Name, policy.Durable, 10*time.Second)
	// Over the budget (the minute's two refusals): a repeat of the
	// recorded revision, then a call never recorded.
	submit(t, deps.JS, "bot", "recorded", "fs", "delete_file", args)
	submit(t, deps.JS, "bot", "unrecorded", "fs", "delete_file", args)
	testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", "unrecorded"), subject.Invalid, 10*time.Second)
	testenv.Settled(t, deps.JS, cfg.Intake.Name, policy.Durable, 10*time.Second)
	for _, ev := range testenv.Events(t, deps.JS, subject.OfCall("bot", "recorded")) {
		if ev.GetInvalid() != nil {
			t.Fatalf("a repeat of recorded revision %d over the budget was stored as invalid (%q): waiters take it for the revision's end", ev.GetRevision(), ev.GetInvalid().GetReason())
		}
	}
	heard := map[string]bool{}
	for len(heard) < 2 {
		select {
		case m := <-notices:
			heard[m.Subject] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("over-budget notices heard on %v; want one for each of recorded and unrecorded", heard)
		}
	}
}

// overBudgetReplica is a policy replica whose agents may have
// callsPerMinute calls decided a minute, and the over-budget notices it
// sends agent bot, heard from before any request.
func overBudgetReplica(t *testing.T, callsPerMinute int) (config.Config, svc.Deps, chan *nats.Msg) {
	t.Helper()
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Limits.AgentCallsPerMinute = callsPerMinute
	_, deps := replica(t, cfg)
	notices := make(chan *nats.Msg, 16)
	sub, err := deps.NC.ChanSubscribe(subject.OverBudgetNotice("bot", "*"), notices)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := deps.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return cfg, deps, notices
}
