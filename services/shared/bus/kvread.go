package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadKey returns key's newest entry, read through a watch filtered on the
// key rather than a get. A replicated bucket serves reads from its leader
// (Provision turns Direct Get off), and a get through STREAM.MSG.GET names
// no key in its subject, so a user allowed to read only some keys of a
// bucket is refused it; a watch's consumer names its key, so such a user can
// read them on every layout. The watch's consumer may trail the leader by a
// write on a replicated bucket: use it for what is shown, not to decide.
func ReadKey(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	w, err := kv.Watch(ctx, key, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	defer func() { _ = w.Stop() }()
	select {
	case e := <-w.Updates():
		if e == nil { // the watch's initial values are done: no entry
			return nil, jetstream.ErrKeyNotFound
		}
		return e, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// KeyedReads is kv whose Get reads through ReadKey: for a user whose
// permissions name the keys it may read (see natsauth).
func KeyedReads(kv jetstream.KeyValue) jetstream.KeyValue { return keyedReads{kv} }

type keyedReads struct{ jetstream.KeyValue }

func (k keyedReads) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return ReadKey(ctx, k.KeyValue, key)
}

// ReadAll calls fn with each current entry of kv under filter (a key or a
// wildcard; deleted keys are skipped), in one pass: one watch hands out keys
// and values together, where listing the keys and then getting each would
// be one request per key. It returns once every stored entry has been
// handed out, or when ctx ends.
func ReadAll(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(jetstream.KeyValueEntry)) error {
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil { // the watch's initial values are done
				return nil
			}
			fn(e)
		case <-ctx.Done():
			return fmt.Errorf("read bucket %s: %w", kv.Bucket(), ctx.Err())
		}
	}
}
