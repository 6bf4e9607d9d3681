package approval_test

// The bounds on in-doubt tasks against what an agent or an unlucky
// operator does (found by a review of 1016c65; each failed there).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// failInDoubtEv is a failed event with outcome indeterminate, as the
// executor writes for a webhook answering 5xx.
func failInDoubtEv(agent, call, msg string) *airlockv1.Event {
	return &airlockv1.Event{EventId: agent + "." + call + ".1.failed", AgentId: agent, CallId: call, Revision: 1,
		Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "tool_error", Outcome: "indeterminate", Message: msg}}}
}

// One agent at its share (256 open tasks, the default) must not hide
// another agent's task from the lists people answer from (console
// /in-doubt, `airlock approvals in-doubt`, REST /api/v1/in-doubt), which
// show open tasks oldest first, at most 200, with no filter or paging: the
// agents take turns in it.
func TestOneAgentAtItsShareDoesNotHideAnothersTaskFromTheList(t *testing.T) {
	w := newWorld(t)
	w.start()
	ctx := context.Background()
	exec := w.deps.Publisher("executor")
	most := w.cfg.Approval.MaxInDoubtPerAgent
	for c := range most {
		if _, err := exec.Publish(ctx, failInDoubtEv("mallory", fmt.Sprintf("m%03d", c), "webhook answered 502"), ""); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 60*time.Second, "mallory's share of tasks", func() bool { return countTasks(t, w) == most })
	if _, err := exec.Publish(ctx, failInDoubtEv("bot", "b1", "webhook answered 502"), ""); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "bot's task", func() bool { return storedTask(t, w, "bot", "b1") })
	out, err := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range out.GetTasks() {
		if task.GetAgentId() == "bot" {
			return
		}
	}
	t.Fatalf("the list shows %d tasks (truncated %v), none of them bot's: mallory's %d open tasks (approval.max_in_doubt_per_agent) hide every other agent's behind the list's 200",
		len(out.GetTasks()), out.GetTruncated(), most)
}

// A call that ended in doubt past its agent's share gets no task, and its
// agent's AwaitResolution waited for an answer no one could give: the
// service said "no one was asked" and refused every answer. Asked about
// such a call it now shows a task made from the trail, which a reviewer
// answers like any other (stored answered; no agent's share applies to a
// person's answer), and the agent hears the answer.
func TestACallInDoubtPastABoundCanStillBeAnsweredAndItsAgentHearsIt(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.MaxInDoubtPerAgent = 1 })
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec := w.deps.Publisher("executor")
	for _, c := range []string{"m1", "m2"} {
		if _, err := exec.Publish(ctx, failInDoubtEv("mallory", c, "webhook answered 502"), ""); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "one task, one untracked", func() bool {
		return countTasks(t, w) == 1 && w.counter("airlock_in_doubt_untracked_total") == 1
	})
	untracked := "m2"
	if open, err := w.api.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{}); err == nil && len(open.GetTasks()) == 1 && open.GetTasks()[0].GetCallId() == "m2" {
		untracked = "m1"
	}
	got, err := w.api.GetInDoubt(ctx, "mallory", untracked, 0)
	if err != nil {
		t.Fatalf("asked about mallory/%s, which ended in doubt past approval.max_in_doubt_per_agent: %v, want its task", untracked, err)
	}
	if got.GetResolved() || got.GetRevision() != 1 || got.GetMessage() != "webhook answered 502" {
		t.Fatalf("the task shown for mallory/%s: %v", untracked, got)
	}
	if n := countTasks(t, w); n != 1 {
		t.Fatalf("showing the task stored it: %d tasks", n)
	}

	nc, _ := testenv.Connect(t, w.nats.URL())
	mallory, err := airlock.New(nc, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan airlock.Resolution, 1)
	go func() {
		r, err := mallory.AwaitResolution(ctx, untracked, 0)
		if err != nil {
			t.Errorf("the agent's AwaitResolution: %v", err)
		}
		heard <- r
	}()
	bob := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}
	resp, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "mallory", CallId: untracked, Happened: false, Note: "nothing in the target", Principal: bob})
	if err != nil || !resp.GetChanged() {
		t.Fatalf("answering mallory/%s: changed=%v, %v", untracked, resp.GetChanged(), err)
	}
	if r := <-heard; r.Happened || r.By != "bob" || r.Note != "nothing in the target" {
		t.Fatalf("the agent heard %+v, want bob's no", r)
	}
	if n := countTasks(t, w); n != 2 {
		t.Fatalf("%d tasks after the answer, want the answered one stored beside the open one", n)
	}
	if resp, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "mallory", CallId: untracked, Happened: false, Note: "nothing in the target", Principal: bob}); err != nil || resp.GetChanged() {
		t.Fatalf("bob repeating his answer: changed=%v, %v", resp.GetChanged(), err)
	}
	carol := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "carol"}
	if _, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "mallory", CallId: untracked, Happened: true, Principal: carol}); apierr.CodeOf(err) != apierr.AlreadyDecided {
		t.Fatalf("carol answering otherwise after bob: %v, want already_decided", err)
	}
	if n := len(w.events("mallory", untracked, subject.OutcomeResolved)); n != 1 {
		t.Fatalf("%d outcome_resolved events, want 1", n)
	}
	if _, err := w.api.GetInDoubt(ctx, "mallory", "never-failed", 0); apierr.CodeOf(err) != apierr.NotFound || !strings.Contains(err.Error(), "did not end in doubt") {
		t.Fatalf("a call that never ended in doubt: %v", err)
	}
}

// With several replicas each counts an agent's open tasks and creates one
// at a time: only replicas side by side can each admit one past the share.
func TestReplicasPassAnAgentsShareByAtMostOneEach(t *testing.T) {
	const most, replicas, calls = 3, 3, 60
	w := newWorld(t, func(c *config.Config) { c.Approval.MaxInDoubtPerAgent = most })
	for range replicas {
		w.start()
	}
	ctx := context.Background()
	exec := w.deps.Publisher("executor")
	for c := range calls {
		if _, err := exec.Publish(ctx, failInDoubtEv("mallory", fmt.Sprintf("m%03d", c), "webhook answered 502"), ""); err != nil {
			t.Fatal(err)
		}
	}
	// The counter is per replica: wait until every failure is handled.
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 60*time.Second)
	n := countTasks(t, w)
	if n < most || n > most+replicas-1 {
		t.Fatalf("mallory has %d tasks with %d replicas and a share of %d: want the share, and at most one past it per replica", n, replicas, most)
	}
	t.Logf("mallory has %d tasks (share %d, %d replicas)", n, most, replicas)
}

// An operator upgrades a data dir whose in-doubt bucket was created before
// 1016c65 (History 5, no per-key TTL, no byte bound) and holds answered
// tasks (say, the flood this change is about, which people answered).
// After provisioning and a retention, the answered tasks must leave as the
// ones answered after the upgrade do, and the bucket take its bound.
func TestAnsweredTasksOfAnUpgradedBucketLeave(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	cfg := testenv.Config(n.URL())
	cfg.Buckets.InDoubtMaxBytes = config.MinInDoubtMaxBytes
	var older jetstream.KeyValueConfig
	for _, kvc := range bus.BucketConfigs(cfg) {
		if kvc.Bucket == cfg.Buckets.InDoubt {
			older = kvc
		}
	}
	older.MaxBytes, older.LimitMarkerTTL, older.History = 0, 0, 5
	kv, err := js.CreateKeyValue(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("z", 4000)
	answered := timestamppb.New(time.Now().Add(-30 * 24 * time.Hour))
	const old = 300 // ~1.2 MiB of tasks answered a month ago
	for c := range old {
		task := &airlockv1.InDoubtTask{AgentId: "mallory", CallId: fmt.Sprintf("m%03d", c), Revision: 1, Reason: "tool_error", Message: long,
			FailedAt: answered, Resolved: true, ResolvedAt: answered, ResolvedBy: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}}
		data, err := proto.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, fmt.Sprintf("mallory.m%03d.1", c), data); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorldOn(t, n, func(c *config.Config) {
		c.Buckets.InDoubtMaxBytes = config.MinInDoubtMaxBytes
		c.Approval.EndedRetention = time.Second
	})
	w.start()
	testenv.Eventually(t, 30*time.Second, "the tasks answered a month ago to leave the bucket", func() bool { return countTasks(t, w) == 0 })
	if _, err := bus.Provision(ctx, js, w.cfg); err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	si := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if left := countTasks(t, w); left > 0 || si.Config.MaxBytes != w.cfg.Buckets.InDoubtMaxBytes {
		t.Fatalf("after the upgrade, %d of %d tasks answered a month ago are still in the bucket (%d bytes), whose byte bound is %d, not buckets.in_doubt_max_bytes %d: "+
			"they never leave, and the bound is never applied (`airlock provision` keeps waiting for it to hold less)",
			left, old, si.State.Bytes, si.Config.MaxBytes, w.cfg.Buckets.InDoubtMaxBytes)
	}
}

// The approval consumer delivers all (DeliverAllPolicy): when it is created
// again (deleted by an operator or lost with a node; consume.Run ends the
// process and its supervisor starts it afresh), every failed event the
// events stream keeps (stream.max_age, 90 days) is handled again. Before
// 1016c65 an answered task stayed and the replayed failure found it; now it
// has left after approval.ended_retention (7 days), and a replay must
// still not ask people again about a call they answered.
func TestAReplayedFailureDoesNotAskAgainAboutAnAnsweredCall(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = time.Second })
	w.start()
	ctx := context.Background()
	exec := w.deps.Publisher("executor")
	if _, err := exec.Publish(ctx, failInDoubtEv("bot", "c1", "webhook answered 502"), ""); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "bot/c1's task", func() bool { return storedTask(t, w, "bot", "c1") })
	if _, err := w.api.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: "bot", CallId: "c1", Happened: false, Note: "not in the ledger",
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the answered task to leave after the retention", func() bool {
		_, err := w.api.GetInDoubt(ctx, "bot", "c1", 0)
		return apierr.CodeOf(err) == apierr.NotFound
	})
	w.stopAll()
	if err := w.js.DeleteConsumer(ctx, w.cfg.Stream.Name, approval.Durable); err != nil {
		t.Fatal(err)
	}
	w.start()
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 30*time.Second)
	if task, err := w.api.GetInDoubt(ctx, "bot", "c1", 0); err == nil {
		t.Fatalf("after the consumer was created again, bot/c1, which bob answered (it did not happen), is open again: %v", task)
	}
}
