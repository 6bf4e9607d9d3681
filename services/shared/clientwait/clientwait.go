// Package clientwait records, in a JetStream KV bucket shared by every
// gateway replica and read by the console, what the gateway knows of MCP calls that
// wait for a person longer than a client waits for an answer:
//
//   - a rejoin entry (key "r.<hash>", the gateway's hash of the endpoint,
//     its agent, the session, the tool and the arguments' digest): the call
//     a client was told to call again for. A repeated identical call in that session finds
//     it and follows that call instead of asking again; the request that
//     returns the outcome deletes the entry by revision (compare-and-swap),
//     so the outcome is returned once and a later identical call is new.
//   - an offer (key "a.<hash>", the gateway's hash of the endpoint, its
//     agent, the person it acts for, its profile, the tool and the
//     arguments' digest: no session): the call the
//     same identical call made in another session of the endpoint (its
//     replica died, say) rejoins once no client waits for it. The request
//     that returns the call's outcome deletes it by revision too.
//   - a presence lease (key "c.<agent>.<call>"): until when each request
//     waiting for the call is known to wait, renewed while it does, so a
//     reviewer can see whether anyone still waits for the outcome, and no
//     session adopts a call a client still waits for (at most MaxWaiters
//     leases a call; deleted by Release when the client that made the call
//     gives up alone, so no session adopts a call being withdrawn).
//   - a delivery claim (key "d.<agent>.<call>"): the session the call's
//     outcome went to; it goes to no other (Claim). It carries its own
//     TTL: it lives only as long as a repeat may be answered the outcome.
package clientwait

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// The key prefixes of rejoin entries and offers: the gateway names its keys
// with them, and the Rejoins view holds rejoin entries alone.
const (
	RejoinPrefix = "r."
	OfferPrefix  = "a."
)

// Store is the bucket. Its zero value is unusable; build it with Open.
type Store struct {
	kv jetstream.KeyValue
	// ttl is how long the bucket keeps an entry (0: for ever).
	ttl time.Duration
	// keyTTLs: an entry may carry its own TTL (bus.Provision enables it;
	// a bucket not provisioned since keeps every entry ttl).
	keyTTLs bool
}

// Open binds the bucket (bus.Provision creates it).
func Open(ctx context.Context, js jetstream.JetStream, bucket string) (*Store, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("client-waits bucket %s: %w (is the bus provisioned?)", bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("client-waits bucket %s: %w", bucket, err)
	}
	return &Store{kv: kv, ttl: st.TTL(), keyTTLs: bus.TakesKeyTTLs(st)}, nil
}

// Rejoin is a rejoin entry: the call a repeated identical call follows.
type Rejoin struct {
	Call     string `json:"call"`
	Revision uint32 `json:"revision"`
	// Endpoint is the gateway endpoint that wrote the entry, whose sweep
	// removes it once the call has ended and its outcome can no longer be
	// returned (Ended). Absent in entries written before 2026-11: the
	// bucket's TTL removes those.
	Endpoint string `json:"endpoint,omitempty"`
	// Revision of the entry in the bucket, for the delete that delivers.
	entryRev uint64
}

// Same reports whether r and o are the same write of an entry (as Find,
// Join or Update returned them).
func (r Rejoin) Same(o Rejoin) bool {
	return r.Call == o.Call && r.Revision == o.Revision && r.entryRev == o.entryRev
}

// remember stores the rejoin entry for key (replacing one left by a call
// whose outcome was never fetched); it returns the entry's revision.
func (s *Store) remember(ctx context.Context, key string, r Rejoin) (uint64, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Put(ctx, key, raw)
	if err != nil {
		return 0, fmt.Errorf("remember call %s for a repeated call: %w", r.Call, err)
	}
	return rev, nil
}

// Join stores the entry r for key (a rejoin entry, or an offer), replacing
// one left by a call whose outcome was never fetched, and returns it as
// stored: the Deliver that ends it deletes that revision.
func (s *Store) Join(ctx context.Context, key string, r Rejoin) (Rejoin, error) {
	rev, err := s.remember(ctx, key, r)
	if err != nil {
		return Rejoin{}, err
	}
	r.entryRev = rev
	return r, nil
}

// Update replaces the entry old (as Join or Find returned it) with r, if
// the key still holds old: replaced is false when something else wrote or
// deleted the key since (an identical call made since offered itself, or
// the call's outcome was delivered), which then stays.
func (s *Store) Update(ctx context.Context, key string, old, r Rejoin) (_ Rejoin, replaced bool, err error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return Rejoin{}, false, err
	}
	rev, err := s.kv.Update(ctx, key, raw, old.entryRev)
	switch {
	case bus.Conflict(err):
		return Rejoin{}, false, nil
	case err != nil:
		return Rejoin{}, false, fmt.Errorf("update the entry of call %s: %w", r.Call, err)
	}
	r.entryRev = rev
	return r, true, nil
}

// Find returns the rejoin entry for key; ok is false when there is none.
func (s *Store) Find(ctx context.Context, key string) (r Rejoin, ok bool, err error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Rejoin{}, false, nil
	}
	if err != nil {
		return Rejoin{}, false, fmt.Errorf("look up a repeated call: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Rejoin{}, false, fmt.Errorf("a rejoin entry does not decode: %w", err)
	}
	r.entryRev = e.Revision()
	return r, true, nil
}

// Deliver claims the right to return r's outcome: it deletes the entry if
// it is still the one Find returned. won is false when another request
// (on any replica) claimed it first.
func (s *Store) Deliver(ctx context.Context, key string, r Rejoin) (won bool, err error) {
	err = s.kv.Delete(ctx, key, jetstream.LastRevision(r.entryRev))
	switch {
	case err == nil:
		return true, nil
	case bus.Conflict(err):
		return false, nil
	}
	return false, fmt.Errorf("mark call %s's outcome delivered: %w", r.Call, err)
}

// Presence is whether a client waits for a call: one does until Until.
type Presence struct {
	Endpoint string    `json:"endpoint"`
	Until    time.Time `json:"until"`
	// Waiters are the requests waiting for the call (several sessions may
	// follow one call: its own, one that adopted it), each until when its
	// lease runs; Until is the latest. A request that stops waiting ends
	// its own lease only, so no other request's stop reads as "nobody
	// waits" while one still does. Absent in entries written before
	// 2026-11: the entry is one anonymous waiter.
	Waiters map[string]time.Time `json:"waiters,omitempty"`
}

// Waiting reports whether a client waits at now.
func (p Presence) Waiting(now time.Time) bool { return now.Before(p.Until) }

// leases is every waiter's lease (one anonymous waiter for an entry
// without waiters).
func (p Presence) leases() map[string]time.Time {
	if p.Waiters != nil {
		return p.Waiters
	}
	if p.Until.IsZero() {
		return map[string]time.Time{}
	}
	return map[string]time.Time{"": p.Until}
}

func presenceKey(agent, call string) string { return "c." + agent + "." + call }

// MaxWaiters is how many requests' leases may run on one call at once: an
// agent repeating a call many times at once in its sessions must not grow
// the entry, rewritten every half heartbeat, without bound.
const MaxWaiters = 16

// ErrTooManyWaiters: MaxWaiters requests already wait for the call; a
// lease for another one was not added.
var ErrTooManyWaiters = errors.New("too many requests wait for the call")

// Lease is one request's lease on a call: waiter among the call's
// Presence.Waiters (several requests may wait for one call: its own
// session's, one that adopted it). It keeps what its last write stored,
// so that a renewal nothing else wrote before is one compare-and-swap on
// that revision, with no read first; the entry is read only when
// something else wrote it since. One goroutine at a time may use it.
type Lease struct {
	s                   *Store
	agent, call, waiter string
	// read: last and rev are the entry as stored at rev (rev 0: there is
	// none); not read: the next Hold reads the entry first.
	read bool
	last Presence
	rev  uint64
}

// Lease is waiter's lease on the call (waiter "": the call's one anonymous
// waiter); nothing is written until Hold.
func (s *Store) Lease(agent, call, waiter string) *Lease {
	return &Lease{s: s, agent: agent, call: call, waiter: waiter}
}

// Hold records that waiter's client of p.Endpoint waits for the call until
// p.Until (renew it before then; set it to now when the client stops
// waiting), and leaves the other waiters' leases as they are
// (compare-and-swap, so that simultaneous waiters do not overwrite each
// other). Leases that ended before the latest one are dropped. A new
// waiter's running lease is refused (ErrTooManyWaiters) while MaxWaiters
// others run.
func (l *Lease) Hold(ctx context.Context, p Presence) error {
	key := presenceKey(l.agent, l.call)
	for attempt := 0; ; attempt++ {
		if !l.read {
			if err := l.load(ctx, key); err != nil {
				return err
			}
		}
		now := time.Now()
		next, err := l.next(p, now)
		if err != nil {
			l.read = false // refused on what was read: the next Hold reads again, a lease may have ended meanwhile
			return err
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return err
		}
		var rev uint64
		if l.rev == 0 {
			rev, err = l.s.kv.Create(ctx, key, raw)
		} else {
			rev, err = l.s.kv.Update(ctx, key, raw, l.rev)
		}
		switch {
		case err == nil:
			l.last, l.rev = next, rev
			return nil
		case bus.Conflict(err) && attempt < 10 && ctx.Err() == nil:
			l.read = false
			continue // something else wrote meanwhile: apply this lease to what it wrote
		}
		l.read = false // stored or not: the next Hold reads what is
		return fmt.Errorf("record whether a client waits for call %s: %w", l.call, err)
	}
}

// load reads the call's presence as stored.
func (l *Lease) load(ctx context.Context, key string) error {
	e, err := l.s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		l.last, l.rev = Presence{}, 0
	case err != nil:
		return fmt.Errorf("record whether a client waits for call %s: %w", l.call, err)
	default:
		l.last, l.rev = Presence{}, e.Revision()
		_ = json.Unmarshal(e.Value(), &l.last) // undecodable: written anew
	}
	l.read = true
	return nil
}

// next is the presence l.last becomes with waiter's lease set to p.Until
// at now.
func (l *Lease) next(p Presence, now time.Time) (Presence, error) {
	leases := map[string]time.Time{}
	live := 0
	for w, until := range l.last.leases() {
		leases[w] = until
		if until.After(now) && w != l.waiter {
			live++
		}
	}
	if _, known := leases[l.waiter]; !known && p.Until.After(now) && live >= MaxWaiters {
		return Presence{}, fmt.Errorf("record that a client waits for call %s: %w (%d already do)", l.call, ErrTooManyWaiters, live)
	}
	leases[l.waiter] = p.Until
	next := Presence{Endpoint: p.Endpoint, Waiters: map[string]time.Time{}}
	for _, until := range leases {
		if until.After(next.Until) {
			next.Until = until
		}
	}
	for w, until := range leases {
		if until.After(now) || until.Equal(next.Until) {
			next.Waiters[w] = until
		}
	}
	return next, nil
}

// Release ends waiter's lease on the call, when the client of the request
// that made the call gave up on it. alone: no other request's lease runs
// at now, and the call's presence was deleted rather than ended, so that
// a session deciding whether to adopt the call (Unattended) reads "the
// call is being withdrawn", never "nobody waits". Otherwise only waiter's
// lease ends: another request still waits for the call.
func (s *Store) Release(ctx context.Context, agent, call, waiter, endpoint string, now time.Time) (alone bool, err error) {
	key := presenceKey(agent, call)
	for attempt := 0; attempt < 10 && ctx.Err() == nil; attempt++ {
		e, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("release call %s's lease: %w", call, err)
		}
		var p Presence
		_ = json.Unmarshal(e.Value(), &p) // undecodable: nobody known to wait
		for w, until := range p.leases() {
			if w != waiter && until.After(now) {
				l := s.Lease(agent, call, waiter)
				l.read, l.last, l.rev = true, p, e.Revision()
				return false, l.Hold(ctx, Presence{Endpoint: endpoint, Until: now})
			}
		}
		err = s.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		switch {
		case err == nil:
			return true, nil
		case bus.Conflict(err):
			continue // a lease was written meanwhile: look again
		}
		return false, fmt.Errorf("release call %s's lease: %w", call, err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("release call %s's lease: %w", call, err)
	}
	return false, fmt.Errorf("release call %s's lease: other requests' leases kept changing it", call)
}

// Unattended reports whether no client of endpoint waits for the call:
// every waiting request's lease has ended (it stopped waiting, or its
// replica is gone and the lease ran out), the latest less than recent ago.
// While a lease runs, one watch of the key follows it until it runs out: a
// lease renewed or a waiter added meanwhile means a client waits, and the
// entry deleted that the call was delivered or withdrawn (both false).
func (s *Store) Unattended(ctx context.Context, agent, call, endpoint string, recent time.Duration) (bool, error) {
	w, err := bus.Watch(ctx, s.kv, presenceKey(agent, call))
	if err != nil {
		return false, fmt.Errorf("watch whether a client waits for call %s: %w", call, err)
	}
	defer func() { _ = w.Stop() }()
	var p Presence
	found, loaded := false, false
	var lapse <-chan time.Time
	for {
		if loaded {
			now := time.Now()
			switch {
			case !found || p.Endpoint != endpoint:
				return false, nil
			case !p.Waiting(now):
				return now.Sub(p.Until) < recent, nil
			}
			lapse = time.After(p.Until.Sub(now) + 10*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-lapse:
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return false, fmt.Errorf("watch whether a client waits for call %s: the watch ended", call)
			case e == nil:
				loaded = true
			case e.Operation() != jetstream.KeyValuePut:
				if loaded {
					return false, nil // forgotten: delivered or withdrawn
				}
				found = false
			default:
				var q Presence
				if err := json.Unmarshal(e.Value(), &q); err != nil {
					return false, fmt.Errorf("a presence entry does not decode: %w", err)
				}
				if loaded && renewed(p, q, time.Now()) {
					return false, nil
				}
				p, found = q, true
			}
		}
	}
}

// renewed reports whether a waiter's lease in q runs later than it did in
// p, at now: a client waits.
func renewed(p, q Presence, now time.Time) bool {
	was := p.leases()
	for w, until := range q.leases() {
		if until.After(now) && until.After(was[w]) {
			return true
		}
	}
	return false
}

// Claim takes, for the request of owner (its session's rejoin key), the
// right to return the call's outcome: an outcome goes to one session only,
// however many followed the call (its own, one that adopted it). won is
// false when a request of another owner took it first: for that request
// the outcome is another client's, and an identical call is a new call. A
// request of the same owner wins again (identical requests of one session
// at once return the same outcome).
//
// A write that fails is tried again (up to three times, while ctx lasts):
// it may have been stored, and then the same owner wins again. A claim
// lives for keep (at least a second), after which no request may return
// the call's outcome any more; in a bucket whose entries cannot carry their
// own TTL (not provisioned since), for the bucket's TTL.
func (s *Store) Claim(ctx context.Context, agent, call, owner string, keep time.Duration) (won bool, err error) {
	key := claimKey(agent, call)
	var opts []jetstream.KVCreateOpt
	if s.keyTTLs {
		opts = append(opts, jetstream.KeyTTL(max(keep, time.Second)))
	}
	for attempt := 1; ; attempt++ {
		won, err = s.claim(ctx, key, call, owner, opts...)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return won, err
		}
	}
}

// Claimed reports whether the call's outcome was claimed (Claim) by any
// session: it was returned, so a rejoin entry or offer still naming the
// call is a leftover (its request ended without deleting it) that a later
// identical call must not follow.
func (s *Store) Claimed(ctx context.Context, agent, call string) (bool, error) {
	_, err := s.kv.Get(ctx, claimKey(agent, call))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read whether call %s's outcome was claimed: %w", call, err)
	}
	return true, nil
}

func claimKey(agent, call string) string { return "d." + agent + "." + call }

func (s *Store) claim(ctx context.Context, key, call, owner string, opts ...jetstream.KVCreateOpt) (won bool, err error) {
	_, err = s.kv.Create(ctx, key, []byte(owner), opts...)
	switch {
	case err == nil:
		return true, nil
	case !bus.Conflict(err):
		return false, fmt.Errorf("claim call %s's outcome: %w", call, err)
	}
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read who claimed call %s's outcome: %w", call, err)
	}
	return owner != "" && string(e.Value()) == owner, nil
}

// Forget drops the call's presence (its outcome was delivered, or it was
// withdrawn).
func (s *Store) Forget(ctx context.Context, agent, call string) error {
	if err := s.kv.Delete(ctx, presenceKey(agent, call)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget whether a client waits for call %s: %w", call, err)
	}
	return nil
}

// PresenceOf is the call's presence; ok is false when no gateway client
// ever waited for it past its heartbeat.
func (s *Store) PresenceOf(ctx context.Context, agent, call string) (p Presence, ok bool, err error) {
	// Read through a watch: the approval service may follow presences
	// only (c.>), which a get on a replicated bucket cannot be limited to.
	e, err := bus.ReadKey(ctx, s.kv, presenceKey(agent, call))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Presence{}, false, nil
	}
	if err != nil {
		return Presence{}, false, fmt.Errorf("read whether a client waits for call %s: %w", call, err)
	}
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return Presence{}, false, fmt.Errorf("a presence entry does not decode: %w", err)
	}
	return p, true, nil
}

// Absent is a call nobody waits for: its agent, id and presence.
type Absent struct {
	Agent, Call string
	Presence
	// entryRev: the presence's revision, for DropPresence.
	entryRev uint64
}

// Absent lists the calls of endpoint nobody has waited for since before
// cutoff.
func (s *Store) Absent(ctx context.Context, endpoint string, cutoff time.Time) ([]Absent, error) {
	// One watch reads every presence with its value (the sweep runs on every
	// tick; a read per key would be a consumer per waiting call).
	var out []Absent
	err := bus.ReadAll(ctx, s.kv, "c.>", func(e jetstream.KeyValueEntry) {
		agent, call, ok := strings.Cut(strings.TrimPrefix(e.Key(), "c."), ".")
		var p Presence
		if !ok || json.Unmarshal(e.Value(), &p) != nil || p.Endpoint != endpoint || !p.Until.Before(cutoff) {
			return
		}
		out = append(out, Absent{Agent: agent, Call: call, Presence: p, entryRev: e.Revision()})
	})
	if err != nil {
		return nil, fmt.Errorf("list the calls clients wait for: %w", err)
	}
	return out, nil
}

// Entry is a rejoin entry or offer as Ended lists it.
type Entry struct {
	Key string
	Rejoin
}

// Entries lists the rejoin entries and offers endpoint wrote (those
// written before entries named their endpoint are not listed).
func (s *Store) Entries(ctx context.Context, endpoint string) ([]Entry, error) {
	var out []Entry
	for _, filter := range []string{RejoinPrefix + ">", OfferPrefix + ">"} {
		err := bus.ReadAll(ctx, s.kv, filter, func(e jetstream.KeyValueEntry) {
			var r Rejoin
			if json.Unmarshal(e.Value(), &r) != nil || r.Endpoint != endpoint {
				return
			}
			r.entryRev = e.Revision()
			out = append(out, Entry{Key: e.Key(), Rejoin: r})
		})
		if err != nil {
			return nil, fmt.Errorf("list the calls clients were told to call again for: %w", err)
		}
	}
	return out, nil
}

// DropEntry removes e, a rejoin entry or offer of a call that ended long
// enough ago that no repeat may be answered its outcome, if the key still
// holds it (a newer write stays). It is purged, not deleted: the values a
// key's history keeps go too, and in a bucket that takes per-key TTLs so
// does the purge's marker, after KeyMarkerTTL.
func (s *Store) DropEntry(ctx context.Context, e Entry) error {
	return s.drop(ctx, e.Key, e.entryRev)
}

// DropPresence removes a's presence as DropEntry removes an entry: its
// call ended long ago, so whether a client waits for it says nothing.
func (s *Store) DropPresence(ctx context.Context, a Absent) error {
	return s.drop(ctx, presenceKey(a.Agent, a.Call), a.entryRev)
}

func (s *Store) drop(ctx context.Context, key string, rev uint64) error {
	opts := []jetstream.KVDeleteOpt{jetstream.LastRevision(rev)}
	if s.keyTTLs {
		opts = append(opts, jetstream.PurgeTTL(bus.KeyMarkerTTL))
	}
	err := s.kv.Purge(ctx, key, opts...)
	if err != nil && !bus.Conflict(err) {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	return nil
}

// Line is the sentence a reviewer reads about whether the client waits
// (the console's call page, Slack and Teams cards); ok is whether a
// presence was found ("" when not: no gateway client waited for the call).
func Line(p Presence, ok bool, now time.Time) string {
	switch {
	case !ok:
		return ""
	case p.Waiting(now):
		return "The agent's MCP client is waiting for the outcome."
	}
	return fmt.Sprintf("The agent's MCP client stopped waiting at %s UTC; it gets the outcome when it calls the tool again (gateway endpoint %s).", p.Until.UTC().Format("15:04"), p.Endpoint)
}

// LineOf is Line for the call's presence as stored.
func (s *Store) LineOf(ctx context.Context, agent, call string, now time.Time) (string, error) {
	p, ok, err := s.PresenceOf(ctx, agent, call)
	if err != nil {
		return "", err
	}
	return Line(p, ok, now), nil
}

// Follow calls changed whenever whether a client waits for a call changes
// (a client started waiting, stopped, or came back), until ctx ends. What
// the bucket holds when Follow starts is taken as known; a watch that ends
// (a reconnect) is started again (bus.Follow), and what changed meanwhile
// is reported. A lease that runs out without a write (its gateway stopped)
// is reported at the next write about that call.
func (s *Store) Follow(ctx context.Context, log *slog.Logger, changed func(agent, call string, waiting bool)) {
	changes, err := bus.Follow(ctx, s.kv, "c.>", bus.FollowOptions{What: "whether clients wait", Log: log, Persist: true})
	if err != nil {
		if ctx.Err() == nil { // the connection closed
			log.Error("whether clients wait cannot be watched: a card is not redrawn when its client starts or stops waiting", "err", err)
		}
		return
	}
	known := map[string]bool{}
	loaded := false
	for c := range changes {
		e := c.Entry
		if e == nil {
			loaded = true
			continue
		}
		agent, call, ok := strings.Cut(strings.TrimPrefix(e.Key(), "c."), ".")
		if !ok {
			continue
		}
		if e.Operation() != jetstream.KeyValuePut {
			delete(known, e.Key())
			continue
		}
		var p Presence
		if json.Unmarshal(e.Value(), &p) != nil {
			continue
		}
		waiting := p.Waiting(time.Now())
		was, seen := known[e.Key()]
		known[e.Key()] = waiting
		if loaded || seen {
			if !seen || was != waiting {
				changed(agent, call, waiting)
			}
		}
	}
}

// CardLine is Line for the card of rec while it is pending ("" once it is
// decided, or for a nil Store); a presence that cannot be read is logged
// and the card is drawn without the line.
func (s *Store) CardLine(ctx context.Context, rec *airlockv1.ApprovalRecord, log *slog.Logger) string {
	if s == nil || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		return ""
	}
	line, err := s.LineOf(ctx, rec.GetCall().GetAgentId(), rec.GetCall().GetCallId(), time.Now())
	if err != nil {
		log.Warn("whether a client waits for a call could not be read; its card is drawn without it", "call", rec.GetCall().GetCallId(), "err", err)
	}
	return line
}
