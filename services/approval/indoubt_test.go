package approval_test

import (
	"context"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A call that ended failed with outcome indeterminate gets one "did it
// happen?" task; an ordinary failure gets none. A person's answer is kept
// once (another answer is refused, the same one again changes nothing) and
// recorded as an outcome_resolved event with who gave it.
func TestACallThatEndedInDoubtAsksAPersonWhetherItHappened(t *testing.T) {
	w := newWorld(t)
	w.start()
	ctx := context.Background()
	w.pending(&airlockv1.ToolCall{CallId: "doubt", ThreadId: "th"}, nil)
	if _, err := w.approve("doubt", "alice"); err != nil {
		t.Fatal(err)
	}
	exec := w.deps.Publisher("executor")
	for _, ev := range []*airlockv1.Event{
		{EventId: "doubt.1.failed", AgentId: "bot", CallId: "doubt", Revision: 1,
			Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "indeterminate", Outcome: "indeterminate", Message: "the executor died while the tool ran"}}},
		{EventId: "plain.1.failed", AgentId: "bot", CallId: "plain", Revision: 1,
			Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "tool_error", Outcome: "error", Message: "no such file"}}},
	} {
		// Twice: a redelivered failure opens no second task.
		for range 2 {
			if _, err := exec.Publish(ctx, ev, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	var task *airlockv1.InDoubtTask
	testenv.Eventually(t, 10*time.Second, "the in-doubt task of bot/doubt", func() bool {
		out, err := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{})
		if err != nil || len(out.GetTasks()) == 0 {
			return false
		}
		task = out.GetTasks()[0]
		return true
	})
	if out, _ := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{}); len(out.GetTasks()) != 1 {
		t.Fatalf("tasks %v: want one, for bot/doubt only", out.GetTasks())
	}
	if task.GetCallId() != "doubt" || task.GetTool() != "write_file" || task.GetThreadId() != "th" || task.GetResolved() {
		t.Fatalf("task %v", task)
	}
	resolve := func(who string, happened bool, note string) (*airlockv1.ResolveInDoubtResponse, error) {
		return w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "bot", CallId: "doubt", Happened: happened, Note: note,
			Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: who}})
	}
	if _, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "bot", CallId: "plain", Happened: true,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}}); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("resolving a call that did not end in doubt: %v, want not_found", err)
	}
	if _, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "bot", CallId: "doubt", Happened: true,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"}}); apierr.CodeOf(err) != apierr.NotAuthorized {
		t.Errorf("an agent resolving its own call: %v, want not_authorized", err)
	}
	// Only who may decide the call may say whether it ran: dave (on call,
	// not among its approvers) is refused, and the attempt is recorded.
	if _, err := resolve("dave", false, "it did not"); apierr.CodeOf(err) != apierr.NotAuthorized {
		t.Errorf("a person who is not among the call's approvers resolving it: %v, want not_authorized", err)
	}
	testenv.WaitForEvent(t, w.deps.JS, subject.OfCall("bot", "doubt"), subject.UnauthorizedAttempt, 10*time.Second)
	out, err := resolve("bob", true, "the row is in the table")
	if err != nil || !out.GetChanged() || !out.GetTask().GetResolved() {
		t.Fatalf("resolve: %v %v", out, err)
	}
	if again, err := resolve("bob", true, "the row is in the table"); err != nil || again.GetChanged() {
		t.Errorf("the same answer again: %v %v, want no change", again, err)
	}
	if _, err := resolve("carol", false, "no"); apierr.CodeOf(err) != apierr.AlreadyDecided {
		t.Errorf("another answer after the first: %v, want already_decided", err)
	}
	evs := w.events("bot", "doubt", subject.OutcomeResolved)
	if len(evs) != 1 || !evs[0].GetOutcomeResolved().GetHappened() || evs[0].GetActor().GetId() != "bob" ||
		evs[0].GetOutcomeResolved().GetNote() != "the row is in the table" {
		t.Fatalf("outcome_resolved events %v: want one, by bob, saying it happened with the note", evs)
	}
	if out, _ := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{}); len(out.GetTasks()) != 0 {
		t.Errorf("open tasks after the answer: %v", out.GetTasks())
	}
	if out, _ := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{IncludeResolved: true}); len(out.GetTasks()) != 1 {
		t.Errorf("tasks with the resolved ones: %v", out.GetTasks())
	}
}
