package bus

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/subject"
)

// ReadStored calls fn for every message stored on filters right now, in
// stream order, until fn returns false or it has seen them all. It uses an
// ordered consumer, so it reads history without touching any durable state;
// the consumer is deleted when the read ends (and left by the server after
// readerIdle should that fail), so frequent reads do not pile consumers up
// against the server's limit per stream (1,000 by default; an ordered
// consumer otherwise lingers for 5 minutes).
func ReadStored(ctx context.Context, js jetstream.JetStream, stream string, filters []string, fn func(jetstream.Msg) bool) error {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters, InactiveThreshold: readerIdle})
	if err != nil {
		return fmt.Errorf("read %v from %s: %w", filters, stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if ci := cons.CachedInfo(); ci != nil && ci.Name != "" {
			_ = js.DeleteConsumer(dctx, stream, ci.Name)
		}
	}()
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("read %v from %s: %w", filters, stream, err)
	}
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("read %v from %s: %w", filters, stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if meta, err := m.Metadata(); err == nil {
				pending = meta.NumPending
			}
			if !fn(m) {
				return nil
			}
		}
		if err := batch.Error(); err != nil && n == 0 {
			return fmt.Errorf("read %v from %s: %w", filters, stream, err)
		}
		if n == 0 {
			break
		}
	}
	return nil
}

// readerIdle is how long the server keeps a ReadStored consumer nobody
// pulls from.
const readerIdle = 30 * time.Second

// LastStored returns the last message stored on subj (which may end in a
// wildcard) in stream, with JetStream's Direct Get, or nil when there is
// none. The subject form of Direct Get is the one agents are allowed, on
// their own subjects; services use it too.
func LastStored(ctx context.Context, nc *nats.Conn, stream, subj string) (*nats.Msg, error) {
	m, err := nc.RequestWithContext(ctx, subject.DirectGet(stream, subj), nil)
	if err != nil {
		return nil, fmt.Errorf("read the last message on %s: %w", subj, err)
	}
	switch m.Header.Get("Status") {
	case "":
		return m, nil
	case "404":
		return nil, nil
	default:
		return nil, fmt.Errorf("read the last message on %s: %s %s", subj, m.Header.Get("Status"), m.Header.Get("Description"))
	}
}

// StoredSeq is the stream sequence of a message read with LastStored or
// republished by the stream (0 when it carries none).
func StoredSeq(m *nats.Msg) uint64 {
	seq, _ := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	return seq
}
