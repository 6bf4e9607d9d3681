package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Followed is what Follow hands out: an entry of the bucket, or (Entry nil)
// the mark that a start of the watch has handed out everything stored when
// it started.
type Followed struct {
	Entry jetstream.KeyValueEntry
	// Replayed: the entry was stored when this start of the watch began (an
	// earlier start may have handed it out already); false for a change
	// made since, and for the mark.
	Replayed bool
}

// Follow bounds the wait between starts of a watch that ended: it doubles
// from followRetry with each start that fails, up to followRetryMax.
const (
	followRetry    = 100 * time.Millisecond
	followRetryMax = 5 * time.Second
)

// FollowOptions says how Follow reports and what it does on failure.
type FollowOptions struct {
	// What names the bucket's contents in log lines and errors.
	What string
	Log  *slog.Logger
	// Reconnects is the connection's count of reconnects: the watch is
	// started again once it moves. Nil: not checked.
	Reconnects func() uint64
	// Persist: a first start that fails for good is logged and tried
	// again like any other, instead of returned — for a read model a
	// running service can do without for a while.
	Persist bool
}

// Follow watches kv's keys under filter until ctx ends, as a read model
// that must stay in step with its bucket does: the watch (Watch) is started
// again whenever it ends (its connection closed, or it could not be started
// again after a stall) and, given o.Reconnects, after the connection
// reconnected, because an ordered consumer on a restarted server can take
// many seconds to notice it is gone. Each start hands out what is stored
// (Replayed), then its mark, then what changes: a start may hand out again
// an entry handed out before, so apply entries by revision.
//
// A start that fails is logged and tried again, except, unless o.Persist, a
// first start that cannot succeed if tried again (the bucket is gone, this
// user may not read it, the connection closed): Follow then returns its
// failure, having started nothing. The channel closes once ctx has ended,
// or when the connection has closed.
func Follow(ctx context.Context, kv jetstream.KeyValue, filter string, o FollowOptions) (<-chan Followed, error) {
	f := &follower{kv: kv, filter: filter, FollowOptions: o}
	w, err := Watch(ctx, kv, filter)
	for retry := followRetry; err != nil; retry = min(2*retry, followRetryMax) {
		if errors.Is(err, nats.ErrConnectionClosed) || !Transient(err) && !o.Persist || ctx.Err() != nil {
			return nil, fmt.Errorf("watch %s (bucket %s): %w", o.What, kv.Bucket(), err)
		}
		f.failed(err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("watch %s (bucket %s): %w", o.What, kv.Bucket(), ctx.Err())
		case <-time.After(retry):
		}
		w, err = Watch(ctx, kv, filter)
	}
	// Buffered, so that a reader can tell a burst (len > 0) from its end.
	changes := make(chan Followed, 64)
	f.changes = changes
	go f.run(ctx, w)
	return changes, nil
}

type follower struct {
	FollowOptions
	kv      jetstream.KeyValue
	filter  string
	changes chan<- Followed
}

// failed logs a start of the watch that failed, to be tried again.
func (f *follower) failed(err error) {
	f.Log.Warn("watching "+f.What+" failed; retrying", "bucket", f.kv.Bucket(), "err", err)
}

// run hands out w's changes, and those of each start after it, until ctx
// ends.
func (f *follower) run(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(f.changes)
	retry := followRetry
	for {
		if w != nil {
			if f.follow(ctx, w) {
				retry = followRetry
			} else { // it ended before its mark: not at once again
				retry = min(2*retry, followRetryMax)
			}
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		var err error
		if w, err = Watch(ctx, f.kv, f.filter); err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				// Nothing more can come: the channel closes, as a watch's does.
				f.Log.Warn("the watch of "+f.What+" ended with its connection", "bucket", f.kv.Bucket())
				return
			}
			f.failed(err)
			w, retry = nil, min(2*retry, followRetryMax)
		}
	}
}

// follow hands out w's changes until it ends, ctx does, or the connection
// reconnected; it reports whether w handed out its mark.
func (f *follower) follow(ctx context.Context, w jetstream.KeyWatcher) (marked bool) {
	var check <-chan time.Time
	var seen uint64
	if f.Reconnects != nil {
		seen = f.Reconnects()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		check = t.C
	}
	replaying := true
	for {
		select {
		case <-ctx.Done():
			return !replaying
		case <-check:
			if f.Reconnects() != seen {
				f.Log.Info("reconnected to NATS; watching " + f.What + " again")
				return !replaying
			}
		case e, open := <-w.Updates():
			if !open {
				if ctx.Err() == nil {
					f.Log.Warn("the watch of "+f.What+" ended; starting it again", "bucket", f.kv.Bucket())
				}
				return !replaying
			}
			c := Followed{Entry: e, Replayed: replaying && e != nil}
			if e == nil {
				replaying = false
			}
			select {
			case f.changes <- c:
			case <-ctx.Done():
				return !replaying
			}
		}
	}
}
