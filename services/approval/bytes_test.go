package approval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

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
	const bound = 4 << 20 // the least approval.max_bytes takes with limits.max_request_bytes 256 KiB
	w := newWorld(t, func(c *config.Config) { c.Approval.MaxBytes = bound })
	w.start()
	ctx := context.Background()
	kv, err := w.js.KeyValue(ctx, w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	held := func() uint64 {
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.Bytes
	}
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
