package clientwait

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
)

// Rejoins is one gateway replica's view of the rejoin entries (keys
// "r.<hash>"), so that a tools/call, which must look its key up, does not
// wait for the bucket: every call of a session looks, and almost none finds
// anything.
//
// The bucket stays the source of truth. The view answers only for keys the
// caller owns: the key's session was started by this replica, which alone
// serves it and so alone writes its entries — each stored, and in the
// view, before its client is told to call again. What this replica writes
// (Join, Deliver) enters the view as the write succeeds; a watch of the
// bucket's rejoin keys (Follow) brings in whatever else changes them (an
// operator's delete, a write this replica was not told the fate of).
// Every other lookup is a Get: an entry another replica wrote may not have
// reached the watch yet, or may be delivered already, and the outcome must
// be returned once. So is a key whose write is in doubt (it failed, or lost
// a race).
//
// Offers (keys "a.<hash>", which every replica may write) are not in the
// view: they are read and written through the Store. A view of them could
// answer "none" for an offer another replica stored seconds before, while
// this replica's watch is stalled (a NATS server that hosted its consumer
// died, and the watch resumes only once its heartbeats are missed): the
// client of a call whose replica was killed then made it again instead of
// rejoining it (chaos, seed 17).
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
	// failed), a claim of it lost a race the view has not seen the end of,
	// or its entry did not decode: the bucket is asked.
	doubt bool
	// until: the doubt ends once the watch shows a later revision (0: only
	// this replica's next write of the key ends it).
	until uint64
	rev   uint64
	// at: when the write was made; the bucket forgets an entry its TTL
	// later, with nothing on the watch, and so does the view.
	at time.Time
}

// Rejoins is an empty view of s's rejoin entries; run Follow to keep it in
// step with the bucket.
func (s *Store) Rejoins() *Rejoins { return &Rejoins{s: s, known: map[string]view{}} }

// Find returns the rejoin entry for key; ok is false when there is none.
// mine says the caller owns the key (see Rejoins): the view answers.
func (v *Rejoins) Find(ctx context.Context, key string, mine bool) (r Rejoin, ok bool, err error) {
	if !viewed(key) {
		return v.s.Find(ctx, key)
	}
	v.mu.Lock()
	k, seen := v.known[key]
	v.mu.Unlock()
	if mine && !k.doubt {
		if !seen || !k.present || v.expired(k, time.Now()) {
			return Rejoin{}, false, nil
		}
		return k.r, true, nil
	}
	return v.s.Find(ctx, key)
}

// Join is Store.Join, and the entry is in the view once stored. A write
// that failed may still have been stored: the key is then looked up in the
// bucket until this replica writes it again.
func (v *Rejoins) Join(ctx context.Context, key string, r Rejoin) (Rejoin, error) {
	r, err := v.s.Join(ctx, key, r)
	if !viewed(key) {
		return r, err
	}
	if err != nil {
		v.distrust(key)
		return Rejoin{}, err
	}
	v.wrote(key, view{r: r, present: true, rev: r.entryRev, at: time.Now()})
	return r, nil
}

// Deliver is Store.Deliver, and the entry leaves the view once deleted.
// When the claim's answer is unknown, the key is looked up in the bucket
// until this replica writes it again; when the claim was lost, until the
// watch shows what won it.
func (v *Rejoins) Deliver(ctx context.Context, key string, r Rejoin) (won bool, err error) {
	won, err = v.s.Deliver(ctx, key, r)
	switch {
	case !viewed(key):
	case err != nil:
		v.distrust(key)
	case !won:
		v.outdated(key, r.entryRev)
	default:
		v.delivered(key, r.entryRev)
	}
	return won, err
}

// Follow keeps the view in step with the bucket's rejoin entries until ctx
// ends (bus.Follow: a watch that ends, a reconnect, is started again); what
// a start replays is applied by revision, so nothing older overwrites the
// view; a start that fails is tried again for as long as the connection
// lasts.
func (v *Rejoins) Follow(ctx context.Context, log *slog.Logger) {
	changes, err := bus.Follow(ctx, v.s.kv, RejoinPrefix+">", bus.FollowOptions{What: "the rejoin entries", Log: log, Persist: true})
	if err != nil {
		if ctx.Err() == nil { // the connection closed
			log.Error("the rejoin entries cannot be watched: this replica sees only its own writes of them", "err", err)
		}
		return
	}
	var sweep <-chan time.Time
	if v.s.ttl > 0 {
		t := time.NewTicker(min(v.s.ttl, time.Hour))
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case now := <-sweep:
			v.forget(now)
		case c, open := <-changes:
			if !open {
				return
			}
			e := c.Entry
			if e == nil { // what was stored has been read
				continue
			}
			k := view{rev: e.Revision(), at: e.Created()}
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
	k.doubt, k.until = old.doubt && (old.until == 0 || k.rev <= old.until), old.until
	if !k.present && !k.doubt {
		delete(v.known, key)
		return
	}
	v.known[key] = k
}

// wrote records this replica's own write of key, which settles any doubt
// about it.
func (v *Rejoins) wrote(key string, k view) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.known[key]; ok && old.rev > k.rev {
		return
	}
	v.known[key] = k
}

// delivered records this replica's delete of the entry it read at rev.
// Until the watch shows the delete, the view keeps it as a delete at rev,
// so that a late message of the watch about the entry cannot bring it
// back; once the watch has shown it (the key is gone from the view, or
// known at a later revision), nothing is kept: nothing older can follow.
func (v *Rejoins) delivered(key string, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.known[key]; ok && old.rev <= rev {
		v.known[key] = view{rev: rev, at: time.Now()}
	}
}

// outdated records that a claim of the entry read at rev lost: something
// changed the key after rev. Unless the view has seen that change, the
// bucket is asked until the watch shows it.
func (v *Rejoins) outdated(key string, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.known[key]; ok && old.rev <= rev && !old.doubt {
		old.doubt, old.until = true, rev
		v.known[key] = old
	}
}

// viewed reports whether the view holds key: rejoin entries, not offers
// (see Rejoins).
func viewed(key string) bool { return strings.HasPrefix(key, RejoinPrefix) }

// expired reports whether the bucket has forgotten what k records.
func (v *Rejoins) expired(k view, now time.Time) bool {
	return v.s.ttl > 0 && !k.at.IsZero() && now.Sub(k.at) >= v.s.ttl
}

// forget drops what the view records of keys the bucket has forgotten:
// nothing older than them can come, and their sessions are long over.
func (v *Rejoins) forget(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key, k := range v.known {
		if v.expired(k, now) {
			delete(v.known, key)
		}
	}
}

// distrust makes every later Find of key ask the bucket (until this
// replica writes the key again): a write of it may or may not be stored.
func (v *Rejoins) distrust(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := v.known[key]
	k.doubt, k.until, k.at = true, 0, time.Now()
	v.known[key] = k
}
