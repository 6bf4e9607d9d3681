package approval_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// The approvals bucket every agent shares is bounded (approval.max_bytes):
// an agent that ends its calls as fast as it may ask (each record holds
// the call's arguments, and stays approval.ended_retention) brings it to
// its refusal mark, past which a new call is canceled at once with a
// reason the agent reads and nothing is written to the bucket, while a
// decision on a call already waiting (another agent's) is still stored.
func TestAFullApprovalsBucketRefusesNewCallsButTakesDecisionsOnWaitingOnes(t *testing.T) {
	// The least approval.max_bytes takes with limits.max_request_bytes 256
	// KiB, all of it bot's share: the bucket's own mark is what is tested.
	const bound = 4 << 20
	w := newWorld(t, func(c *config.Config) { c.Approval.MaxBytes, c.Approval.MaxBytesPerAgent = bound, bound })
	w.start()
	ctx := context.Background()
	kv, held := approvalsBucket(t, w)
	w.pending(&airlockv1.ToolCall{CallId: "waiting", AgentId: "victim"}, nil)

	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/x", "pad": strings.Repeat("x", 200<<10)})
	refusalMark := config.ApprovalRefusalMark
	mark := uint64(refusalMark * bound)
	ended := 0
	for held() < mark {
		if ended > 2*bound/(200<<10) {
			t.Fatalf("the bucket holds %d bytes after %d ended calls of 200 KiB; want it past %d", held(), ended, mark)
		}
		id := "flood" + string(rune('a'+ended/26)) + string(rune('a'+ended%26))
		w.pending(&airlockv1.ToolCall{CallId: id, AgentId: "bot", Arguments: args}, nil)
		if err := bot.Cancel(ctx, id, "never mind"); err != nil {
			t.Fatal(err)
		}
		w.waitAgentState("bot", id, 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
		ended++
	}
	before := held()

	w.ask(&airlockv1.ToolCall{CallId: "late", AgentId: "bot", Arguments: args}, nil)
	out := await(t, w, "bot", "late")
	if out.Status != airlock.StatusCanceled || !strings.Contains(out.Reason, "approval.max_bytes") || !strings.Contains(out.Reason, "submit it again later") {
		t.Fatalf("a new call past the mark: %s %q; want it canceled, naming approval.max_bytes and saying to submit it again later", out.Status, out.Reason)
	}
	if _, err := kv.Get(ctx, "bot.late.1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the refused call's record: %v; want none written", err)
	}
	if after := held(); after != before {
		t.Fatalf("the bucket grew from %d to %d bytes with a refused call", before, after)
	}
	if g := w.gauge("airlock_approvals_bucket_fill"); g < config.ApprovalRefusalMark {
		t.Fatalf("airlock_approvals_bucket_fill is %v past the mark", g)
	}

	if _, err := w.api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "victim", CallId: "waiting", Principal: human("alice"),
		Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Reason: strings.Repeat("checked ", 400)}); err != nil {
		t.Fatalf("approving a call that waited before the mark: %v", err)
	}
	w.waitAgentState("victim", "waiting", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
}

// One agent's records may hold only its share of the approvals bucket
// (approval.max_bytes_per_agent; unset, a 4 MiB bucket gives each agent
// 1 MiB, four of the largest call): an agent that asks with large
// arguments and ends each call at once reaches its share long before the
// bucket's refusal mark, and then only its own new calls are refused,
// naming its share, with nothing written; another agent's new call is
// still put to reviewers and approved. (Without the share, bot brings the
// bucket past its mark and victim's call is refused as well.)
func TestAnAgentFloodingTheApprovalsBucketIsRefusedAtItsShareWhileOthersStillAsk(t *testing.T) {
	const bound = 4 << 20
	w := newWorld(t, func(c *config.Config) { c.Approval.MaxBytes = bound })
	w.start()
	ctx := context.Background()
	kv, held := approvalsBucket(t, w)
	// asked says whether the call waits for a person (false: it was
	// canceled, and the reason is the agent's to read).
	asked := func(agent, id string) bool {
		t.Helper()
		pending := false
		testenv.Eventually(t, 10*time.Second, "call "+agent+"/"+id+" to wait for a person or be canceled", func() bool {
			if r, err := w.api.Get(ctx, agent, id, 0); err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
				pending = true
				return true
			}
			return len(w.events(agent, id, "canceled")) > 0
		})
		return pending
	}

	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/x", "pad": strings.Repeat("x", 200<<10)})
	refused := ""
	for i := 0; refused == ""; i++ {
		if i > 2*bound/(200<<10) {
			t.Fatalf("bot asked %d calls of 200 KiB and none was refused; the bucket holds %d bytes", i, held())
		}
		id := fmt.Sprintf("flood%02d", i)
		w.ask(&airlockv1.ToolCall{CallId: id, AgentId: "bot", Arguments: args}, nil)
		if !asked("bot", id) {
			refused = id
			break
		}
		if err := bot.Cancel(ctx, id, "never mind"); err != nil {
			t.Fatal(err)
		}
		w.waitAgentState("bot", id, 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
	}
	out := await(t, w, "bot", refused)
	if !strings.Contains(out.Reason, "agent bot holds") || !strings.Contains(out.Reason, "approval.max_bytes_per_agent") || !strings.Contains(out.Reason, "approval.ended_retention") {
		t.Errorf("bot's call %s past its share: %s %q; want it canceled naming bot's share, approval.max_bytes_per_agent and approval.ended_retention", refused, out.Status, out.Reason)
	}
	if _, err := kv.Get(ctx, "bot."+refused+".1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the refused call's record: %v; want none written", err)
	}

	w.ask(&airlockv1.ToolCall{CallId: "own", AgentId: "victim", Arguments: args}, nil)
	if !asked("victim", "own") {
		t.Fatalf("victim's new call, once bot was refused: %q; want it put to reviewers (the bucket holds %d of %d bytes)", await(t, w, "victim", "own").Reason, held(), bound)
	}
	if _, err := w.api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "victim", CallId: "own", Principal: human("alice"),
		Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Reason: "checked"}); err != nil {
		t.Fatalf("approving victim's call: %v", err)
	}
	w.waitAgentState("victim", "own", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
}

// approvalsBucket is w's approvals bucket, and how many bytes it holds.
func approvalsBucket(t *testing.T, w *world) (jetstream.KeyValue, func() uint64) {
	t.Helper()
	ctx := context.Background()
	kv, err := w.js.KeyValue(ctx, w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	return kv, func() uint64 {
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.Bytes
	}
}
