package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestProvisionIsIdempotentAndAppliesChanges(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	cfg := testenv.Config(n.URL())
	ctx := context.Background()

	first, err := bus.Provision(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 8 {
		t.Fatalf("first run should create the events and intake streams and 6 buckets, did %v", first)
	}
	second, err := bus.Provision(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 0 {
		t.Fatalf("second run with the same config changed %v", second)
	}

	cfg.Stream.MaxAge = 48 * time.Hour
	cfg.Buckets.History = 10
	third, err := bus.Provision(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != 8 {
		t.Fatalf("changed max age (both streams) and history (6 buckets) should update 8 things, did %v", third)
	}
	s, err := js.Stream(ctx, cfg.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxAge; got != 48*time.Hour {
		t.Fatalf("max age is %s after provisioning 48h", got)
	}
	kv, err := js.KeyValue(ctx, cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := kv.Status(ctx)
	if st.History() != 10 {
		t.Fatalf("bucket history is %d after provisioning 10", st.History())
	}
}

func TestRepublishedMsgIDIsStoredOnce(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx := context.Background()
	msg := nats.NewMsg("airlock.evt.bot.c1.requested")
	msg.Data = []byte("x")
	msg.Header.Set(jetstream.MsgIDHeader, "c1.1.requested")
	a1, err := deps.JS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := deps.JS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Duplicate || !a2.Duplicate || a1.Sequence != a2.Sequence {
		t.Fatalf("first ack %+v, second ack %+v: want the second marked duplicate of the first", a1, a2)
	}
	s, _ := deps.JS.Stream(ctx, deps.Config.Stream.Name)
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
}
