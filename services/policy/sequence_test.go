package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestEachRevisionIsRecordedOnce submits requests the way a confused or
// hostile agent might, to two policy replicas, and checks what the events
// stream records for each call: a revision begins once, a call id cannot be
// reused, and a revision can follow only a request for changes.
// It runs on a single server and on an R3 stream, where an auto-allowed
// request and its decision are one atomic batch.
func TestEachRevisionIsRecordedOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  func(t *testing.T) config.Config
	}{
		{"single_server", func(t *testing.T) config.Config { return testenv.Config(testenv.StartNATS(t).URL()) }},
		{"replicated_stream", func(t *testing.T) config.Config { return testenv.StartCluster(t, 3).Config }},
	} {
		t.Run(tt.name, func(t *testing.T) { eachRevisionIsRecordedOnce(t, tt.cfg(t)) })
	}
}

func eachRevisionIsRecordedOnce(t *testing.T, cfg config.Config) {
	_, deps := replica(t, cfg)
	replica(t, cfg)
	call := func(id string, rev uint32, path string) *airlockv1.ToolCall {
		args, _ := structpb.NewStruct(map[string]any{"path": path, "content": "x"})
		return &airlockv1.ToolCall{AgentId: "bot", CallId: id, Revision: rev, Server: "demo", Tool: "write_file", Arguments: args}
	}
	// echo is auto-allowed: its request and decision can be one batch.
	echo := func(id, text string) *airlockv1.ToolCall {
		args, _ := structpb.NewStruct(map[string]any{"text": text})
		return &airlockv1.ToolCall{AgentId: "bot", CallId: id, Revision: 1, Server: "demo", Tool: "echo", Arguments: args}
	}
	// requestChanges records, as the approval service does, a reviewer's
	// request for changes on revision 1 of call id.
	requestChanges := func(id string) {
		t.Helper()
		cr := &airlockv1.Event{EventId: "bot." + id + ".1.changes_requested", AgentId: "bot", CallId: id, Revision: 1,
			Body: &airlockv1.Event_ChangesRequested{ChangesRequested: &airlockv1.ChangesRequested{Feedback: "use /tmp/b"}}}
		if _, err := bus.NewPublisher(deps.JS, "airlock/approval").Publish(context.Background(), cr, ""); err != nil {
			t.Fatal(err)
		}
	}
	types := func(id string) []string { return testenv.SubjectTypes(t, deps.JS, subject.OfCall("bot", id)) }
	waitTypes := func(id string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, id+": "+strings.Join(want, " "), func() bool {
			return strings.Join(types(id), " ") == strings.Join(want, " ")
		})
	}
	settle := func(id string, want ...string) {
		t.Helper()
		// Give the replicas the chance to do something wrong (every
		// request handled, by either replica), then check nothing more was
		// stored. A later request's answer would not do: the replicas
		// handle an agent's requests concurrently.
		waitTypes(id, want...)
		testenv.Settled(t, deps.JS, cfg.Intake.Name, policy.Durable, 10*time.Second)
		if got := strings.Join(types(id), " "); got != strings.Join(want, " ") {
			t.Fatalf("%s: events %s, want %s", id, got, strings.Join(want, " "))
		}
	}

	t.Run("the_same_request_published_three_times_is_recorded_once", func(t *testing.T) {
		for range 3 {
			publishRequest(t, deps.JS, call("same", 1, "/tmp/a"))
		}
		settle("same", "requested", "approval_requested")
	})
	t.Run("an_allowed_request_published_three_times_is_recorded_and_decided_once", func(t *testing.T) {
		for range 3 {
			publishRequest(t, deps.JS, echo("same-echo", "hi"))
		}
		settle("same-echo", "requested", "allowed")
	})
	// A request naming a revision already recorded, with other content, is
	// refused as an unauthorized_attempt (once per revision however often
	// it is sent), never as an invalid naming that revision: every waiter
	// took that for the end of a revision that went on, and the audit kept
	// the other content beside the recorded one.
	t.Run("a_reused_allowed_call_id_with_other_arguments_is_refused_and_not_decided_again", func(t *testing.T) {
		publishRequest(t, deps.JS, echo("reuse-echo", "hi"))
		waitTypes("reuse-echo", "requested", "allowed")
		publishRequest(t, deps.JS, echo("reuse-echo", "other"))
		settle("reuse-echo", "requested", "allowed", "unauthorized_attempt")
	})
	t.Run("a_reused_call_id_with_other_arguments_is_refused_once_and_ends_nothing", func(t *testing.T) {
		publishRequest(t, deps.JS, call("reuse", 1, "/tmp/a"))
		waitTypes("reuse", "requested", "approval_requested")
		for _, path := range []string{"/etc/passwd", "/etc/shadow", "/etc/passwd"} {
			publishRequest(t, deps.JS, call("reuse", 1, path))
		}
		settle("reuse", "requested", "approval_requested", "unauthorized_attempt")
		ev := testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", "reuse"), subject.UnauthorizedAttempt, time.Second)
		if why := ev.GetUnauthorizedAttempt().GetWhy(); ev.GetRevision() != 1 || !strings.Contains(why, "already submitted with other content") {
			t.Fatalf("refusal of revision %d: %q; want revision 1, saying it was already submitted with other content", ev.GetRevision(), why)
		}
	})
	t.Run("an_older_revision_is_refused_and_ends_nothing", func(t *testing.T) {
		publishRequest(t, deps.JS, call("older", 1, "/tmp/a"))
		waitTypes("older", "requested", "approval_requested")
		requestChanges("older")
		publishRequest(t, deps.JS, call("older", 2, "/tmp/b"))
		waitTypes("older", "requested", "approval_requested", "changes_requested", "requested", "approval_requested")
		publishRequest(t, deps.JS, call("older", 1, "/etc/passwd"))
		settle("older", "requested", "approval_requested", "changes_requested", "requested", "approval_requested", "unauthorized_attempt")
	})
	t.Run("a_revision_without_a_request_for_changes_is_invalid", func(t *testing.T) {
		publishRequest(t, deps.JS, call("rev", 1, "/tmp/a"))
		waitTypes("rev", "requested", "approval_requested")
		publishRequest(t, deps.JS, call("rev", 2, "/tmp/b"))
		waitTypes("rev", "requested", "approval_requested", "invalid")
		publishRequest(t, deps.JS, call("norev1", 2, "/tmp/b"))
		waitTypes("norev1", "invalid")
	})
	t.Run("a_revision_after_a_request_for_changes_is_recorded", func(t *testing.T) {
		publishRequest(t, deps.JS, call("changes", 1, "/tmp/a"))
		waitTypes("changes", "requested", "approval_requested")
		requestChanges("changes")
		publishRequest(t, deps.JS, call("changes", 2, "/tmp/b"))
		publishRequest(t, deps.JS, call("changes", 2, "/tmp/b"))
		settle("changes", "requested", "approval_requested", "changes_requested", "requested", "approval_requested")
	})
	// An agent that withdraws a call whose request still waits in the
	// intake (the policy behind) gets a `canceled` event of the revision
	// the policy would record next, appended by the approval service
	// (withdrawUndecided). The policy, reaching the request, records and
	// decides nothing: an allowed call would have run after its agent, an
	// MCP client that gave up or a hook that told its agent no, withdrew it.
	withdraw := func(id string, rev uint32) {
		t.Helper()
		ev := &airlockv1.Event{EventId: fmt.Sprintf("bot.%s.%d.canceled", id, rev), AgentId: "bot", CallId: id, Revision: rev,
			Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"},
			Body:  &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{Reason: "the client gave up"}}}
		last, err := bus.LastStoredLeader(context.Background(), deps.NC, cfg.Stream.Name, subject.OfCall("bot", id))
		if err != nil {
			t.Fatal(err)
		}
		var after uint64
		if last != nil {
			after = bus.StoredSeq(last)
		}
		if _, err := bus.NewPublisher(deps.JS, "airlock/approval").PublishAfter(context.Background(), ev, "", subject.OfCall("bot", id), after); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("an_allowed_call_withdrawn_before_the_policy_reached_it_is_not_decided", func(t *testing.T) {
		withdraw("gone-echo", 1)
		for range 2 {
			publishRequest(t, deps.JS, echo("gone-echo", "hi"))
		}
		settle("gone-echo", "canceled")
	})
	t.Run("a_call_withdrawn_before_the_policy_reached_it_is_not_put_to_people", func(t *testing.T) {
		withdraw("gone", 1)
		publishRequest(t, deps.JS, call("gone", 1, "/tmp/a"))
		settle("gone", "canceled")
	})
	t.Run("a_revision_withdrawn_before_the_policy_reached_it_is_not_decided", func(t *testing.T) {
		publishRequest(t, deps.JS, call("gone2", 1, "/tmp/a"))
		waitTypes("gone2", "requested", "approval_requested")
		requestChanges("gone2")
		withdraw("gone2", 2)
		publishRequest(t, deps.JS, call("gone2", 2, "/tmp/b"))
		settle("gone2", "requested", "approval_requested", "changes_requested", "canceled")
	})
	t.Run("a_withdrawal_of_another_revision_does_not_stop_this_one", func(t *testing.T) {
		withdraw("other-rev", 2)
		publishRequest(t, deps.JS, echo("other-rev", "hi"))
		settle("other-rev", "canceled", "requested", "allowed")
	})
}
