package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A batch appended after a call's last sequence lands whole, in order, and
// is republished like any event; a competing batch with the same
// expectation is refused whole as a conflict, on a single server and on an
// R3 stream alike: that is what lets `requested` and the decision be one
// write (ARCHITECTURE.md, "Exactly once").
func TestAppendBatchLandsWholeOrNotAtAll(t *testing.T) {
	for _, tt := range []struct {
		name  string
		start func(t *testing.T) (*nats.Conn, jetstream.JetStream, config.Config)
	}{
		{"single_server", func(t *testing.T) (*nats.Conn, jetstream.JetStream, config.Config) {
			n := testenv.StartNATS(t)
			d := testenv.Deps(t, testenv.Config(n.URL()))
			return d.NC, d.JS, d.Config
		}},
		{"replicated_stream", provisionedCluster},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nc, js, cfg := tt.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := nc.SubscribeSync("airlock.out.bot.c1.>")
			if err != nil {
				t.Fatal(err)
			}
			batch := func(who string) []*nats.Msg {
				first := &nats.Msg{Subject: "airlock.evt.bot.c1.requested", Data: []byte(who + " requested"), Header: nats.Header{}}
				first.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
				first.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", "airlock.evt.bot.c1.>")
				return []*nats.Msg{first, {Subject: "airlock.evt.bot.c1.allowed", Data: []byte(who + " allowed")}}
			}
			ack, err := bus.AppendBatch(ctx, js, batch("first"))
			if err != nil {
				t.Fatalf("the first batch: %v", err)
			}
			if _, err := bus.AppendBatch(ctx, js, batch("second")); !errors.Is(err, bus.ErrConflict) {
				t.Fatalf("a second batch after the same sequence: %v, want a conflict", err)
			}
			for i, want := range []string{"first requested", "first allowed"} {
				m, err := bus.LastStoredLeader(ctx, nc, cfg.Stream.Name, []string{"airlock.evt.bot.c1.requested", "airlock.evt.bot.c1.allowed"}[i])
				if err != nil || m == nil {
					t.Fatalf("read %d back: %v %v", i, m, err)
				}
				if string(m.Data) != want || bus.StoredSeq(m) != ack.Sequence-1+uint64(i) {
					t.Fatalf("stored %d: %q at %d, want %q at %d", i, m.Data, bus.StoredSeq(m), want, ack.Sequence-1+uint64(i))
				}
				r, err := out.NextMsg(5 * time.Second)
				if err != nil || string(r.Data) != want {
					t.Fatalf("republished %d: %v %v, want %q", i, r, err, want)
				}
			}
			st, err := js.Stream(ctx, cfg.Stream.Name)
			if err != nil {
				t.Fatal(err)
			}
			if n := st.CachedInfo().State.Msgs; n != 2 {
				t.Fatalf("the stream holds %d messages, want the first batch's 2 (%s)", n, fmt.Sprint(st.CachedInfo().State))
			}
		})
	}
}
