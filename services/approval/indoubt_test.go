package approval_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
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

// An agent can end calls in doubt at will (a webhook that answers 5xx to
// its arguments), and only a person closes a task: it keeps at most
// approval.max_in_doubt_per_agent open ones, past which its calls that end
// in doubt get none (counted), while another agent's still do. An answer
// frees the place at once, and the answered task leaves the bucket after
// approval.ended_retention.
func TestAnAgentKeepsOnlyItsShareOfOpenInDoubtTasks(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Approval.MaxInDoubtPerAgent = 2
		c.Approval.EndedRetention = time.Second
	})
	w.start()
	ctx := context.Background()
	exec := w.deps.Publisher("executor")
	failInDoubt := func(agent, call string) {
		t.Helper()
		ev := &airlockv1.Event{EventId: agent + "." + call + ".1.failed", AgentId: agent, CallId: call, Revision: 1,
			Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "tool_error", Outcome: "indeterminate", Message: "webhook answered 502"}}}
		if _, err := exec.Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	tasks := func(resolved bool) map[string]bool {
		out, err := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{IncludeResolved: resolved})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, task := range out.GetTasks() {
			got[task.GetAgentId()+"/"+task.GetCallId()] = true
		}
		return got
	}
	for _, c := range []string{"m1", "m2", "m3", "m4"} {
		failInDoubt("mallory", c)
	}
	failInDoubt("bot", "b1")
	testenv.Eventually(t, 10*time.Second, "bot's task, and two of mallory's calls counted untracked", func() bool {
		return tasks(false)["bot/b1"] && w.counter("airlock_in_doubt_untracked_total") == 2
	})
	// The consumer handles failures side by side: which two of mallory's
	// got a task is the order they were handled in.
	got := tasks(false)
	var hers []string
	for _, c := range []string{"m1", "m2", "m3", "m4"} {
		if got["mallory/"+c] {
			hers = append(hers, c)
		}
	}
	if len(got) != 3 || len(hers) != 2 {
		t.Fatalf("open tasks %v: want two of mallory's and bot's", got)
	}
	answered := hers[0]
	if _, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "mallory", CallId: answered, Happened: false,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}}); err != nil {
		t.Fatal(err)
	}
	failInDoubt("mallory", "m5")
	testenv.Eventually(t, 10*time.Second, "mallory's next call in doubt to get a task once one of hers is answered", func() bool {
		return tasks(false)["mallory/m5"]
	})
	testenv.Eventually(t, 10*time.Second, "the answered task to leave the bucket after the retention", func() bool {
		return !tasks(true)["mallory/"+answered]
	})
	if _, err := w.api.GetInDoubt(ctx, "mallory", answered, 0); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("the answered task after the retention: %v, want not_found", err)
	}
	if n := w.counter("airlock_in_doubt_untracked_total"); n != 2 {
		t.Errorf("untracked %v, want 2", n)
	}
}

// Every agent's tasks together stop at config.InDoubtRefusalMark of
// buckets.in_doubt_max_bytes: a call that ends in doubt then gets no task
// (counted bucket_full) and its failure is not handled again and again;
// the rest takes people's answers, and once answered tasks have left, the
// next call in doubt gets its task.
func TestAFullInDoubtBucketLeavesTheCallUntrackedAndGoesOn(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Buckets.InDoubtMaxBytes = config.MinInDoubtMaxBytes
		c.Approval.EndedRetention = time.Second
	})
	w.start()
	ctx := context.Background()
	exec := w.deps.Publisher("executor")
	long := strings.Repeat("x", 4000) // a message as long as a failure's may be: ~260 tasks fill 1 MiB
	const agents, each = 26, 12       // within each agent's share (256)
	for a := range agents {
		for c := range each {
			agent, call := fmt.Sprintf("a%02d", a), fmt.Sprintf("c%02d", c)
			ev := &airlockv1.Event{EventId: agent + "." + call + ".1.failed", AgentId: agent, CallId: call, Revision: 1,
				Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "tool_error", Outcome: "indeterminate", Message: long}}}
			if _, err := exec.Publish(ctx, ev, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	testenv.Eventually(t, 30*time.Second, "every failure handled: a task each until the bucket is full, the rest counted", func() bool {
		untracked := w.counter("airlock_in_doubt_untracked_total")
		return untracked > 0 && float64(countTasks(t, w))+untracked == agents*each
	})
	n := countTasks(t, w)
	if n < 200 || n >= agents*each {
		t.Fatalf("%d tasks stored of %d calls in doubt: want the bucket to have filled near its 1 MiB", n, agents*each)
	}
	// The rest past the mark is kept for answers: answering a task in the
	// full bucket is how it empties without an operator. Answered, it
	// leaves after the retention, and the next call in doubt gets a task.
	out, err := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{})
	if err != nil || len(out.GetTasks()) == 0 {
		t.Fatalf("list: %v %v", out, err)
	}
	for _, task := range out.GetTasks()[:4] {
		if _, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: task.GetAgentId(), CallId: task.GetCallId(), Happened: false,
			Note: strings.Repeat("n", 4000), Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}}); err != nil {
			t.Fatalf("answering %s/%s in the full bucket: %v", task.GetAgentId(), task.GetCallId(), err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the answered tasks to leave after the retention", func() bool {
		return countTasks(t, w) == n-4
	})
	ev := &airlockv1.Event{EventId: "late.l1.1.failed", AgentId: "late", CallId: "l1", Revision: 1,
		Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "tool_error", Outcome: "indeterminate", Message: "short"}}}
	if _, err := exec.Publish(ctx, ev, ""); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a task for a call in doubt once the bucket has room", func() bool {
		return storedTask(t, w, "late", "l1")
	})
}

// storedTask reports whether the in-doubt bucket holds the task of
// revision 1 of agent's call: GetInDoubt also answers, from the trail, for
// a call in doubt whose task is not stored.
func storedTask(t *testing.T, w *world, agent, call string) bool {
	t.Helper()
	kv, err := w.js.KeyValue(context.Background(), w.cfg.Buckets.InDoubt)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kv.Get(context.Background(), callref.Ref{Agent: agent, Call: call, Rev: 1}.Key())
	return err == nil
}

// countTasks counts the tasks in the in-doubt bucket.
func countTasks(t *testing.T, w *world) int {
	t.Helper()
	kv, err := w.js.KeyValue(context.Background(), w.cfg.Buckets.InDoubt)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	return n
}
