package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Every read of a bucket's stored entries here goes through a watch's
// initial values, which the client library ends with a nil entry once it has
// been handed as many messages as the consumer had pending when it was made.
// A message that is removed in between — it expires (a per-key TTL, a
// purge's marker, the bucket's MaxAge) after the consumer counted it but
// before it was delivered — is never handed out, so that nil never comes
// and the read waits until its context ends: for ever under a context with
// no deadline (a sweep's, a request's), as a console test did for 24
// minutes. jetstream.KeyValue's ListKeys and History read the same way: use
// Keys and History here instead.
//
// A read that hears nothing for initialStall starts its watch again: the
// new consumer counts only what is stored then. The wait doubles with each
// start, up to maxInitialStall, so that a server too slow to deliver within
// it is not asked again and again.
const (
	initialStall    = time.Second
	maxInitialStall = 16 * time.Second
)

// ReadKey returns key's newest entry, read through a watch filtered on the
// key rather than a get. A replicated bucket serves reads from its leader
// (Provision turns Direct Get off), and a get through STREAM.MSG.GET names
// no key in its subject, so a user allowed to read only some keys of a
// bucket is refused it; a watch's consumer names its key, so such a user can
// read them on every layout. The watch's consumer may trail the leader by a
// write on a replicated bucket: use it for what is shown, not to decide.
func ReadKey(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	var found jetstream.KeyValueEntry
	if err := readInitial(ctx, kv, key, byKey, func(e jetstream.KeyValueEntry) { found = e }, jetstream.IgnoreDeletes()); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if found == nil {
		return nil, jetstream.ErrKeyNotFound
	}
	return found, nil
}

// KeyedReads is kv whose Get reads through ReadKey: for a user whose
// permissions name the keys it may read (see natsauth).
func KeyedReads(kv jetstream.KeyValue) jetstream.KeyValue { return keyedReads{kv} }

type keyedReads struct{ jetstream.KeyValue }

func (k keyedReads) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return ReadKey(ctx, k.KeyValue, key)
}

// ReadAll calls fn with each current entry of kv under filter (a key or a
// wildcard; deleted keys are skipped), once per key, in one pass: one watch
// hands out keys and values together, where listing the keys and then
// getting each would be one request per key. It returns once every stored
// entry has been handed out, or when ctx ends.
func ReadAll(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(jetstream.KeyValueEntry)) error {
	if err := readInitial(ctx, kv, filter, byKey, fn, jetstream.IgnoreDeletes()); err != nil {
		return fmt.Errorf("read bucket %s: %w", kv.Bucket(), err)
	}
	return nil
}

// Keys lists the keys of kv under filter that hold a value (what
// ListKeysFiltered lists), reading their headers only.
func Keys(ctx context.Context, kv jetstream.KeyValue, filter string) ([]string, error) {
	var keys []string
	err := readInitial(ctx, kv, filter, byKey, func(e jetstream.KeyValueEntry) { keys = append(keys, e.Key()) },
		jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, fmt.Errorf("list the keys of bucket %s: %w", kv.Bucket(), err)
	}
	return keys, nil
}

// History returns every stored revision of key, oldest first, deletes and
// purges included; jetstream.ErrKeyNotFound when none is stored.
func History(ctx context.Context, kv jetstream.KeyValue, key string) ([]jetstream.KeyValueEntry, error) {
	var entries []jetstream.KeyValueEntry
	if err := readInitial(ctx, kv, key, byRevision, func(e jetstream.KeyValueEntry) { entries = append(entries, e) }, jetstream.IncludeHistory()); err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", key, err)
	}
	if len(entries) == 0 {
		return nil, jetstream.ErrKeyNotFound
	}
	return entries, nil
}

// readInitial hands fn the initial values of a Watch of filter with
// opts, each key once when byKey (a watch started again may hand out a
// newer revision of a key it handed out before).
func readInitial(ctx context.Context, kv jetstream.KeyValue, filter string, each once, fn func(jetstream.KeyValueEntry), opts ...jetstream.WatchOpt) error {
	w, err := Watch(ctx, kv, filter, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	handed := map[string]bool{} // byKey: the keys handed out
	for {
		select {
		case e, open := <-w.Updates():
			switch {
			case !open && ctx.Err() != nil:
				return ctx.Err()
			case !open:
				return errors.New("the watch ended before its initial values did")
			case e == nil: // the watch's initial values are done
				return nil
			case each == byKey && handed[e.Key()]:
				continue
			case each == byKey:
				handed[e.Key()] = true
			}
			fn(e)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// once says what a read hands out once: each key (its newest entry) or
// each revision (a key's history).
type once int

const (
	byKey once = iota
	byRevision
)

// Watch is kv.Watch(ctx, filter, opts...) whose initial values end even
// when the watch stalls (see initialStall): it is started again, and what
// it hands out again (an entry at a revision handed out before) is left out.
// Use it for every watch that waits for its initial values' end; not with
// jetstream.UpdatesOnly, whose watch has no initial values and would be
// started again every wait (call kv.Watch for that).
func Watch(ctx context.Context, kv jetstream.KeyValue, filter string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := kv.Watch(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	sw := &steadyWatcher{updates: make(chan jetstream.KeyValueEntry, 64), stop: make(chan struct{})}
	go sw.pump(ctx, kv, filter, opts, w)
	return sw, nil
}

// Transient says whether a failed request to JetStream (a watch's start,
// a bucket's lookup) may succeed if tried again: the server did not answer
// in time, no server answered, or JetStream cannot serve now
// (jetStreamAway). A bucket or stream that does not exist is not transient.
func Transient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || jetStreamAway(err)
}

// jetStreamAway says whether err is JetStream's answer that it cannot serve
// now: "not enabled", which is how the legacy API a watch's consumer is made
// with reports that no JetStream server answered, or "temporarily
// unavailable", a cluster without a leader yet.
func jetStreamAway(err error) bool {
	var legacy *nats.APIError
	if errors.As(err, &legacy) {
		return legacy.ErrorCode == nats.JSErrCodeJetStreamNotEnabled || legacy.ErrorCode == nats.JSErrCodeJetStreamNotAvailable
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabled || api.ErrorCode == jetstream.ErrorCode(nats.JSErrCodeJetStreamNotAvailable))
}

// steadyWatcher is Watch's watcher: pump hands its updates out.
type steadyWatcher struct {
	updates chan jetstream.KeyValueEntry
	stop    chan struct{} // closed by Stop
	once    sync.Once
}

func (s *steadyWatcher) Updates() <-chan jetstream.KeyValueEntry { return s.updates }

// Stop ends the watch. It does not wait for pump to stop its consumer: with
// the server away that takes as long as a request's timeout, twice over
// while a new start is being made.
func (s *steadyWatcher) Stop() error {
	s.once.Do(func() { close(s.stop) })
	return nil
}

// pump hands out w's updates until it ends, ctx does or Stop is called,
// starting the watch again while its initial values stall.
func (s *steadyWatcher) pump(ctx context.Context, kv jetstream.KeyValue, filter string, opts []jetstream.WatchOpt, w jetstream.KeyWatcher) {
	defer close(s.updates)
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	handOut := func(e jetstream.KeyValueEntry) bool {
		select {
		case s.updates <- e:
			return true
		case <-s.stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
	// handedThrough: the revision of the last initial value handed out. A
	// watch hands its initial values out in revision order, so a new start
	// has handed out before every one it hands out at or below it.
	var handedThrough uint64
	stall := initialStall
	quiet := time.NewTimer(stall)
	defer quiet.Stop()
	updates := w.Updates()
	for initial := true; ; {
		var stalled <-chan time.Time
		if initial {
			stalled = quiet.C
		}
		select {
		case e, open := <-updates:
			if !open {
				return
			}
			if !initial {
				if !handOut(e) {
					return
				}
				continue
			}
			if e == nil {
				initial = false
			} else if e.Revision() <= handedThrough {
				quiet.Reset(stall)
				continue
			} else {
				handedThrough = e.Revision()
			}
			if !handOut(e) {
				return
			}
			quiet.Reset(stall)
		case <-stalled:
			if w != nil {
				_ = w.Stop() // its updates end: not read again
			}
			w, updates = nil, nil
			nw, err := kv.Watch(ctx, filter, opts...)
			switch {
			case err == nil:
				w, updates = nw, nw.Updates()
			case !Transient(err):
				// The connection closed, the bucket is gone, or this user may
				// not read it: the updates end, as the library's own watch's
				// do when its connection closes, and the caller sees it.
				return
			}
			// A start that timed out (the server is away) is tried again
			// after the next wait.
			stall = min(2*stall, maxInitialStall)
			quiet.Reset(stall)
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}
