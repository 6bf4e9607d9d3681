package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadStored calls fn for every message stored on filters right now, in
// stream order, until fn returns false or it has seen them all. It uses an
// ordered consumer, so it reads history without touching any durable state.
func ReadStored(ctx context.Context, js jetstream.JetStream, stream string, filters []string, fn func(jetstream.Msg) bool) error {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters})
	if err != nil {
		return fmt.Errorf("read %v from %s: %w", filters, stream, err)
	}
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
