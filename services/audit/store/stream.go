package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/bus"
)

// Stream reads the audit trail straight from the events stream, for when
// no ClickHouse is configured: rows are built and chained exactly as the
// sink would store them, so queries, exports and analytics give the same
// answers (over what the stream still retains). Every call reads the
// stream from the start: fine for a laptop, not for months of events.
type Stream struct {
	js     jetstream.JetStream
	stream string
	key    *record.Key
}

// NewStream reads from the named events stream. With a key (may be nil)
// rows carry the keyed hashes the sink would store; without one their
// hash fields are empty.
func NewStream(js jetstream.JetStream, stream string, key *record.Key) *Stream {
	return &Stream{js: js, stream: stream, key: key}
}

// Source implements Reader.
func (s *Stream) Source() string { return "stream" }

// Close implements Reader.
func (s *Stream) Close() error { return nil }

// ReadRange calls fn with every message of the stream with sequence in
// [from, to] (to 0: up to the last message now stored), in order, via an
// ordered consumer. Sequences that no longer exist are skipped.
func ReadRange(ctx context.Context, js jetstream.JetStream, stream string, from, to uint64, fn func(record.Msg) error) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("events stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("events stream %s: %w", stream, err)
	}
	last := info.State.LastSeq
	if to == 0 || to > last {
		to = last
	}
	if from < info.State.FirstSeq {
		from = info.State.FirstSeq
	}
	if from == 0 {
		from = 1
	}
	if info.State.Msgs == 0 || from > to {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return fmt.Errorf("read events stream from %d: %w", from, err)
	}
	for {
		var stop error
		done := false
		n, err := bus.PullOrdered(ctx, cons, 1000, 2*time.Second, func(m jetstream.Msg) bool {
			meta, err := m.Metadata()
			if err != nil {
				stop = fmt.Errorf("read events stream: %w", err)
				return false
			}
			if meta.Sequence.Stream > to {
				done = true
				return false
			}
			if err := fn(record.Msg{Seq: meta.Sequence.Stream, Time: meta.Timestamp, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}); err != nil {
				stop = err
				return false
			}
			done = meta.Sequence.Stream == to
			return !done
		})
		switch {
		case stop != nil:
			return stop
		case done:
			return nil
		case err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages):
			return fmt.Errorf("read events stream: %w", err)
		case n == 0:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // nothing more within the wait: the range ends earlier than its last sequence (deleted messages)
		}
	}
}

// each builds (and, with a key, chains) every retained event.
func (s *Stream) each(ctx context.Context, fn func(Row) error) error {
	prev := record.GenesisHash
	var sealer *record.Sealer
	if s.key != nil {
		sealer = s.key.Sealer()
	}
	return ReadRange(ctx, s.js, s.stream, 0, 0, func(m record.Msg) error {
		r := record.Build(m)
		if sealer != nil {
			sealer.Seal(&r, prev)
			prev = r.Hash
		}
		return fn(r)
	})
}

// Each implements Reader.
func (s *Stream) Each(ctx context.Context, f Filter, fn func(Row) error) error {
	if f.Tool == "" {
		n := 0
		errStop := errors.New("limit reached")
		err := s.each(ctx, func(r Row) error {
			if !f.Match(r, false) {
				return nil
			}
			n++
			if err := fn(r); err != nil {
				return err
			}
			if f.Limit > 0 && n >= f.Limit {
				return errStop
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	}
	// A tool filter needs every call of the tool first.
	var all []Row
	if err := s.each(ctx, func(r Row) error { all = append(all, r); return nil }); err != nil {
		return err
	}
	for _, r := range f.Apply(all) {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Query implements Reader.
func (s *Stream) Query(ctx context.Context, f Filter) ([]Row, error) {
	var out []Row
	err := s.Each(ctx, f, func(r Row) error { out = append(out, r); return nil })
	return out, err
}

// Analytics implements Reader.
func (s *Stream) Analytics(ctx context.Context, opt AnalyticsOptions) (Analytics, error) {
	var rows []Row
	err := s.each(ctx, func(r Row) error {
		for _, t := range record.AnalyticsTypes {
			if r.Type == t {
				r.Payload = ""
				rows = append(rows, r)
			}
		}
		return nil
	})
	if err != nil {
		return Analytics{}, err
	}
	return record.Analyze(rows, opt), nil
}

// OpenReader returns the ClickHouse store when dsn is set, else the stream
// reader: what `airlock audit` and the console use.
func OpenReader(ctx context.Context, dsn string, js jetstream.JetStream, stream string, key *record.Key) (Reader, error) {
	if dsn != "" {
		return Open(ctx, dsn)
	}
	if js == nil {
		return nil, errors.New("no ClickHouse DSN and no NATS connection: set clickhouse.dsn (or --clickhouse) or make NATS reachable")
	}
	return NewStream(js, stream, key), nil
}
