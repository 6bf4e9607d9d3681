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
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/subject"
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
	// Lanes, when above 1, spreads the messages of one subject over that
	// many workers by stream sequence instead of one: for a stream whose
	// subject names a sender rather than a call (the intake stores each
	// agent's requests under one subject), so that a sender gets some
	// parallelism but never more than Lanes workers. The handler must
	// tolerate concurrent messages of one subject.
	Lanes int
	// MaxAckPending bounds unacknowledged messages (default 1000).
	MaxAckPending int
	// HoldLastAck, when set, keeps the ack of the last message handled
	// back until the next handled message's ack or for this long at most.
	// For a work-queue stream: there an ack deletes the message, and the
	// NATS file store replaces a write block that a delete empties with a
	// new file (about 180 µs of server CPU on the issue-27 machine), so a
	// queue handled one message at a time paid that on every message.
	// Holding one ack back keeps the block from emptying while messages
	// follow each other; the held message only counts against the
	// stream's limits that much longer, and after a crash it is delivered
	// again (handlers are idempotent).
	HoldLastAck time.Duration
	// Subscribed, when set, is called once, when the consumer exists and
	// its messages are being fetched: where a service becomes ready
	// (svc.Readiness).
	Subscribed func()
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
	// A held ack must be sent long before the message would be redelivered.
	spec.HoldLastAck = min(spec.HoldLastAck, spec.AckWait/4)
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
	cons, err := bus.EnsureConsumer(ctx, js, spec.Stream, cc, func(err error) {
		log.Warn("cannot create the consumer yet; trying again until the cluster answers", "service", spec.Service, "consumer", spec.Durable, "err", err)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // shut down while starting: a clean stop
		}
		return fmt.Errorf("%s: create consumer %s on %s: %w", spec.Service, spec.Durable, spec.Stream, err)
	}
	log = log.With("service", spec.Service, "consumer", spec.Durable)

	// Each worker's queue can hold every message the server lets this
	// consumer have outstanding (MaxAckPending plus one pull batch), so the
	// fetch loop never blocks on one busy worker while the others idle.
	queueLen := pullBatch + 1000
	if spec.MaxAckPending > 0 {
		queueLen = pullBatch + min(spec.MaxAckPending, maxQueue)
	}
	queues := make([]chan fetched, spec.Workers)
	keep := newKeeper(spec.Workers, spec.AckWait)
	acks := NewAcker(spec.HoldLastAck, log)
	defer acks.Flush()
	var wg sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan fetched, queueLen)
		wg.Add(1)
		go func(i int, q chan fetched) {
			defer wg.Done()
			for f := range q {
				keep.begin(i, f)
				handle(ctx, f.m, spec, log, metrics, acks, h)
				keep.end(i)
			}
		}(i, queues[i])
	}
	keepCtx, stopKeep := context.WithCancel(context.Background())
	keepDone := make(chan struct{})
	go func() { defer close(keepDone); keep.run(keepCtx) }()

	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat))
	if err != nil {
		for _, q := range queues {
			close(q)
		}
		wg.Wait()
		stopKeep()
		<-keepDone
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: start consuming %s: %w", spec.Service, spec.Durable, err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	if spec.Subscribed != nil {
		spec.Subscribed()
	}
	var lastErr error
	// gone is set by a check, made off the fetch loop, that found the
	// consumer deleted: a consumer deleted before the iterator's pull
	// request reached it shows only as missed heartbeats, forever. The
	// check must not hold the loop up: while a cluster elects a new leader,
	// asking about the consumer waits for the API's timeout.
	var gone atomic.Pointer[error]
	var checking atomic.Bool
	for {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				if g := gone.Load(); g != nil {
					lastErr = *g
				} else if ctx.Err() == nil {
					lastErr = err // closed for another reason: the connection's
				}
				break
			}
			lastErr = err
			if checking.CompareAndSwap(false, true) {
				go func() {
					defer checking.Store(false)
					if ierr := consumerGone(ctx, cons); ierr != nil {
						gone.Store(&ierr)
						it.Stop()
					}
				}()
			}
			log.Warn("fetching messages failed; retrying", "err", err)
			continue
		}
		var seq uint64
		if spec.Lanes > 1 {
			if meta, err := m.Metadata(); err == nil {
				seq = meta.Sequence.Stream
			}
		}
		queues[worker(m.Subject(), seq, spec.Workers, spec.Lanes)] <- fetched{m: m, at: time.Now()}
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	stopKeep()
	<-keepDone
	if ctx.Err() == nil {
		// The iterator ends by itself only when the consumer is gone
		// (deleted behind the service's back): nothing more will arrive, so
		// the service must not go on looking alive.
		return fmt.Errorf("%s: the consumer %s stopped delivering (%v); restart the service to create it again", spec.Service, spec.Durable, lastErr)
	}
	return nil
}

// consumerGone says why cons no longer exists (it, or its stream, was
// deleted), asking twice a second apart so that a single answer given
// while a cluster resets the stream cannot end a healthy consumer; nil
// when it exists or the server cannot tell (a leader being elected).
func consumerGone(ctx context.Context, cons jetstream.Consumer) error {
	var err error
	for i := range 2 {
		if i > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return nil
			}
		}
		if _, err = cons.Info(ctx); !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
	}
	return err
}

const (
	// pullBatch is how many messages one pull request asks for.
	pullBatch = 256
	// maxQueue bounds a worker's queue when MaxAckPending is very large
	// (or unlimited); past it the fetch loop waits for that worker again.
	maxQueue = 10000
	// pullExpiry and pullHeartbeat: a pull request lasts pullExpiry and the
	// server confirms it is alive every pullHeartbeat. When the consumer's
	// leader moves to another node of a cluster, the requests waiting on
	// the old one are gone: two missed heartbeats make the iterator ask the
	// new leader. (With the library's 30 s expiry that took 30 s, and every
	// call waited that long after a node came back.)
	pullExpiry    = 5 * time.Second
	pullHeartbeat = time.Second
)

// fetched is a message and when it arrived, which is when its ack wait began.
type fetched struct {
	m  jetstream.Msg
	at time.Time
}

// keeper extends the ack wait of messages whose handler is still running.
// One goroutine serves every worker (a worker handles one message at a
// time), instead of a goroutine and a ticker per message: most handlers
// finish in well under a millisecond and never need a keep-alive.
type keeper struct {
	every time.Duration
	slots []keepSlot
}

type keepSlot struct {
	mu sync.Mutex
	m  jetstream.Msg
	// last is when the message's ack wait last (re)started: its arrival
	// (it may have waited in its worker's queue), then each keep-alive.
	last time.Time
}

func newKeeper(workers int, ackWait time.Duration) *keeper {
	// A message that starts just after a round is looked at two rounds
	// later at the latest: ackWait/2, well inside its ack wait.
	return &keeper{every: max(ackWait/4, time.Millisecond), slots: make([]keepSlot, workers)}
}

func (k *keeper) begin(i int, f fetched) {
	s := &k.slots[i]
	s.mu.Lock()
	s.m, s.last = f.m, f.at
	s.mu.Unlock()
}

func (k *keeper) end(i int) {
	s := &k.slots[i]
	s.mu.Lock()
	s.m = nil
	s.mu.Unlock()
}

func (k *keeper) run(ctx context.Context) {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for i := range k.slots {
				s := &k.slots[i]
				s.mu.Lock()
				m := s.m
				due := m != nil && now.Sub(s.last) >= k.every
				if due {
					s.last = now
				}
				s.mu.Unlock()
				if due {
					_ = m.InProgress() // best effort: a lost keep-alive only risks a redelivery the handler tolerates
				}
			}
		}
	}
}

// handle runs h for one message with panic containment and the ack decision
// (the worker's keeper extends the ack wait meanwhile).
func handle(ctx context.Context, m jetstream.Msg, spec Spec, log *slog.Logger, metrics *obs.Metrics, acks *Acker, h Handler) {
	started := time.Now()
	err := safeCall(ctx, m, h)

	// Handlers run with the service context; when it is canceled mid-work
	// the message is left unacknowledged and will be redelivered.
	switch {
	case err == nil:
		acks.Ack(m)
		metrics.Observe(spec.Service, "ok", started)
	case IsPermanent(err):
		log.Error("message dropped: it cannot be processed", "subject", m.Subject(), "err", err)
		_ = m.TermWithReason(truncate(err.Error(), 200))
		metrics.Observe(spec.Service, "dropped", started)
	default:
		meta, _ := m.Metadata()
		delay := backoff(meta)
		log.Warn("handling failed; will retry", "subject", m.Subject(), "err", err, "retry_in", delay)
		_ = m.NakWithDelay(delay)
		metrics.Observe(spec.Service, "retry", started)
	}
}

// Acker acks handled messages, holding the last one's ack back for up to
// hold (Spec.HoldLastAck; zero sends each at once). Run uses one per
// consumer; Flush must be called once no more messages are acked.
type Acker struct {
	hold time.Duration
	log  *slog.Logger

	mu    sync.Mutex
	held  jetstream.Msg // handled, its ack not yet sent
	timer *time.Timer   // sends held's ack when nothing follows it
	// flushing is held while Flush sends: the consumer's last Flush
	// returns only after a timer's Flush under way has sent its ack.
	flushing sync.Mutex
}

// NewAcker returns an Acker holding the last ack back for up to hold;
// failed acks are logged to log.
func NewAcker(hold time.Duration, log *slog.Logger) *Acker {
	a := &Acker{hold: hold, log: log}
	if hold > 0 {
		a.timer = time.AfterFunc(time.Hour, a.Flush)
		a.timer.Stop()
	}
	return a
}

// Ack acknowledges m, or holds m's ack back and sends the one held before
// (the queue then still holds m when that ack deletes its predecessor).
func (a *Acker) Ack(m jetstream.Msg) {
	if a.hold <= 0 {
		a.send(m)
		return
	}
	a.mu.Lock()
	prev := a.held
	a.held = m
	a.timer.Reset(a.hold)
	a.mu.Unlock()
	if prev != nil {
		a.send(prev)
	}
}

// Flush sends the held ack, if any: when nothing followed it in time, and
// when the consumer stops.
func (a *Acker) Flush() {
	if a.hold <= 0 {
		return
	}
	a.flushing.Lock()
	defer a.flushing.Unlock()
	a.mu.Lock()
	m := a.held
	a.held = nil
	a.timer.Stop()
	a.mu.Unlock()
	if m != nil {
		a.send(m)
	}
}

func (a *Acker) send(m jetstream.Msg) {
	if err := m.Ack(); err != nil {
		a.log.Warn("ack failed; the message will be redelivered and handled idempotently", "subject", m.Subject(), "err", err)
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

// worker picks the worker for a message: its call's (shard), or with lanes
// above 1 one of that many workers from there on, by stream sequence.
func worker(subj string, seq uint64, workers, lanes int) int {
	w := shard(subj, workers)
	if lanes > 1 {
		w = (w + int(seq%uint64(lanes))) % workers
	}
	return w
}

// shard keeps one call's messages on one worker: they are hashed on
// "<agent>.<call>" (subject.CallKey; FNV-1a, without allocating).
func shard(subj string, n int) int {
	if n == 1 {
		return 0
	}
	key, ok := subject.CallKey(subj)
	if !ok {
		key = subj
	}
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= prime32
	}
	return int(h % uint32(n))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
