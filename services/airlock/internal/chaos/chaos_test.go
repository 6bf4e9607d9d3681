package chaos

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

func TestSameSeedSameLoadAndSchedule(t *testing.T) {
	for _, p := range []profile{shortProfile, fullProfile} {
		t.Run(p.name, func(t *testing.T) {
			interval := p.load / time.Duration(p.calls)
			if !reflect.DeepEqual(plan(7, p.calls, interval, loadAgents), plan(7, p.calls, interval, loadAgents)) {
				t.Fatal("the same seed planned two different loads")
			}
			if !reflect.DeepEqual(schedule(7, p, p.load), schedule(7, p, p.load)) {
				t.Fatal("the same seed planned two different fault schedules")
			}
			if reflect.DeepEqual(schedule(7, p, p.load), schedule(8, p, p.load)) && reflect.DeepEqual(plan(7, p.calls, interval, loadAgents), plan(8, p.calls, interval, loadAgents)) {
				t.Fatal("two seeds planned the same run")
			}
		})
	}
}

func TestEveryScheduleHasEveryFaultKindWithinTheLoad(t *testing.T) {
	for _, p := range []profile{shortProfile, fullProfile} {
		for seed := int64(1); seed <= 20; seed++ {
			fs := schedule(seed, p, p.load)
			kinds := map[faultKind]int{}
			executorKilled, gatewayKilled, leaderLost := false, false, false
			for _, f := range fs {
				kinds[f.Kind]++
				if f.At < 0 || f.At > p.load {
					t.Fatalf("%s seed %d: %s at %s, outside the %s load", p.name, seed, f.Kind, f.At, p.load)
				}
				executorKilled = executorKilled || f.Kind == faultKill && strings.HasPrefix(f.Target, "executor-")
				_, gw := f.gatewayKill()
				gatewayKilled = gatewayKilled || gw
				leaderLost = leaderLost || f.Kind == faultNodeLoss && f.Target == leaderTarget
			}
			for _, k := range allFaultKinds {
				if kinds[k] == 0 {
					t.Fatalf("%s seed %d: no %s fault in %v", p.name, seed, k, fs)
				}
			}
			if !leaderLost || !executorKilled || !gatewayKilled {
				t.Fatalf("%s seed %d: the events stream's leader lost %v, an executor killed %v, a gateway replica killed %v: want all", p.name, seed, leaderLost, executorKilled, gatewayKilled)
			}
		}
	}
}

// clean is the trail of one auto-allowed call and one rejected call that
// went right, with everything that observed them agreeing.
func clean() observed {
	t0 := time.Unix(1_700_000_000, 0)
	ev := func(seq uint64, call, typ string, body *airlockv1.Event) storedEvent {
		if body == nil {
			body = &airlockv1.Event{}
		}
		body.EventId = "bot-1." + call + ".1." + typ
		body.Revision = 1
		return storedEvent{Seq: seq, Time: t0.Add(time.Duration(seq) * 100 * time.Millisecond), Type: typ, Agent: "bot-1", Call: call, Rev: 1, EventID: body.EventId, Ev: body}
	}
	completed := &airlockv1.Event{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"ok":true}`}}}
	o := observed{
		Events: []storedEvent{
			ev(1, "a", subject.Requested, nil), ev(2, "a", subject.Allowed, nil), ev(3, "a", subject.Started, nil), ev(4, "a", subject.Completed, completed),
			ev(5, "b", subject.Requested, nil), ev(6, "b", subject.ApprovalRequested, nil), ev(7, "b", subject.Rejected, nil),
		},
		CH:    map[uint64]string{},
		Execs: []execution{{Server: serverHook, Tool: toolNotify, Agent: "bot-1", Call: "a", Key: "bot-1.a.1"}},
		Calls: []callRecord{
			{plannedCall: plannedCall{Agent: "bot-1", ID: "a", Server: serverHook, Tool: toolNotify}, Submitted: t0,
				Outcomes: map[uint32]airlock.Outcome{1: {Revision: 1, Status: airlock.StatusCompleted, Result: []byte(`{"ok":true}`)}}},
			{plannedCall: plannedCall{Agent: "bot-1", ID: "b", Server: serverHook, Tool: toolTransfer, Review: rejectREST}, Submitted: t0,
				Outcomes:  map[uint32]airlock.Outcome{1: {Revision: 1, Status: airlock.StatusRejected}},
				Decisions: []decisionRecord{{Rev: 1, Kind: subject.Rejected, Channel: "api", Changed: true, State: "rejected"}}},
		},
		Approvals: []*airlockv1.ApprovalRecord{{Call: &airlockv1.ToolCall{AgentId: "bot-1", CallId: "b", Revision: 1}, State: airlockv1.ApprovalState_APPROVAL_STATE_REJECTED}},
		Faults:    []faultResult{{fault: fault{Kind: faultKill}, Recovered: true, Start: t0, Healed: t0.Add(time.Second)}},
		Verify:    verifyResult{OK: true, Output: "OK: 7 events verified"},
	}
	for _, e := range o.Events {
		o.CH[e.Seq] = e.EventID
	}
	return o
}

func TestAnalyseFindsEachViolation(t *testing.T) {
	if r := analyse(clean(), idempotentTool); r.Violations != 0 {
		t.Fatalf("a clean run has violations: %+v", r.Checks)
	}
	tests := []breakage{
		{"a_non_idempotent_call_ran_twice", "non-idempotent calls executed more than once", func(o *observed) {
			o.Execs = append(o.Execs, o.Execs[0])
		}},
		{"an_idempotent_call_ran_again_with_another_key", "idempotent calls re-sent with another idempotency key", func(o *observed) {
			o.Execs[0].Tool = toolLookup
			again := o.Execs[0]
			again.Key = "other"
			o.Execs = append(o.Execs, again)
		}},
		{"a_rejected_call_ran", "executions never allowed or approved", func(o *observed) {
			o.Execs = append(o.Execs, execution{Server: serverHook, Tool: toolTransfer, Agent: "bot-1", Call: "b", Key: "bot-1.b.1"})
		}},
		{"a_started_call_ended_twice", "started calls without exactly one terminal event", func(o *observed) {
			e := o.Events[3]
			e.Seq, e.Type = 8, subject.Failed
			o.Events = append(o.Events, e)
			o.CH[8] = e.EventID
		}},
		{"an_allowed_call_never_ended", "calls decided to run that never ended", func(o *observed) {
			o.Events = o.Events[:2]
			o.CH = map[uint64]string{1: o.Events[0].EventID, 2: o.Events[1].EventID}
			o.Calls = o.Calls[:1]
			o.Calls[0].Outcomes = nil
			o.Execs = nil
		}},
		{"a_decision_is_only_in_the_bucket", "decided calls whose decision event is missing", func(o *observed) {
			o.Approvals[0].State = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
		}},
		{"an_event_never_reached_clickhouse", "events in the stream missing from ClickHouse", func(o *observed) {
			delete(o.CH, 3)
		}},
		{"clickhouse_holds_an_event_the_stream_does_not", "events in ClickHouse not in the stream", func(o *observed) {
			o.CH[99] = "forged"
		}},
		{"the_audit_chain_is_broken", "airlock audit verify", func(o *observed) {
			o.Verify = verifyResult{Output: "BROKEN at seq 3"}
		}},
		{"an_agent_saw_another_outcome", "agent-visible outcomes that differ from the stream", func(o *observed) {
			o.Calls[0].Outcomes[1] = airlock.Outcome{Revision: 1, Status: airlock.StatusFailed}
		}},
		{"an_acknowledged_request_was_lost", "acknowledged requests never recorded", func(o *observed) {
			o.Calls = append(o.Calls, callRecord{plannedCall: plannedCall{Agent: "bot-2", ID: "lost"}, Submitted: time.Now()})
		}},
		{"a_valid_revision_was_refused", "valid requests refused as invalid", func(o *observed) {
			e := o.Events[6]
			e.Seq, e.Type = 8, subject.Invalid
			e.Ev = &airlockv1.Event{Revision: 1, Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "revision 2 can follow only a request for changes"}}}
			o.Events = append(o.Events[:6], e)
			o.CH = map[uint64]string{}
			for _, ev := range o.Events {
				o.CH[ev.Seq] = ev.EventID
			}
			o.Calls[1].Outcomes[1] = airlock.Outcome{Revision: 1, Status: airlock.StatusInvalid}
		}},
		{"a_service_lacked_a_permission", "NATS permission violations in service logs", func(o *observed) {
			o.PermissionViolations = map[string][]string{"approval-1": {"Permissions Violation for Publish to x"}}
		}},
		{"the_layout_did_not_recover", "faults the layout did not recover from", func(o *observed) {
			o.Faults[0].Recovered = false
		}},
		{"clickhouse_returned_an_event_twice", "events ClickHouse returns twice", func(o *observed) {
			o.CHTwice = []string{"seq 3 (a and a)"}
		}},
		{"a_replica_lacks_an_event_the_other_holds", "events in the stream missing from ClickHouse replica r2", func(o *observed) {
			o.Replicas = replicas(o, 2)
			delete(o.Replicas[1].CH, 4)
		}},
		{"a_replica_returned_an_event_twice", "events ClickHouse replica r1 returns twice", func(o *observed) {
			o.Replicas = replicas(o, 2)
			o.Replicas[0].Twice = []string{"seq 2 (a and a)"}
		}},
		{"a_replica_does_not_verify", "airlock audit verify on ClickHouse replica r2", func(o *observed) {
			o.Replicas = replicas(o, 2)
			o.Replicas[1].Verify = verifyResult{Output: "link at seq 5"}
		}},
		{"the_audit_waited_for_a_killed_replica", "ClickHouse replica kills the audit did not fail over from", func(o *observed) {
			o.Faults = append(o.Faults, faultResult{fault: fault{Kind: faultClickHouse}, Resolved: "clickhouse-r1", ReplicaKill: true, Recovered: true})
		}},
	}
	requireReported(t, clean, tests)
}

// breakage is one way to break a clean run, and the check that must then
// report a violation.
type breakage struct {
	name   string
	check  string
	break_ func(*observed)
}

// requireReported breaks what base returns each way and requires analyse to
// report each breakage's check.
func requireReported(t *testing.T, base func() observed, tests []breakage) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.break_(&o)
			var violated []string
			for _, c := range analyse(o, idempotentTool).Checks {
				if c.Violated {
					violated = append(violated, c.Name)
				}
			}
			if !slices.Contains(violated, tt.check) {
				t.Fatalf("%q not reported; violated: %v", tt.check, violated)
			}
		})
	}
}

// withMCP adds to o one MCP request through the gateway that went right:
// request n 1, answered "pending", sent again in its session and answered
// with the outcome of its call m (notify, run once); and one whose replica
// died before the gateway submitted it.
func withMCP(o observed) observed {
	o = withMCPCall(o, "m", 1, toolNotify)
	o.MCP = []mcpRecord{
		{N: 1, Attempt: 1, Tool: "hook__notify", Client: "mcp-session-1", Session: "s1", Status: "pending", CallID: "m"},
		{N: 1, Attempt: 2, Tool: "hook__notify", Client: "mcp-session-1", Session: "s1", Status: subject.Completed, CallID: "m"},
		{N: 2, Attempt: 1, Tool: "hook__notify", Client: "mcp-session-1", Session: "s1", Err: "connection reset by peer"},
	}
	return o
}

// withMCPCall adds to o the trail of call (requested with arguments n,
// allowed, run once, completed).
func withMCPCall(o observed, call string, n int, tool string) observed {
	t0 := time.Unix(1_700_000_000, 0)
	args, _ := structpb.NewStruct(map[string]any{"agent": mcpAgent, "n": n})
	next := o.Events[len(o.Events)-1].Seq
	for _, typ := range []string{subject.Requested, subject.Allowed, subject.Started, subject.Completed} {
		next++
		ev := &airlockv1.Event{EventId: mcpAgent + "." + call + ".1." + typ, Revision: 1}
		if typ == subject.Requested {
			ev.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{AgentId: mcpAgent, CallId: call, Arguments: args}}}
		}
		o.Events = append(o.Events, storedEvent{Seq: next, Time: t0.Add(time.Duration(next) * 100 * time.Millisecond), Type: typ, Agent: mcpAgent, Call: call, Rev: 1, EventID: ev.EventId, Ev: ev})
		o.CH[next] = ev.EventId
	}
	o.Execs = append(o.Execs, execution{Server: serverHook, Tool: tool, Agent: mcpAgent, Call: call, Key: mcpAgent + "." + call + ".1", Args: map[string]any{"agent": mcpAgent, "n": float64(n)}})
	return o
}

// withResent adds to o a request waiting for a person whose session died
// with its replica: answered "pending" in s1, its next attempt there lost,
// sent again in a new session s2 (before the call ended), which rejoins the
// call and gets its outcome.
func withResent(o observed) observed {
	o = withMCPCall(o, "s1call", 7, toolSync)
	var requested time.Time
	for _, e := range o.Events {
		if e.Call == "s1call" && e.Type == subject.Requested {
			requested = e.Time
		}
	}
	again := requested.Add(time.Millisecond)
	o.MCP = append(o.MCP,
		mcpRecord{N: 7, Attempt: 1, Tool: "hook__sync", Client: "mcp-asker", Session: "s1", Status: "pending", CallID: "s1call"},
		mcpRecord{N: 7, Attempt: 2, Tool: "hook__sync", Client: "mcp-asker", Session: "s1", Err: "connection refused"},
		mcpRecord{N: 7, Attempt: 3, Tool: "hook__sync", Client: "mcp-asker", Session: "s2", Sent: again, Status: "pending", CallID: "s1call"},
		mcpRecord{N: 7, Attempt: 4, Tool: "hook__sync", Client: "mcp-asker", Session: "s2", Sent: again, Status: subject.Completed, CallID: "s1call"})
	return o
}

// inNewCall makes the new session's answers of withResent name a new call
// s2call (asked, approved and run again), its attempts sent at sent.
func inNewCall(o *observed, sent time.Time) {
	*o = withMCPCall(*o, "s2call", 7, toolSync)
	for i := range o.MCP {
		if o.MCP[i].Session == "s2" {
			o.MCP[i].CallID, o.MCP[i].Sent = "s2call", sent
		}
	}
}

func TestAnMCPRequestSentAgainInANewSession(t *testing.T) {
	r := analyse(withResent(clean()), idempotentTool)
	if r.Violations != 0 {
		t.Fatalf("a request that rejoined its call from a new session has violations: %+v", r.Checks)
	}
	if i := slices.IndexFunc(r.Info, func(i Info) bool { return strings.Contains(i.Name, "rejoined a call of the old session") }); i < 0 || r.Info[i].Value != "1" {
		t.Fatalf("the request that rejoined its call from a new session is not counted: %+v", r.Info)
	}
	t.Run("is_a_new_call_there_when_its_call_ended_while_an_answer_was_lost", func(t *testing.T) {
		o := withResent(clean())
		inNewCall(&o, time.Now().Add(time.Hour)) // after s1call's outcome
		if r := analyse(o, idempotentTool); r.Violations != 0 {
			t.Fatalf("a request whose call's outcome may have gone with a lost answer has violations: %+v", r.Checks)
		}
	})
	requireReported(t, func() observed { return withResent(clean()) }, []breakage{
		{"made_a_new_call_instead_of_rejoining_its_waiting_call", "MCP requests sent again in a new session, not rejoining", func(o *observed) {
			inNewCall(o, time.Time{}) // before s1call ended
		}},
	})
}

// withKillAt adds to o the kill of gateway-1 (where the asker of
// withResent sent its session's requests) while s1call waited for a person:
// asked (and requested) 2 s before, its next attempt in s2 after the kill.
func withKillAt(o observed) observed {
	for i, e := range o.Events {
		if e.Call == "s1call" && e.Type == subject.Requested {
			o.Events[i].Time = e.Time.Add(-2 * time.Second)
			asked := o.Events[i]
			asked.Type, asked.Seq, asked.Ev, asked.EventID = subject.ApprovalRequested, o.Events[len(o.Events)-1].Seq+1, nil, e.EventID+".asked"
			o.Events = append(o.Events, asked)
			o.CH[asked.Seq] = asked.EventID
			o.Faults = append(o.Faults, faultResult{fault: fault{Kind: faultKill, Target: "gateway-1"}, Resolved: "gateway-1",
				Start: e.Time.Add(time.Microsecond), Recovered: true})
			break
		}
	}
	return o
}

func TestAKillWithACallWaitingIsFollowedByARejoin(t *testing.T) {
	info := func(r Report, name string) (Info, bool) {
		i := slices.IndexFunc(r.Info, func(i Info) bool { return strings.Contains(i.Name, name) })
		if i < 0 {
			return Info{}, false
		}
		return r.Info[i], true
	}
	r := analyse(withKillAt(withResent(clean())), idempotentTool)
	if r.Violations != 0 {
		t.Fatalf("a call rejoined from a new session after its replica was killed has violations: %+v", r.Checks)
	}
	if i, _ := info(r, "rejoined a call waiting when its replica was killed"); i.Value != "1" {
		t.Fatalf("the rejoin after the kill is not counted: %+v", r.Info)
	}
	t.Run("a_kill_with_no_call_waiting_says_why_nothing_was_rejoined", func(t *testing.T) {
		o := withKillAt(withResent(clean()))
		o.Faults[len(o.Faults)-1].Start = time.Now() // after the call ended
		r := analyse(o, idempotentTool)
		if i, ok := info(r, "no new session could rejoin a waiting call"); r.Violations != 0 || !ok || len(i.Examples) != 1 {
			t.Fatalf("a kill that found no call waiting: violations %d, info %+v", r.Violations, r.Info)
		}
	})
	t.Run("a_kill_right_after_the_call_was_asked_of_a_person_may_find_it_not_offered", func(t *testing.T) {
		o := withKillAt(withResent(clean()))
		kill := &o.Faults[len(o.Faults)-1]
		kill.Start = kill.Start.Add(-2*time.Second + offerLag/2)
		inNewCall(&o, kill.Start.Add(time.Millisecond))
		// Killed so soon, the session had no "pending" answer: one would
		// say the call was offered.
		o.MCP = slices.DeleteFunc(o.MCP, func(r mcpRecord) bool { return r.Session == "s1" && r.Status == "pending" })
		r := analyse(o, idempotentTool)
		if i, ok := info(r, "no new session could rejoin a waiting call"); r.Violations != 0 || !ok || !strings.Contains(i.Examples[0], "before it offered") {
			t.Fatalf("a kill a moment after the call was asked: violations %+v, info %+v", r.Checks, r.Info)
		}
	})
	requireReported(t, func() observed { return withKillAt(withResent(clean())) }, []breakage{
		// Its session's only answer was lost at the kill: no "pending"
		// answer names the call, so newSessions has nothing to compare.
		{"a_request_whose_answer_was_lost_at_the_kill_became_a_new_call", "MCP calls waiting for a person when their gateway replica was killed, not rejoined from a new session", func(o *observed) {
			inNewCall(o, o.Faults[len(o.Faults)-1].Start.Add(time.Millisecond))
			o.MCP = slices.DeleteFunc(o.MCP, func(r mcpRecord) bool { return r.Session == "s1" && r.Status == "pending" })
		}},
	})
}

func TestAnalyseFindsEachMCPViolation(t *testing.T) {
	if r := analyse(withMCP(clean()), idempotentTool); r.Violations != 0 {
		t.Fatalf("a clean run with MCP requests has violations: %+v", r.Checks)
	}
	tests := []breakage{
		{"a_request_ran_twice_as_two_calls", "MCP requests executed more than once", func(o *observed) {
			again := o.Execs[len(o.Execs)-1]
			again.Call, again.Key = "m2", mcpAgent+".m2.1"
			o.Execs = append(o.Execs, again)
		}},
		{"a_request_was_recorded_as_two_calls_in_one_session", "MCP requests recorded as more calls than their sessions", func(o *observed) {
			for _, e := range o.Events {
				if e.Agent == mcpAgent && e.Type == subject.Requested {
					e.Seq, e.Call = 99, "m2"
					o.Events = append(o.Events, e)
					o.CH[99] = e.EventID
					break
				}
			}
		}},
		{"a_client_was_answered_another_outcome", "MCP answers that differ from the stream", func(o *observed) {
			o.MCP[1].Status = subject.Denied
		}},
		{"a_client_was_answered_a_call_the_stream_does_not_hold", "MCP answers that differ from the stream", func(o *observed) {
			o.MCP[1].CallID = "forged"
		}},
		{"a_request_was_answered_with_another_requests_call", "MCP answers that differ from the stream", func(o *observed) {
			o.MCP[1].N = 2
		}},
		{"a_request_sent_again_in_its_session_became_another_call", "MCP requests sent again in a session that did not rejoin", func(o *observed) {
			o.MCP[1].CallID = "m2"
		}},
	}
	requireReported(t, func() observed { return withMCP(clean()) }, tests)
}

// replicas is n replica views each holding exactly what o's ClickHouse holds.
func replicas(o *observed, n int) []replicaView {
	var out []replicaView
	for i := range n {
		v := replicaView{Name: fmt.Sprintf("ClickHouse replica r%d", i+1), CH: map[uint64]string{}, Verify: o.Verify}
		for seq, id := range o.CH {
			v.CH[seq] = id
		}
		out = append(out, v)
	}
	return out
}

func TestCleanReplicasAndAFailedOverKillAreNoViolation(t *testing.T) {
	o := clean()
	o.Replicas = replicas(&o, 2)
	o.Faults = append(o.Faults, faultResult{fault: fault{Kind: faultClickHouse}, Resolved: "clickhouse-r1", ReplicaKill: true, FailedOver: true, Recovered: true})
	if r := analyse(o, idempotentTool); r.Violations != 0 {
		t.Fatalf("clean replicas have violations: %+v", r.Checks)
	}
}

func TestLatencyQuantiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := latency(ds)
	if l.N != 100 || l.P50MS != 51 || l.P99MS != 100 || l.MaxMS != 100 {
		t.Fatalf("latency %+v", l)
	}
}

// A reply refused after its service reconnected is stale (the request came
// over the lost connection), not a permission the service lacks; any other
// refusal, and a refused reply before a reconnect or after a restart, is a
// violation. The lines are from a run's approval log.
func TestSplitViolationsKeepsStaleRepliesApart(t *testing.T) {
	const (
		start     = "=== approval-2 start 1 at 2026-11-22T23:55:12.189312021Z"
		reconnect = `time=2026-11-22T23:55:30.977Z level=INFO msg="reconnected to NATS" url=nats://127.0.0.1:44087`
		reply     = `time=2026-11-22T23:55:37.300Z level=ERROR msg="NATS async error" subject="" err="nats: permissions violation: Permissions Violation for Publish to \"_INBOX.EWpfS1hJ67wWI94kMk3VMM.W7WHkTtR\""`
		lacked    = `time=2026-11-22T23:56:10.488Z level=ERROR msg="NATS async error" subject="" err="nats: permissions violation: Permissions Violation for Publish to \"$JS.API.CONSUMER.UNPIN.AIRLOCK_EVENTS.audit\""`
	)
	tests := []struct {
		name              string
		log               []string
		violations, stale int
	}{
		{"reply_after_a_reconnect_is_stale", []string{start, reconnect, reply}, 0, 1},
		{"reply_before_any_reconnect_is_a_violation", []string{start, reply, reconnect}, 1, 0},
		{"a_restart_forgets_the_reconnect", []string{start, reconnect, "=== approval-2 start 2 at x", reply}, 1, 0},
		{"a_lacking_permission_is_a_violation_after_a_reconnect_too", []string{start, reconnect, lacked}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, s := splitViolations(strings.Join(tt.log, "\n"))
			if len(v) != tt.violations || len(s) != tt.stale {
				t.Fatalf("violations %q, stale %q; want %d and %d", v, s, tt.violations, tt.stale)
			}
		})
	}
}

func TestReviewersHoldMCPDecisionsAroundTheAskersKill(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name     string
		killAt   time.Time
		killed   time.Time
		want     func(time.Duration) bool
		wantText string
	}{
		{"no_gateway_kill", time.Time{}, time.Time{}, func(d time.Duration) bool { return d == 0 }, "none"},
		{"long_before_the_kill", now.Add(time.Minute), time.Time{}, func(d time.Duration) bool { return d == 0 }, "none"},
		{"just_before_the_kill", now.Add(askLead), time.Time{}, func(d time.Duration) bool { return d > 0 }, "a wait"},
		{"a_late_kill", now.Add(-10 * time.Second), time.Time{}, func(d time.Duration) bool { return d > 0 }, "a wait"},
		{"a_kill_that_never_came", now.Add(-2 * time.Minute), time.Time{}, func(d time.Duration) bool { return d == 0 }, "none"},
		{"just_after_the_kill", now.Add(-time.Second), now.Add(-time.Second), func(d time.Duration) bool { return d > holdAfterKill/2 }, "the rest of holdAfterKill"},
		{"long_after_the_kill", now.Add(-time.Minute), now.Add(-time.Minute), func(d time.Duration) bool { return d == 0 }, "none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &mcpLoad{killAt: tt.killAt}
			if !tt.killed.IsZero() {
				m.noteKill(tt.killed)
			}
			if got := m.holdDecision(now); !tt.want(got) {
				t.Fatalf("holdDecision = %s, want %s", got, tt.wantText)
			}
		})
	}
}

func TestAGatewayKillNamesItsReplica(t *testing.T) {
	for _, tt := range []struct {
		name        string
		f           fault
		wantReplica int
		wantOK      bool
	}{
		{"the_kill_of_gateway_2_is_replica_1", fault{Kind: faultKill, Target: "gateway-2"}, 1, true},
		{"the_kill_of_an_executor_is_not", fault{Kind: faultKill, Target: "executor-1"}, 0, false},
		{"another_fault_on_a_gateway_name_is_not", fault{Kind: faultPause, Target: "gateway-1"}, 0, false},
		{"a_target_without_a_replica_number_is_not", fault{Kind: faultKill, Target: "gateway-x"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if replica, ok := tt.f.gatewayKill(); replica != tt.wantReplica || ok != tt.wantOK {
				t.Fatalf("gatewayKill(%+v) = %d, %v; want %d, %v", tt.f, replica, ok, tt.wantReplica, tt.wantOK)
			}
		})
	}
}
