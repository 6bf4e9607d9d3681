// Package consume runs a durable JetStream consumer with the behaviour every
// airlock service needs: explicit acks after the work is done, retries with
// backoff, poison messages terminated and recorded instead of looping, panics
// contained, in-order handling of one call's events while different calls
// proceed concurrently, and ack-wait extension for long handlers.
package consume

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/obs"
)

// Handler processes one message. Returning nil acks it; returning an error
// wrapped with Permanent terminates it (it will not be redelivered); any
// other error naks it for a later retry. Handlers must be idempotent: a
// message can be delivered again after a crash or an ack that was lost.
type Handler func(ctx context.Context, m jetstream.Msg) error

// Spec describes the durable consumer.
type Spec struct {
	// Service labels logs and metrics.
	Service string
	Stream  string
	// Durable name shared by every replica of the service, so that they split the work.
	Durable        string
	FilterSubjects []string
	// AckWait before an unacknowledged message is redelivered (default 30s);
	// the runner extends it while a handler is still working.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one message (default unlimited).
	MaxDeliver int
	// Workers handle messages concurrently (default 1); one call's messages
	// always go to the same worker, in stream order.
	Workers int
	// MaxAckPending bounds unacknowledged messages (default 1000).
	MaxAckPending int
}

// Permanent marks err as not worth retrying: the message is terminated.
func Permanent(err error) error { return permanentError{err} }

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool { return errors.As(err, new(permanentError)) }

// Run creates (or updates) the durable consumer and handles messages until
// ctx is canceled; then it stops fetching, lets in-flight handlers finish,
// and returns nil.
func Run(ctx context.Context, js jetstream.JetStream, spec Spec, log *slog.Logger, metrics *obs.Metrics, h Handler) error {
	if spec.AckWait == 0 {
		spec.AckWait = 30 * time.Second
	}
	if spec.Workers <= 0 {
		spec.Workers = 1
	}
	if spec.MaxAckPending == 0 {
		spec.MaxAckPending = 1000
	}
	cc := jetstream.ConsumerConfig{
		Durable:        spec.Durable,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        spec.AckWait,
		MaxDeliver:     spec.MaxDeliver,
		MaxAckPending:  spec.MaxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		FilterSubjects: spec.FilterSubjects,
	}
	if len(spec.FilterSubjects) == 1 {
		cc.FilterSubject, cc.FilterSubjects = spec.FilterSubjects[0], nil
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, spec.Stream, cc)
	if err != nil {
		if ctx.Err() != nil {
			return nil // shut down while starting: a clean stop
		}
		return fmt.Errorf("%s: create consumer %s on %s: %w", spec.Service, spec.Durable, spec.Stream, err)
	}
	log = log.With("service", spec.Service, "consumer", spec.Durable)

	queues := make([]chan jetstream.Msg, spec.Workers)
	var wg sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan jetstream.Msg, 64)
		wg.Add(1)
		go func(q chan jetstream.Msg) {
			defer wg.Done()
			for m := range q {
				handle(ctx, m, spec, log, metrics, h)
			}
		}(queues[i])
	}

	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: start consuming %s: %w", spec.Service, spec.Durable, err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				break
			}
			log.Warn("fetching messages failed; retrying", "err", err)
			continue
		}
		queues[shard(m.Subject(), spec.Workers)] <- m
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	return nil
}

// handle runs h for one message with ack-wait extension, panic containment and the ack decision.
func handle(ctx context.Context, m jetstream.Msg, spec Spec, log *slog.Logger, metrics *obs.Metrics, h Handler) {
	started := time.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(spec.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress() // best effort: a lost keep-alive only risks a redelivery the handler tolerates
			}
		}
	}()
	err := safeCall(ctx, m, h)
	close(done)

	// Handlers run with the service context; when it is canceled mid-work
	// the message is left unacknowledged and will be redelivered.
	meta, _ := m.Metadata()
	switch {
	case err == nil:
		if aerr := m.Ack(); aerr != nil {
			log.Warn("ack failed; the message will be redelivered and handled idempotently", "subject", m.Subject(), "err", aerr)
		}
		metrics.Observe(spec.Service, "ok", started)
	case IsPermanent(err):
		log.Error("message dropped: it cannot be processed", "subject", m.Subject(), "err", err)
		_ = m.TermWithReason(truncate(err.Error(), 200))
		metrics.Observe(spec.Service, "dropped", started)
	default:
		delay := backoff(meta)
		log.Warn("handling failed; will retry", "subject", m.Subject(), "err", err, "retry_in", delay)
		_ = m.NakWithDelay(delay)
		metrics.Observe(spec.Service, "retry", started)
	}
}

func safeCall(ctx context.Context, m jetstream.Msg, h Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("handler panicked: %v", r))
		}
	}()
	return h(ctx, m)
}

func backoff(meta *jetstream.MsgMetadata) time.Duration {
	n := uint64(1)
	if meta != nil {
		n = meta.NumDelivered
	}
	d := time.Duration(n*n) * 100 * time.Millisecond
	if d > 10*time.Second {
		d = 10 * time.Second
	}
	return d
}

// shard keeps one call's messages on one worker: airlock.evt.<agent>.<call>.<type>.
func shard(subj string, n int) int {
	if n == 1 {
		return 0
	}
	key := subj
	if parts := strings.SplitN(subj, ".", 5); len(parts) == 5 {
		key = parts[2] + "." + parts[3]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
