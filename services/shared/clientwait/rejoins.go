package clientwait

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Rejoins is one gateway replica's view of the rejoin entries, so that a
// tools/call, which must look its key up, does not wait for the bucket:
// every call of a session looks, and almost none finds anything.
//
// The bucket stays the source of truth. The view answers only for keys the
// caller owns: the key's session was started by this replica, which alone
// serves it and so alone writes its entries — each stored, and in the
// view, before its client is told to call again. What this replica writes
// (Remember, Deliver) enters the view as the write succeeds; a watch of the
// bucket's rejoin keys (Follow) brings in whatever else changes them (an
// operator's delete, a write this replica was not told the fate of).
// Every other lookup is a Get: an entry another replica wrote may not have
// reached the watch yet, or may be delivered already, and the outcome must
// be returned once. So is a key whose write is in doubt (it failed, or lost
// a race).
type Rejoins struct {
	s *Store

	mu    sync.Mutex
	known map[string]view
}

// view is what the replica knows of one key at revision rev (the bucket's
// revision of the write it saw; for an entry it delivered, the entry's
// revision: anything written after the delete has a higher one).
type view struct {
	r       Rejoin
	present bool
	// doubt: a write of the key may or may not have been stored (it
	// failed, or lost a race), or its entry did not decode: the bucket is
	// asked.
	doubt bool
	rev   uint64
}

// Rejoins is an empty view of s's rejoin entries; run Follow to keep it in
// step with the bucket.
func (s *Store) Rejoins() *Rejoins { return &Rejoins{s: s, known: map[string]view{}} }

// Find returns the rejoin entry for key; ok is false when there is none.
// mine says the caller owns the key (see Rejoins): the view answers.
func (v *Rejoins) Find(ctx context.Context, key string, mine bool) (r Rejoin, ok bool, err error) {
	v.mu.Lock()
	k, seen := v.known[key]
	v.mu.Unlock()
	if mine && !k.doubt {
		if !seen || !k.present {
			return Rejoin{}, false, nil
		}
		return k.r, true, nil
	}
	return v.s.Find(ctx, key)
}

// Remember is Store.Remember, and the entry is in the view once stored. A
// write that failed may still have been stored: the key is then looked up
// in the bucket until this replica writes it again.
func (v *Rejoins) Remember(ctx context.Context, key string, r Rejoin) error {
	rev, err := v.s.remember(ctx, key, r)
	if err != nil {
		v.distrust(key)
		return err
	}
	r.entryRev = rev
	v.wrote(key, view{r: r, present: true, rev: rev})
	return nil
}

// Deliver is Store.Deliver, and the entry leaves the view once deleted.
// When the claim was lost or its answer is unknown, the key is looked up
// in the bucket until this replica writes it again.
func (v *Rejoins) Deliver(ctx context.Context, key string, r Rejoin) (won bool, err error) {
	won, err = v.s.Deliver(ctx, key, r)
	if err != nil || !won {
		v.distrust(key)
		return won, err
	}
	// Nothing was written to the key between r and its delete (the delete
	// compared revisions): whatever has a higher revision came after it.
	v.wrote(key, view{rev: r.entryRev})
	return true, nil
}

// Follow keeps the view in step with the bucket's rejoin keys until ctx
// ends; a watch that ends (a reconnect) is started again, and what it
// replays is applied by revision, so nothing older overwrites the view.
func (v *Rejoins) Follow(ctx context.Context, log *slog.Logger) {
	for ctx.Err() == nil {
		w, err := v.s.kv.Watch(ctx, "r.>")
		if err != nil {
			log.Warn("watching the rejoin entries failed; a repeated call is looked up in the bucket meanwhile", "err", err)
		} else {
			v.follow(ctx, w)
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (v *Rejoins) follow(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil { // what was stored has been read
				continue
			}
			k := view{rev: e.Revision()}
			if e.Operation() == jetstream.KeyValuePut {
				if json.Unmarshal(e.Value(), &k.r) != nil {
					v.distrust(e.Key()) // Find reads it from the bucket, and says why it fails
					continue
				}
				k.r.entryRev, k.present = e.Revision(), true
			}
			v.saw(e.Key(), k)
		}
	}
}

// saw records what the watch showed of key at revision k.rev, unless the
// view knows as late a revision. A delete the watch
// shows ends what the view keeps of the key: nothing older can follow it.
// A key in doubt stays in doubt.
func (v *Rejoins) saw(key string, k view) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.known[key]
	if ok && old.rev >= k.rev {
		return
	}
	k.doubt = old.doubt
	if !k.present && !k.doubt {
		delete(v.known, key)
		return
	}
	v.known[key] = k
}

// wrote records this replica's own write of key, which settles any doubt
// about it. A delivered entry is kept as a delete at its revision until
// the watch shows the delete, so a late message of the watch about the
// entry cannot bring it back.
func (v *Rejoins) wrote(key string, k view) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.known[key]; ok && old.rev > k.rev {
		return
	}
	v.known[key] = k
}

// distrust makes every later Find of key ask the bucket (until this
// replica writes the key again): a write of it may or may not be stored.
func (v *Rejoins) distrust(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := v.known[key]
	k.doubt = true
	v.known[key] = k
}
