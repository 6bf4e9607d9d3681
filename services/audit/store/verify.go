package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/audit/record"
)

// VerifyOptions say what to verify the stored trail with.
type VerifyOptions struct {
	// Key is the audit key the sink seals rows with; required.
	Key *record.Key
	// JS and Stream name the events stream to cross-check the rows against
	// for the range it still retains; with JS nil only the chain is checked.
	JS     jetstream.JetStream
	Stream string
	// Durable is the sink's consumer (default "audit"): every event up to
	// its acknowledged sequence must be stored, later ones may be pending.
	Durable string
}

var errStop = errors.New("stop")

// Verify checks every stored row with the key (altered and forged rows,
// broken links, an unexplained start) and, with a stream, compares the rows
// with the stream's events (missing, extra, altered, beyond the stream).
func (c *ClickHouse) Verify(ctx context.Context, opt VerifyOptions) (Report, error) {
	if opt.Key == nil {
		return Report{}, errors.New("verify needs the audit key: set audit.key_file (or AIRLOCK_AUDIT_KEY) to the key the audit service uses")
	}
	if opt.Durable == "" {
		opt.Durable = "audit"
	}
	var storedErr, streamErr error
	stored := func(yield func(Row) bool) {
		err := c.Each(ctx, Filter{}, func(r Row) error {
			if !yield(r) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			storedErr = err
		}
	}
	var rng record.StreamRange
	var fromStream func(yield func(Row) bool)
	if opt.JS != nil {
		st, err := opt.JS.Stream(ctx, opt.Stream)
		if err != nil {
			return Report{}, fmt.Errorf("verify against the events stream %s: %w (pass --no-stream to check the chain alone)", opt.Stream, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return Report{}, fmt.Errorf("verify against the events stream %s: %w", opt.Stream, err)
		}
		rng.First, rng.Last = info.State.FirstSeq, info.State.LastSeq
		if ci, err := st.Consumer(ctx, opt.Durable); err == nil {
			cinfo, err := ci.Info(ctx)
			if err != nil {
				return Report{}, fmt.Errorf("read the audit consumer %s: %w", opt.Durable, err)
			}
			rng.Acked = cinfo.AckFloor.Stream
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return Report{}, fmt.Errorf("read the audit consumer %s: %w", opt.Durable, err)
		}
		fromStream = func(yield func(Row) bool) {
			if info.State.Msgs == 0 {
				return
			}
			err := ReadRange(ctx, opt.JS, opt.Stream, rng.First, rng.Last, func(m record.Msg) error {
				if !yield(record.Build(m)) {
					return errStop
				}
				return nil
			})
			if err != nil && !errors.Is(err, errStop) {
				streamErr = err
			}
		}
	}
	rep := record.Verify(opt.Key, stored, fromStream, rng)
	if storedErr != nil {
		return rep, fmt.Errorf("verify: read the audit store: %w", storedErr)
	}
	if streamErr != nil {
		return rep, fmt.Errorf("verify: read the events stream: %w", streamErr)
	}
	return rep, nil
}
