// Package audit is the audit service: a durable consumer of every event
// that writes hash-chained rows to ClickHouse in batches.
//
// Guarantees:
//   - Nothing is lost: an event is acknowledged only after the batch holding
//     it is committed to ClickHouse. While ClickHouse is unreachable the
//     sink retries with backoff and the events wait in the stream.
//   - Nothing is counted twice: the sink remembers the sequence of the last
//     committed row (the chain head, read from ClickHouse at start and after
//     every error) and skips redelivered events at or below it; a row that
//     is written twice anyway (an insert that failed ambiguously, two
//     replicas racing) is byte-identical, and every read uses FINAL on a
//     ReplacingMergeTree keyed by the sequence.
//   - A chain nobody can forge by writing ClickHouse: each row's hash is
//     HMAC-SHA256 under the audit key (Options.Key), which ClickHouse never
//     sees. The sink extends the chain only from a row whose hash is the
//     key's and whose sequence the stream has issued (TrustedHead), so a
//     forged, altered or far-future row can neither move the head nor make
//     the sink skip events; it logs what it passed over, and `airlock audit
//     verify` names it.
//   - One chain: rows are chained in stream-sequence order and a row is a
//     pure function of its stream message and the previous hash. A writer
//     only ever extends the chain from the trusted head it read from ClickHouse;
//     when its next message is further along than head+1 (another replica
//     holds the ones in between, or ClickHouse was added after the events
//     were acknowledged) it reads the missing range from the stream itself.
//     So replicas cannot fork the chain; a second replica only duplicates
//     work (one replica, restarted by the platform, is the intended setup).
//   - A replicated ClickHouse (a DSN with several replicas and cluster=):
//     when the replica written to dies, the next commit goes to another;
//     the writer extends the chain there only from a head that replica
//     holds (else it back-fills from the stream), and rows written on both
//     are one row under FINAL. See deploy/clickhouse/README.md, "Replicas".
package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Durable is the consumer name of the sink.
const Durable = "audit"

// priorityGroup is the consumer's one priority group: with the pinned
// policy, the server delivers to a single sink replica at a time.
const priorityGroup = "audit"

// Options configure the sink.
type Options struct {
	// DSN of ClickHouse; required unless DSNSource is set.
	DSN string
	// DSNSource, when set, is asked for the DSN before every connection and
	// every batch: an error means the store is gone (a local ClickHouse
	// that exited), so the sink drops its connection and does not dial
	// (events wait in the stream); a new DSN is connected to afresh.
	DSNSource func() (string, error)
	// Stream is the events stream (config stream.name).
	Stream string
	// Durable consumer name (default "audit").
	Durable string
	// BatchSize is the most events per insert (audit.batch_size); required.
	BatchSize int
	// FlushInterval bounds how long an event waits for its batch
	// (audit.flush_interval); required.
	FlushInterval time.Duration
	// MaxBackoff caps the wait between retries while ClickHouse is down (default 2s).
	MaxBackoff time.Duration
	// Key seals the chain; required (LoadKey reads it from configuration).
	Key *record.Key
	// Committed, when set, is called after each batch is committed and
	// acknowledged, with the batch's highest sequence (benchmarks, tests).
	Committed func(lastSeq uint64)
}

func (o Options) withDefaults() Options {
	if o.Durable == "" {
		o.Durable = Durable
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Second
	}
	return o
}

// Service is the audit sink.
type Service struct {
	deps svc.Deps
	opt  Options
	log  *slog.Logger
	// newBatch starts the rows of one fetch (the sink's rowBatch, or the
	// floor's floorBatch); connect opens what commits them.
	newBatch func() batchBuilder
	connect  func(ctx context.Context) (committer, error)
	ready    svc.Readiness
}

// batchBuilder turns the messages of one fetch into rows.
type batchBuilder interface {
	// add takes each message as it arrives. A row may keep views of
	// m.Data until the batch is released.
	add(m record.Msg)
	// rows returns the rows sorted by sequence, with what to call once
	// they are committed (nil when nothing is recycled).
	rows() ([]record.Row, func())
}

// committer writes batches of rows.
type committer interface {
	// commit writes rows (sorted by sequence); on success every sequence up
	// to the last is stored.
	commit(ctx context.Context, rows []record.Row) error
	// failed is told that a commit failed: state read from the store is stale.
	failed()
	close()
}

// New builds the sink. It connects to ClickHouse when it runs, not here,
// so a ClickHouse that is down at start-up only delays the audit trail.
func New(deps svc.Deps, opt Options) (*Service, error) {
	opt = opt.withDefaults()
	if opt.DSN == "" && opt.DSNSource == nil {
		return nil, errors.New("audit sink: no ClickHouse DSN (set clickhouse.dsn or AIRLOCK_CLICKHOUSE_DSN)")
	}
	if opt.Key == nil {
		return nil, fmt.Errorf("audit sink: %w", ErrNoKey)
	}
	if opt.BatchSize <= 0 || opt.FlushInterval <= 0 {
		return nil, fmt.Errorf("audit sink: batch size %d and flush interval %s must be positive (audit.batch_size, audit.flush_interval)", opt.BatchSize, opt.FlushInterval)
	}
	if opt.Stream == "" {
		opt.Stream = deps.Config.Stream.Name
	}
	s := &Service{deps: deps, opt: opt, log: deps.Log.With("service", "audit")}
	bufs := newBatchBufs()
	s.newBatch = func() batchBuilder { return newRowBatch(bufs, opt.BatchSize, s.log) }
	s.connect = s.connectWriter
	return s, nil
}

// RunFloor runs the sink's pipeline with everything the sink itself does
// taken out: it fetches the stream exactly as the sink does, and for each
// batch inserts rows[seq-1] (built and sealed beforehand) into table, then
// acknowledges. Its rate is the pipeline floor that `airlock bench audit`
// compares the sink with (docs/benchmarks.md). It runs until ctx ends.
func RunFloor(ctx context.Context, deps svc.Deps, opt Options, table string, rows []record.Row) error {
	opt.Key = nil
	opt = opt.withDefaults()
	if opt.Stream == "" {
		opt.Stream = deps.Config.Stream.Name
	}
	s := &Service{deps: deps, opt: opt, log: deps.Log.With("service", "audit-floor")}
	s.newBatch = func() batchBuilder { return &floorBatch{all: rows} }
	s.connect = func(ctx context.Context) (committer, error) {
		st, err := store.OpenWriter(ctx, opt.DSN)
		if err != nil {
			return nil, err
		}
		return floorWriter{st: st, table: table}, nil
	}
	return s.Run(ctx)
}

// floorBatch picks the pre-built rows of the sequences fetched.
type floorBatch struct {
	all    []record.Row
	lo, hi uint64 // 0: none yet
}

func (f *floorBatch) add(m record.Msg) {
	if f.lo == 0 || m.Seq < f.lo {
		f.lo = m.Seq
	}
	f.hi = max(f.hi, m.Seq)
}

func (f *floorBatch) rows() ([]record.Row, func()) {
	if f.lo < 1 || f.hi > uint64(len(f.all)) {
		return nil, nil
	}
	return f.all[f.lo-1 : f.hi], nil
}

type floorWriter struct {
	st    *store.ClickHouse
	table string
}

func (f floorWriter) commit(ctx context.Context, rows []record.Row) error {
	return f.st.InsertInto(ctx, f.table, rows)
}
func (f floorWriter) failed() {}
func (f floorWriter) close()  { f.st.Close() }

// NewFromConfig builds the sink from deps.Config. Without clickhouse.dsn it
// returns a service that only says so and waits: the audit trail is then
// read from the stream (store.Stream), and when ClickHouse is configured
// later the durable consumer starts at the stream's beginning and
// back-fills everything still retained.
func NewFromConfig(_ context.Context, deps svc.Deps) (svc.Service, error) {
	c := deps.Config
	if c.ClickHouse.DSN == "" {
		i := idle{log: deps.Log, ready: &svc.Readiness{}}
		i.ready.Mark()
		return i, nil
	}
	key, err := LoadKey(c.Audit)
	if err != nil {
		return nil, fmt.Errorf("audit sink: %w", err)
	}
	opt := Options{DSN: c.ClickHouse.DSN, Stream: c.Stream.Name,
		BatchSize: c.Audit.BatchSize, FlushInterval: c.Audit.FlushInterval, Key: key}
	if deps.ClickHouse != nil {
		opt.DSNSource = func() (string, error) { return deps.ClickHouse(false) }
	}
	return New(deps, opt)
}

// idle is the sink with no ClickHouse: ready at once, it has nothing to
// register.
type idle struct {
	log   *slog.Logger
	ready *svc.Readiness
}

func (idle) Name() string { return "audit" }

// Ready is closed from the start.
func (i idle) Ready() <-chan struct{} { return i.ready.Ready() }

func (i idle) Run(ctx context.Context) error {
	i.log.Info("audit: no ClickHouse configured (clickhouse.dsn); the audit trail is read from the events stream, and is back-filled when ClickHouse is configured", "service", "audit")
	<-ctx.Done()
	return nil
}

// Name implements svc.Service.
func (s *Service) Name() string { return "audit" }

// Ready implements svc.Service.
func (s *Service) Ready() <-chan struct{} { return s.ready.Ready() }

// Run implements svc.Service: it writes events until ctx is canceled.
// ClickHouse or NATS being unreachable is retried forever, never fatal.
//
// Two stages overlap: a fetcher pulls the next batch and builds each row
// as its message arrives (decode, redact, payload) while the writer seals
// and inserts the previous one. At most three batches are unacknowledged
// (one committing, one queued, one being fetched), within MaxAckPending.
// It is ready once its consumer exists: what it has not fetched waits in
// the stream.
func (s *Service) Run(ctx context.Context) error {
	cons, err := s.consumer(ctx)
	if err != nil {
		return err
	}
	defer s.unpin()
	fctx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	batches := make(chan prepared, 1)
	go s.fetch(fctx, cons, batches)
	s.ready.Mark()

	var w committer
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	delay := 50 * time.Millisecond
	var lastWarn time.Time
	for b := range batches {
		started := time.Now()
		for {
			if w != nil && s.moved(w) {
				// The store went away or moved: its old address may be
				// anyone's now, so the old connection never dials again.
				w.close()
				w = nil
			}
			if w == nil {
				if w, err = s.connect(ctx); err != nil {
					w = nil
				}
			}
			if w != nil {
				if err = w.commit(ctx, b.rows); err == nil {
					break
				}
				w.failed()
			}
			if ctx.Err() != nil {
				return nil // unacknowledged: redelivered to the next run
			}
			s.deps.Metrics.Observe("audit", "retry", started)
			// A long outage retries every MaxBackoff; say so every 30 s, not every time.
			if time.Since(lastWarn) >= 30*time.Second {
				lastWarn = time.Now()
				s.log.Warn("audit: batch not committed; retrying until ClickHouse accepts it (its events wait in the stream)", "err", err, "events", len(b.rows), "waiting", time.Since(started).Round(time.Second))
			}
			delay = s.sleep(ctx, delay)
		}
		if delay > 50*time.Millisecond {
			s.log.Info("audit: ClickHouse accepts writes again", "waited", time.Since(started).Round(time.Millisecond))
		}
		delay, lastWarn = 50*time.Millisecond, time.Time{}
		if b.release != nil {
			b.release()
		}
		// AckAll: acknowledging the highest sequence acknowledges every
		// earlier one, and all of them are committed (head ≥ that sequence).
		if err := b.last.Ack(); err != nil {
			s.log.Warn("audit: ack failed; the batch will be redelivered and skipped", "err", err)
		}
		s.deps.Metrics.Observe("audit", "ok", started)
		s.log.Debug("audit: batch committed", "events", len(b.rows), "last_seq", b.lastSeq, "commit", time.Since(started), "fetch_build", b.took)
		if s.opt.Committed != nil {
			s.opt.Committed(b.lastSeq)
		}
	}
	return nil
}

// prepared is one fetched batch with its rows built (not yet sealed),
// sorted by sequence; last is the message with the highest sequence.
type prepared struct {
	rows    []record.Row
	release func() // after the batch is committed: its buffers are used again
	last    jetstream.Msg
	lastSeq uint64
	took    time.Duration // fetching and building it
}

// fetch pulls batches until ctx ends, then closes out.
func (s *Service) fetch(ctx context.Context, cons jetstream.Consumer, out chan<- prepared) {
	defer close(out)
	delay := 50 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		batch, err := cons.Fetch(s.opt.BatchSize, jetstream.FetchMaxWait(s.opt.FlushInterval), jetstream.FetchPriorityGroup(priorityGroup))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("audit: fetch failed; retrying", "err", err)
			delay = s.sleep(ctx, delay)
			continue
		}
		delay = 50 * time.Millisecond
		var b batchBuilder // from the first message on: an idle fetch has none
		var last jetstream.Msg
		var lastSeq uint64
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				continue // not a JetStream message: nothing to record or ack
			}
			// Built now, not once the batch is complete: the message was
			// just read, and no slice of the batch's messages is kept.
			if b == nil {
				b = s.newBatch()
			}
			b.add(record.Msg{Seq: meta.Sequence.Stream, Time: meta.Timestamp, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
			if meta.Sequence.Stream >= lastSeq {
				last, lastSeq = m, meta.Sequence.Stream
			}
		}
		if b == nil {
			continue
		}
		rows, release := b.rows()
		p := prepared{rows: rows, release: release, last: last, lastSeq: lastSeq, took: time.Since(started)}
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

// rowBatch builds the sink's rows of one fetch into a batchBuf.
type rowBatch struct {
	bufs     *batchBufs
	buf      *batchBuf
	log      *slog.Logger
	unsorted bool // a message came with a lower sequence than the one before
}

func newRowBatch(bufs *batchBufs, size int, log *slog.Logger) *rowBatch {
	buf := bufs.get()
	if cap(buf.rows) < size {
		buf.rows = make([]record.Row, 0, size)
	}
	return &rowBatch{bufs: bufs, buf: buf, log: log}
}

func (b *rowBatch) add(m record.Msg) {
	rows := b.buf.rows
	if len(rows) < cap(rows) {
		rows = rows[:len(rows)+1] // a zero Row: made so, or cleared when its batch was released
	} else {
		rows = append(rows, record.Row{})
	}
	r := &rows[len(rows)-1]
	b.buf.arena.BuildInto(r, m)
	b.buf.rows = rows
	if n := len(rows); n > 1 && rows[n-2].Seq > m.Seq {
		b.unsorted = true
	}
	if r.Decision == "undecodable" {
		// Its row holds a fixed sentence (record.Build; a decoder's wording
		// varies per build), the decoder's words go to the log.
		_, err := envelope.Decode(m.Data, m.Header)
		b.log.Warn("audit: an event does not decode; its row records it as undecodable",
			"seq", m.Seq, "subject", m.Subject, "err", err)
	}
}

// rows returns the rows sorted by sequence, and the function that
// recycles them once they are committed (after which no row or string of
// theirs may be used).
func (b *rowBatch) rows() ([]record.Row, func()) {
	rows := b.buf.rows
	if b.unsorted { // a pull delivers in order: sorting is the exception
		slices.SortFunc(rows, func(a, b record.Row) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return rows, func() {
		clear(rows) // no row keeps a view of the arena
		b.buf.rows = rows[:0]
		b.buf.arena.Reset()
		b.bufs.put(b.buf)
	}
}

// batchBuf is what one batch's rows occupy: the rows and the arena that
// holds their strings. It is used again for a later batch once this one
// is committed: a batch is megabytes.
type batchBuf struct {
	rows  []record.Row
	arena record.Arena
}

// batchBufs keeps the buffers of committed batches for the next ones: at
// most three batches are in flight (see Run). Unlike a sync.Pool it does
// not drop them at a garbage collection, which would make the next batch
// allocate its megabytes again.
type batchBufs struct{ free chan *batchBuf }

func newBatchBufs() *batchBufs { return &batchBufs{free: make(chan *batchBuf, 4)} }

func (c *batchBufs) get() *batchBuf {
	select {
	case b := <-c.free:
		return b
	default:
		return &batchBuf{}
	}
}

func (c *batchBufs) put(b *batchBuf) {
	select {
	case c.free <- b:
	default:
	}
}

// unpin releases the pinned delivery on shutdown so a standby replica (or
// this one restarted) takes over at once instead of after PinnedTTL. If
// another replica held the pin it is simply pinned again on its next pull.
func (s *Service) unpin() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := s.deps.JS.Stream(ctx, s.opt.Stream)
	if err == nil {
		err = st.UnpinConsumer(ctx, s.opt.Durable, priorityGroup)
	}
	if err != nil {
		s.log.Debug("audit: unpin on shutdown failed; a standby takes over after the pinned TTL", "err", err)
	}
}

func (s *Service) sleep(ctx context.Context, d time.Duration) time.Duration {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return min(d*2, s.opt.MaxBackoff)
}

// consumer creates (or updates) the durable consumer: every event, from
// the stream's beginning, acknowledged cumulatively.
func (s *Service) consumer(ctx context.Context) (jetstream.Consumer, error) {
	var lastErr error
	for ctx.Err() == nil {
		cons, err := s.deps.JS.CreateOrUpdateConsumer(ctx, s.opt.Stream, jetstream.ConsumerConfig{
			Durable:       s.opt.Durable,
			Description:   "airlock audit sink: every event into ClickHouse",
			AckPolicy:     jetstream.AckAllPolicy,
			AckWait:       60 * time.Second,
			MaxAckPending: 4 * s.opt.BatchSize,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			FilterSubject: subject.AllEvents,
			// One replica at a time gets the messages (the pinned client);
			// another takes over when it stops pulling for PinnedTTL.
			PriorityPolicy: jetstream.PriorityPolicyPinned,
			PriorityGroups: []string{priorityGroup},
			PinnedTTL:      max(5*time.Second, 10*s.opt.FlushInterval),
		})
		if err == nil {
			return cons, nil
		}
		if lastErr == nil {
			s.log.Warn("audit: cannot create consumer yet; retrying", "err", err)
		}
		lastErr = err
		s.sleep(ctx, time.Second)
	}
	if lastErr != nil {
		return nil, fmt.Errorf("audit: create consumer %s on %s: %w", s.opt.Durable, s.opt.Stream, lastErr)
	}
	return nil, ctx.Err()
}

// dsn is where the store is now (Options.DSNSource, else Options.DSN).
func (s *Service) dsn() (string, error) {
	if s.opt.DSNSource != nil {
		return s.opt.DSNSource()
	}
	return s.opt.DSN, nil
}

// moved reports whether the store w writes to is no longer where the DSN
// says (gone, or on another address).
func (s *Service) moved(w committer) bool {
	cw, ok := w.(*writer)
	if !ok || s.opt.DSNSource == nil {
		return false
	}
	dsn, err := s.opt.DSNSource()
	return err != nil || dsn != cw.dsn
}

func (s *Service) connectWriter(ctx context.Context) (committer, error) {
	dsn, err := s.dsn()
	if err != nil {
		return nil, err
	}
	st, err := store.OpenWriter(ctx, dsn)
	if err != nil {
		return nil, err
	}
	w := &writer{dsn: dsn, st: st, js: s.deps.JS, stream: s.opt.Stream, batch: s.opt.BatchSize, resync: true, log: s.log,
		key: s.opt.Key, sealer: s.opt.Key.Sealer()}
	return w, nil
}

func (w *writer) failed() { w.resync = true }
func (w *writer) close()  { w.st.Close() }

// writer extends the chain in ClickHouse.
type writer struct {
	dsn    string // where st connects
	st     *store.ClickHouse
	js     jetstream.JetStream
	stream string
	batch  int
	log    *slog.Logger

	key    *record.Key
	sealer *record.Sealer

	headSeq  uint64
	headHash string
	resync   bool // re-read the head from ClickHouse before the next write
	warned   map[uint64]bool
}

// head reads the trusted head: the last authentic row ClickHouse holds at
// or below the stream's last sequence. Rows it passes over are logged once.
func (w *writer) head(ctx context.Context) error {
	st, err := w.js.Stream(ctx, w.stream)
	if err != nil {
		return fmt.Errorf("events stream %s: %w", w.stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("events stream %s: %w", w.stream, err)
	}
	seq, hash, skipped, err := w.st.TrustedHead(ctx, w.key, info.State.LastSeq)
	if err != nil {
		return err
	}
	if w.warned == nil {
		w.warned = map[uint64]bool{}
	}
	for _, u := range skipped {
		if !w.warned[u.Seq] && len(w.warned) < 1000 {
			w.warned[u.Seq] = true
			w.log.Warn("audit: ignoring a row in ClickHouse the audit service did not write; its events are written from the stream. Run `airlock audit verify` and find who writes the audit store", "seq", u.Seq, "event", u.EventID, "why", u.Why)
		}
	}
	w.headSeq, w.headHash = seq, hash
	return nil
}

// commit seals and writes every row of built (sorted by sequence, not
// yet sealed) that is not yet in ClickHouse, first filling any gap between
// the head and the batch from the stream. On return without error, every
// sequence ≤ the largest in built is committed.
func (w *writer) commit(ctx context.Context, built []record.Row) error {
	if w.resync {
		if err := w.head(ctx); err != nil {
			return err
		}
		w.resync = false
	} else if w.st.Cluster() != "" {
		// The driver moves to the next replica when its connection died
		// between two commits, without an error; that replica may not yet
		// have fetched the rows the dead one took. Extend the chain only
		// from a head this replica holds: else read its own head, and the
		// rows in between come from the stream (fill).
		ok, err := w.st.Holds(ctx, w.headSeq, w.headHash)
		if err != nil {
			return err
		}
		if !ok {
			w.log.Info("audit: this ClickHouse replica lacks the last rows written; writing them from the stream", "head", w.headSeq)
			if err := w.head(ctx); err != nil {
				return err
			}
		}
	}
	in := built
	skip := func() {
		for len(in) > 0 && in[0].Seq <= w.headSeq {
			in = in[1:] // redelivered: already committed
		}
	}
	skip()
	if len(in) == 0 {
		return nil
	}
	if in[0].Seq > w.headSeq+1 {
		// Another replica may have written the gap meanwhile: look first.
		if err := w.head(ctx); err != nil {
			return err
		}
		if skip(); len(in) == 0 {
			return nil
		}
	}
	if in[0].Seq > w.headSeq+1 {
		if err := w.fill(ctx, in[0].Seq-1); err != nil {
			return err
		}
	}
	// Rows are sealed in place and inserted in runs of consecutive
	// sequences; a retry after a failure seals them again from the head.
	prev, last := w.headHash, w.headSeq
	start := 0
	for i := range in {
		r := &in[i]
		if r.Seq <= last {
			// A duplicate within the batch: insert the run before it, skip it.
			if err := w.insert(ctx, in[start:i]); err != nil {
				return err
			}
			start = i + 1
			continue
		}
		if r.Seq > last+1 {
			// A hole inside one fetch: messages the stream no longer has,
			// or another replica's. Read them from the stream first.
			if err := w.insert(ctx, in[start:i]); err != nil {
				return err
			}
			start = i
			if err := w.fill(ctx, r.Seq-1); err != nil {
				return err
			}
			prev, last = w.headHash, w.headSeq
		}
		w.sealer.Seal(r, prev)
		prev, last = r.Hash, r.Seq
	}
	return w.insert(ctx, in[start:])
}

// insert commits sealed rows and advances the head.
func (w *writer) insert(ctx context.Context, rows []record.Row) error {
	if len(rows) == 0 {
		return nil
	}
	if err := w.st.Insert(ctx, rows); err != nil {
		return err
	}
	w.headSeq, w.headHash = rows[len(rows)-1].Seq, rows[len(rows)-1].Hash
	return nil
}

// fill writes the stream's messages after the head up to and including
// seq, in chunks, reading them from the stream (back-fill, or another
// replica's in-flight messages). Sequences the stream no longer holds are
// skipped: the chain links across them.
func (w *writer) fill(ctx context.Context, seq uint64) error {
	from := w.headSeq + 1
	w.log.Info("audit: writing events missing before this batch from the stream", "from", from, "to", seq)
	var rows []record.Row
	prev := w.headHash
	err := store.ReadRange(ctx, w.js, w.stream, from, seq, func(m record.Msg) error {
		if m.Seq <= w.headSeq {
			return nil
		}
		r := record.Build(m)
		w.sealer.Seal(&r, prev)
		prev = r.Hash
		rows = append(rows, r)
		if len(rows) >= w.batch {
			if err := w.insert(ctx, rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("back-fill %d-%d from the stream: %w", from, seq, err)
	}
	return w.insert(ctx, rows)
}
