package testenv

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Events returns every event currently stored on subjects matching filter,
// in stream order. It fails the test on a message that does not decode.
func Events(t testing.TB, js jetstream.JetStream, filter string) []*airlockv1.Event {
	t.Helper()
	var out []*airlockv1.Event
	for _, m := range Messages(t, js, filter) {
		ev, err := envelope.Decode(m.Data(), m.Headers())
		if err != nil {
			t.Fatalf("undecodable event on %s: %v", m.Subject(), err)
		}
		out = append(out, ev)
	}
	return out
}

// SubjectTypes returns the event type token of every message stored on
// filter, in stream order, whether or not its body decodes.
func SubjectTypes(t testing.TB, js jetstream.JetStream, filter string) []string {
	t.Helper()
	var out []string
	for _, m := range Messages(t, js, filter) {
		out = append(out, m.Subject()[strings.LastIndex(m.Subject(), ".")+1:])
	}
	return out
}

// Messages returns every message currently stored on filter, in stream order.
func Messages(t testing.TB, js jetstream.JetStream, filter string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []jetstream.Msg
	if err := bus.ReadStored(ctx, js, config.Default().Stream.Name, []string{filter}, func(m jetstream.Msg) bool {
		out = append(out, m)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Types lists the event types of evs in order.
func Types(evs []*airlockv1.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = envelope.TypeOf(ev)
	}
	return out
}

// WaitForEvent waits until an event of type typ is stored on filter and returns it.
func WaitForEvent(t testing.TB, js jetstream.JetStream, filter, typ string, timeout time.Duration) *airlockv1.Event {
	t.Helper()
	var found *airlockv1.Event
	Eventually(t, timeout, "a "+typ+" event on "+filter, func() bool {
		for _, m := range Messages(t, js, filter) {
			if strings.HasSuffix(m.Subject(), "."+typ) {
				ev, err := envelope.Decode(m.Data(), m.Headers())
				if err != nil {
					t.Fatalf("undecodable %s event: %v", typ, err)
				}
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// Settled waits until the durable consumer on stream has nothing left to
// deliver and nothing delivered but unacknowledged: every message its
// service was given has been handled, and what the handler published is
// stored. It is the sync point before asserting that handling a message
// did not do something.
func Settled(t testing.TB, js jetstream.JetStream, stream, durable string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "consumer "+durable+" to acknowledge every message of "+stream, func() bool {
		cons, err := js.Consumer(context.Background(), stream, durable)
		if err != nil {
			return false
		}
		info, err := cons.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// Runs waits until the executor has handled every event it was given (its
// durable consumer settled: a start it was going to make is stored), then
// counts the started and completed events of agent's call. It is how a
// test asserts that a call never ran (0, 0), or ran exactly once (1, 1).
func Runs(t testing.TB, js jetstream.JetStream, agent, call string) (started, completed int) {
	t.Helper()
	Settled(t, js, config.Default().Stream.Name, executorapi.Durable, 20*time.Second)
	for _, typ := range SubjectTypes(t, js, subject.OfCall(agent, call)) {
		switch typ {
		case subject.Started:
			started++
		case subject.Completed:
			completed++
		}
	}
	return started, completed
}

// SmallEventsStream bounds cfg's events stream to the least the
// configuration allows (64 messages of 16 KiB), for tests that fill it.
func SmallEventsStream(cfg *config.Config) {
	cfg.Stream.MaxMsgSize = 16 << 10
	cfg.Stream.MaxBytes = 64 * int64(cfg.Stream.MaxMsgSize)
}

// FillEventsStream publishes 8 KiB notifications into deps' events stream
// until its use reaches bus.StreamUseWarning (see SmallEventsStream).
func FillEventsStream(t testing.TB, deps svc.Deps) {
	t.Helper()
	ctx := context.Background()
	pub := deps.Publisher("test")
	for i := 0; ; i++ {
		u, err := bus.ReadStreamUse(ctx, deps.JS, deps.Config.Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		if u.Share() >= bus.StreamUseWarning {
			return
		}
		if err := publishFill(ctx, pub, "fill_"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// FillEventsStreamUntilRefused publishes 8 KiB notifications into deps'
// events stream until it refuses one, as it does every new event once full
// (see SmallEventsStream).
func FillEventsStreamUntilRefused(t testing.TB, deps svc.Deps) {
	t.Helper()
	pub := deps.Publisher("test")
	for i := 0; i <= int(deps.Config.Stream.MaxBytes>>13); i++ {
		if err := publishFill(context.Background(), pub, "full_"+strconv.Itoa(i)); err != nil {
			return
		}
	}
	t.Fatalf("the events stream took %d bytes of notifications under stream.max_bytes %d and refused none", deps.Config.Stream.MaxBytes, deps.Config.Stream.MaxBytes)
}

// publishFill publishes one 8 KiB notification of call.
func publishFill(ctx context.Context, pub *bus.Publisher, call string) error {
	ev := &airlockv1.Event{AgentId: "bot", CallId: call, Revision: 1, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "test"},
		Body: &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "test", Kind: "fill", Ref: strings.Repeat("x", 8<<10)}}}
	_, err := pub.Publish(ctx, ev, "")
	return err
}

// SyncBuffer is a bytes.Buffer safe for a logger that writes while the
// test reads.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
