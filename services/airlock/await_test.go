package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// TestAnEndedCallIsToldInThePastTense: what `airlock await` says of a call
// that had ended before it looked: how it ended, who decided, and when —
// never that something runs now.
func TestAnEndedCallIsToldInThePastTense(t *testing.T) {
	at := time.Date(2026, 11, 27, 18, 44, 2, 0, time.UTC)
	now := at.Add(3*time.Minute + 12*time.Second)
	for _, tc := range []struct {
		name string
		out  airlock.Outcome
		want string
	}{
		{"a_completed_call_says_the_policy_allowed_it",
			airlock.Outcome{Revision: 1, Status: airlock.StatusCompleted, DecidedBy: "policy", At: at},
			"call bot/c1 revision 1 already ended at 2026-11-27 18:44:02 UTC (3m12s ago): completed: the tool ran; it was allowed by the policy"},
		{"an_edited_call_says_which_arguments_ran",
			airlock.Outcome{Revision: 2, Status: airlock.StatusCompleted, DecidedBy: "admin", ArgumentsEdited: true, Arguments: json.RawMessage(`{"path":"c.txt"}`), At: at},
			"call bot/c1 revision 2 already ended at 2026-11-27 18:44:02 UTC (3m12s ago): completed: the tool ran; it was approved by admin with EDITED arguments, which ran:\n  {\"path\":\"c.txt\"}"},
		{"an_indeterminate_failure_says_the_tool_may_have_run",
			airlock.Outcome{Revision: 1, Status: airlock.StatusFailed, Reason: "executor_lost", FailureOutcome: calls.FailureIndeterminate, DecidedBy: "alice", At: at},
			"failed, indeterminate (the tool may have run): executor_lost; it was approved by alice"},
		{"a_denied_call_gives_the_policys_reason", airlock.Outcome{Revision: 1, Status: airlock.StatusDenied, Reason: "no deletes", At: at}, "denied by the policy: no deletes"},
		{"an_expired_call_says_nobody_decided", airlock.Outcome{Revision: 1, Status: airlock.StatusExpired, At: at}, "expired: nobody decided it before its deadline"},
		{"a_canceled_call_says_who_and_why", airlock.Outcome{Revision: 1, Status: airlock.StatusCanceled, DecidedBy: "bob", Reason: "not needed", At: at}, "canceled by bob: not needed"},
		{"a_call_sent_back_says_who_asked_for_changes", airlock.Outcome{Revision: 1, Status: airlock.StatusChangesRequested, DecidedBy: "carol", At: at}, "changes requested by carol"},
		{"a_reason_an_agent_wrote_is_escaped", airlock.Outcome{Revision: 1, Status: airlock.StatusRejected, DecidedBy: "dan", Reason: "\x1b]0;pwned\x07", At: at}, `rejected by dan: \u001b]0;pwned\u0007`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := endedText("bot/c1", tc.out, now)
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "already ended at 2026-11-27 18:44:02 UTC") {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			for _, present := range []string{"runs it now", "waiting", "may still"} {
				if strings.Contains(got, present) {
					t.Errorf("%q speaks of the call as going on (%q)", got, present)
				}
			}
		})
	}
}

// TestATerminalIsToldOfAToolTheRegistryLacks: the sentence `airlock call`
// and `await` print while a call to a tool the registry lacks waits, and
// the silence when the registry has it or could not list its server.
func TestATerminalIsToldOfAToolTheRegistryLacks(t *testing.T) {
	list := &airlockv1.ToolsListResponse{
		Tools: []*airlockv1.UpstreamTool{
			{Server: "demo", Tool: "echo"}, {Server: "demo", Tool: "write_file"}, {Server: "fs", Tool: "read_file"},
		},
		Problems: []*airlockv1.ServerProblem{{Server: "slow", Message: "timed out"}},
	}
	for _, tc := range []struct {
		name, server, tool, want string
	}{
		{"a_tool_of_the_registry_is_no_news", "demo", "echo", ""},
		{"a_tool_its_server_lacks_names_the_servers_tools", "demo", "nope", "the tool registry has no tool demo__nope (server demo has echo, write_file): even approved, this call cannot run, it would end failed (unknown_tool)"},
		{"a_server_the_registry_lacks_names_its_servers", "zzz", "frobnicate", "the tool registry has no tool zzz__frobnicate (its servers are demo, fs)"},
		{"a_server_that_could_not_be_listed_may_have_it", "slow", "thing", ""},
		{"a_name_an_agent_wrote_is_escaped", "demo", "x\u202ey", `no tool demo__x\u202ey`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := missingToolText(list, tc.server, tc.tool)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTheRegistryCheckNeverHoldsProgress: `airlock call` and `await` ask
// the registry whether a call's tool exists only once a person is asked,
// once however often that step is seen, and beside the steps: telling a
// step never waits for the answer (AwaitProgress's progress must not
// block). The answer is told when it comes while the call waits, and not
// at all once the call has ended.
func TestTheRegistryCheckNeverHoldsProgress(t *testing.T) {
	const warning = "the tool registry has no tool demo__nope"
	asked := airlock.Progress{Type: subject.ApprovalRequested, Revision: 1, Decision: &airlockv1.Decision{Reason: "no rule matches"},
		Call: &airlockv1.ToolCall{Server: "demo", Tool: "nope"}}
	for _, tc := range []struct {
		name      string
		steps     []airlock.Progress
		ended     bool // the call ends before the registry answers
		wantAsks  int32
		wantWarns bool
	}{
		{name: "an_allowed_call_never_lists_the_registry",
			steps: []airlock.Progress{{Type: subject.Allowed}}},
		{name: "a_call_that_waits_for_a_person_is_told_the_answer_after_its_step",
			steps: []airlock.Progress{asked}, wantAsks: 1, wantWarns: true},
		{name: "a_step_seen_twice_lists_the_registry_once",
			steps: []airlock.Progress{asked, asked, {Type: subject.Approved, By: "alice"}}, wantAsks: 1, wantWarns: true},
		{name: "an_answer_after_the_call_ended_is_not_told",
			steps: []airlock.Progress{asked}, ended: true, wantAsks: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				asks     atomic.Int32
				answered atomic.Bool
			)
			release := make(chan struct{})
			check := func(ctx context.Context, call *airlockv1.ToolCall) string {
				asks.Add(1)
				defer answered.Store(true)
				select {
				case <-release:
				case <-ctx.Done():
				case <-time.After(10 * time.Second):
					// Only when progress waits for this answer: release
					// comes after progress returns. Fails below, never hangs.
				}
				return warning + " (server demo has echo)"
			}
			var log strings.Builder
			teller := newProgressTeller(context.Background(), &log, config.Default(), "bot", "u1", check)
			for _, p := range tc.steps {
				teller.progress(p)
				if answered.Load() {
					t.Fatalf("telling step %s waited for the registry's answer", p.Type)
				}
			}
			if !tc.ended {
				close(release)
			}
			teller.stop(tc.ended)
			if got := asks.Load(); got != tc.wantAsks {
				t.Errorf("the registry was asked %d times, want %d", got, tc.wantAsks)
			}
			out := log.String()
			if strings.Contains(out, warning) != tc.wantWarns {
				t.Errorf("told the registry's answer: %v, want %v:\n%s", strings.Contains(out, warning), tc.wantWarns, out)
			}
			if tc.wantWarns && strings.Index(out, warning) < strings.Index(out, "may decide") {
				t.Errorf("the answer came before the step it is about:\n%s", out)
			}
		})
	}
}
