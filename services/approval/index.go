package approval

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
)

// index is this replica's read model of the approvals bucket, fed by a KV
// watcher: the list endpoints and the sweeper read it; every write still goes
// through CAS on the bucket itself. It is derived state — rebuilt from the
// bucket at start — so losing it loses nothing.
type index struct {
	log *slog.Logger
	// reconnects counts the connection's reconnects: after one, the watch is
	// started again rather than trusting it resumed (an ordered consumer on a
	// restarted server can take many seconds to notice it is gone).
	reconnects func() uint64

	mu sync.RWMutex
	// recs holds each record as a list carries it (calls.Abridged), in an
	// entry: a record with large arguments is held without them, so what a
	// replica keeps per call is small whatever an agent sends. Whoever
	// needs the arguments reads the record from the bucket.
	recs   map[string]*entry
	latest map[string]uint32 // "<agent>.<call>" → newest revision seen
	// pendingBy counts each agent's pending records in recs; admitted
	// holds the keys of records this replica admitted as pending (admit)
	// that the watch has not delivered yet.
	pendingBy map[string]int
	// bytesBy sums, per agent, the stored bytes (values) of its records in
	// recs, pending and ended, and of its threads' queue locks (locks),
	// until they leave the bucket (deleted, purged, or expired: the
	// server's TTL marker is a purge).
	bytesBy map[string]int64
	// locks holds each thread queue's lock (domain.QueueKey): its size
	// (key and value), counted in its agent's bytesBy, and what it names.
	locks map[string]queueLock
	// pendingRevs holds each call's pending revisions ("<agent>.<call>" →
	// revisions), so superseding looks at those, never at every number
	// below a revision the agent chose.
	pendingRevs map[string][]uint32
	admitted    map[string]admission
	// unsettled: keys whose record reached a decision and whose event this
	// replica has not yet confirmed in the stream (see sweeper.settle).
	unsettled map[string]bool
	// published: keys whose decision event this process published itself.
	published map[string]bool
	// all orders every record, byAgent each agent's, as lists show them
	// (listOrder): a page is read from where the previous one ended, never
	// by sorting everything (100,000 pending calls: airlock bench pending).
	all     listOrder
	byAgent map[string]*listOrder
	// due orders the pending records by when the sweeper next has work
	// for them; queued holds the keys of pending records queued behind
	// their thread's turn; npending counts the pending records. A sweep
	// costs what is due, not what waits.
	due      dueQueue
	queued   map[string]bool
	npending int
	// announcing holds the keys of pending records being announced (→
	// their announcer), for the sweeper's takeOver.
	announcing map[string]string
}

func newIndex(log *slog.Logger, reconnects func() uint64) *index {
	return &index{log: log, reconnects: reconnects, recs: map[string]*entry{}, latest: map[string]uint32{},
		pendingBy: map[string]int{}, bytesBy: map[string]int64{}, locks: map[string]queueLock{}, pendingRevs: map[string][]uint32{}, admitted: map[string]admission{}, unsettled: map[string]bool{}, published: map[string]bool{},
		byAgent: map[string]*listOrder{}, due: dueQueue{at: map[string]int64{}}, queued: map[string]bool{},
		announcing: map[string]string{}}
}

// watch follows the bucket until ctx ends (bus.Follow: its watch is started
// again when it ends or the connection reconnects, and replaying the bucket
// over the index is harmless). ready is closed once the bucket's current
// content is loaded.
func (ix *index) watch(ctx context.Context, kv jetstream.KeyValue, ready chan<- struct{}) error {
	changes, err := bus.Follow(ctx, kv, ">", bus.FollowOptions{What: "the approvals bucket", Log: ix.log, Reconnects: ix.reconnects})
	if err != nil {
		return err
	}
	loaded := false
	for c := range changes {
		switch {
		case c.Entry != nil:
			ix.apply(c.Entry)
		case !loaded:
			loaded = true
			close(ready)
		}
	}
	if ctx.Err() == nil {
		return fmt.Errorf("follow the approvals bucket %s: the connection closed", kv.Bucket())
	}
	return nil
}

func (ix *index) apply(e jetstream.KeyValueEntry) {
	if agent, ok := domain.QueueAgent(e.Key()); ok {
		// A thread queue's lock (domain.QueueKey), not a record: its bytes
		// count toward its agent's share all the same, until it leaves the
		// bucket (its TTL, once its thread has nothing pending).
		var lock queueLock
		if e.Operation() == jetstream.KeyValuePut {
			lock.size = len(e.Key()) + len(e.Value())
			lock.holder, lock.retired = domain.LockHolder(e.Value())
		}
		ix.mu.Lock()
		defer ix.mu.Unlock()
		ix.bytesOf(agent, int64(lock.size-ix.locks[e.Key()].size))
		if lock.size > 0 {
			ix.locks[e.Key()] = lock
		} else {
			delete(ix.locks, e.Key())
		}
		return
	}
	if strings.HasPrefix(e.Key(), "_") {
		return // no other key of the bucket is a record
	}
	var rec *entry
	var due time.Time
	if e.Operation() == jetstream.KeyValuePut {
		full := &airlockv1.ApprovalRecord{}
		err := proto.Unmarshal(e.Value(), full)
		if err == nil {
			rec, err = newEntry(e.Key(), e.Value(), full)
		}
		if err != nil {
			ix.log.Error("undecodable approval record ignored", "key", e.Key(), "err", err)
			return
		}
		due = domain.NextDue(full)
		rec.size = len(e.Value())
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.admitted, e.Key())
	old := ix.recs[e.Key()]
	if old != nil {
		ix.bytesOf(old.ref.Agent, -int64(old.size))
	}
	if rec != nil {
		ix.bytesOf(rec.ref.Agent, int64(rec.size))
	}
	if old != nil && old.pending() {
		ix.pendingOf(old.ref.Agent, -1)
		ix.pendingRev(old.callKey, old.ref.Rev, false)
		ix.due.drop(e.Key())
		delete(ix.queued, e.Key())
		delete(ix.announcing, e.Key())
	}
	if old != nil && (rec == nil || orderOf(e.Key(), old) != orderOf(e.Key(), rec) || old.ref.Agent != rec.ref.Agent) {
		ix.unorder(e.Key(), old)
		old = nil
	}
	if rec == nil {
		delete(ix.recs, e.Key())
		return
	}
	if rec.pending() {
		ix.pendingOf(rec.ref.Agent, +1)
		ix.pendingRev(rec.callKey, rec.ref.Rev, true)
		ix.due.set(e.Key(), due)
		if rec.queued && rec.inQueue {
			ix.queued[e.Key()] = true
		}
		if rec.announcer != "" {
			ix.announcing[e.Key()] = rec.announcer
		}
	}
	if old == nil {
		ix.order(e.Key(), rec)
	}
	ix.recs[e.Key()] = rec
	ref := rec.ref
	if ref.Rev > ix.latest[rec.callKey] {
		ix.latest[rec.callKey] = ref.Rev
	}
	if hasDecisionEvent(rec.state) {
		if ix.published[e.Key()] {
			delete(ix.published, e.Key())
		} else {
			ix.unsettled[e.Key()] = true
		}
	}
}

// queueLock is a thread queue's lock as the index holds it: its stored
// size, the key of the call it names, and whether it is retired
// (domain.RetiredLock).
type queueLock struct {
	size    int
	holder  string
	retired bool
}

// order and unorder add a record to the list orders and remove it (ix.mu held).
func (ix *index) order(key string, rec *entry) {
	pos := orderOf(key, rec)
	ix.all.insert(pos)
	agent := rec.ref.Agent
	if ix.byAgent[agent] == nil {
		ix.byAgent[agent] = &listOrder{}
	}
	ix.byAgent[agent].insert(pos)
}

func (ix *index) unorder(key string, rec *entry) {
	pos := orderOf(key, rec)
	ix.all.remove(pos)
	agent := rec.ref.Agent
	if o := ix.byAgent[agent]; o != nil {
		if o.remove(pos); len(o.entries) == 0 {
			delete(ix.byAgent, agent)
		}
	}
}

// pendingOf adds d to agent's count of pending records (ix.mu held).
func (ix *index) pendingOf(agent string, d int) {
	ix.npending += d
	if n := ix.pendingBy[agent] + d; n > 0 {
		ix.pendingBy[agent] = n
	} else {
		delete(ix.pendingBy, agent)
	}
}

// bytesOf adds d to agent's bytes of records (ix.mu held).
func (ix *index) bytesOf(agent string, d int64) {
	if n := ix.bytesBy[agent] + d; n > 0 {
		ix.bytesBy[agent] = n
	} else {
		delete(ix.bytesBy, agent)
	}
}

// admission is a record admit let wait for a person, until the watch
// delivers it: its agent and its size as it was asked (no preview yet).
type admission struct {
	agent string
	size  int
}

// verdict is what admit decided about a new record.
type verdict struct {
	// admitted: it may wait for a person; known: the index holds it (a
	// redelivery); overBytes: neither, its agent's records hold heldBytes,
	// at or past its share of the bucket's bytes, so nothing is written.
	admitted, known, overBytes bool
	heldBytes                  int64
}

// admit decides about key, a new record of agent of size bytes: known
// when the index already holds it (a redelivery); over bytes when the
// agent's records, with those admitted and not yet seen, hold share bytes
// or more; else admitted when its pending records, with those admitted and
// not yet seen, number fewer than max, and then it counts key as admitted
// until the watch delivers it (or forget drops it). The check and the
// count are one step, so handlers working at once cannot all take the
// last place. Each replica counts what it sees: with several replicas an
// agent can pass max, and share, by what the others wrote in the last
// moment; and a record grows after admit (its preview, channel
// references, votes, the decision) by what share then counts.
func (ix *index) admit(key, agent string, max int, share int64, size int) verdict {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.recs[key] != nil {
		return verdict{admitted: true, known: true}
	}
	if _, ok := ix.admitted[key]; ok {
		return verdict{admitted: true}
	}
	n, held := ix.pendingBy[agent], ix.bytesBy[agent]
	for _, a := range ix.admitted {
		if a.agent == agent {
			n++
			held += int64(a.size)
		}
	}
	if held >= share {
		return verdict{overBytes: true, heldBytes: held}
	}
	if n >= max {
		return verdict{}
	}
	ix.admitted[key] = admission{agent: agent, size: size}
	return verdict{admitted: true}
}

// forget drops key from what admit counted: its record was not created.
func (ix *index) forget(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.admitted, key)
}

// hasDecisionEvent: states whose entry publishes a decision event.
func hasDecisionEvent(state airlockv1.ApprovalState) bool {
	switch state {
	case domain.Approved, domain.Rejected, domain.ChangesRequested, domain.Expired, domain.Canceled:
		return true
	}
	return false
}

// markPublished notes that this process published key's decision event.
func (ix *index) markPublished(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.unsettled[key] {
		delete(ix.unsettled, key)
		return
	}
	ix.published[key] = true
}

// takeUnsettled returns (and forgets) unsettled records last updated before cutoff.
func (ix *index) takeUnsettled(cutoff time.Time) []*airlockv1.ApprovalRecord {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []*airlockv1.ApprovalRecord
	for key := range ix.unsettled {
		rec := ix.recs[key]
		if rec == nil || !hasDecisionEvent(rec.state) {
			delete(ix.unsettled, key)
			continue
		}
		if rec.updated < cutoff.UnixNano() {
			out = append(out, rec.record(ix.log))
			delete(ix.unsettled, key)
		}
	}
	return out
}

// unsettle puts a record taken by takeUnsettled back, to be checked at a
// later sweep (its check or republish failed), unless a newer version of
// it arrived meanwhile (apply decides about that one).
func (ix *index) unsettle(rec *airlockv1.ApprovalRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	key := domain.RefOf(rec).Key()
	if cur := ix.recs[key]; cur != nil && hasDecisionEvent(cur.state) {
		ix.unsettled[key] = true
	}
}

// latestRevision is ref with the newest revision of its call this replica
// has seen (1 when none).
func (ix *index) latestRevision(ref callref.Ref) callref.Ref {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ref.WithRev(ix.latest[ref.CallKey()])
}

// page returns, in list order, up to limit (0: no limit) records that keep
// returns true for, starting after the position after (nil: from the
// newest), of agent's records only when agent is set. It reads from the
// list order, so a page costs what it holds and what keep skips, not what
// the index holds.
func (ix *index) page(agent string, after *pagePos, limit int, keep func(*entry) bool) []*airlockv1.ApprovalRecord {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	o := &ix.all
	if agent != "" {
		if o = ix.byAgent[agent]; o == nil {
			return nil
		}
	}
	var out []*airlockv1.ApprovalRecord
	o.walk(after, func(key string) bool {
		if rec := ix.recs[key]; rec != nil && keep(rec) {
			out = append(out, rec.record(ix.log))
		}
		return limit == 0 || len(out) < limit
	})
	return out
}

// listOrder holds records' list positions, oldest first, so that a new
// record (the newest) is appended: lists read it backwards, newest first.
type listOrder struct{ entries []pagePos }

// orderOf is a record's position in list order.
func orderOf(key string, rec *entry) pagePos {
	return pagePos{created: rec.created, key: key}
}

// earlier reports whether a comes before b in the slice: after it in list
// order (older, or as old with a greater key).
func earlier(a, b pagePos) bool {
	return a.created < b.created || a.created == b.created && a.key > b.key
}

func (o *listOrder) search(p pagePos) int {
	return sort.Search(len(o.entries), func(i int) bool { return !earlier(o.entries[i], p) })
}

func (o *listOrder) insert(p pagePos) {
	if n := len(o.entries); n == 0 || earlier(o.entries[n-1], p) {
		o.entries = append(o.entries, p)
		return
	}
	o.entries = slices.Insert(o.entries, o.search(p), p)
}

func (o *listOrder) remove(p pagePos) {
	if i := o.search(p); i < len(o.entries) && o.entries[i] == p {
		o.entries = slices.Delete(o.entries, i, i+1)
	}
}

// walk calls fn with each key in list order after the position after (nil:
// from the newest) until fn returns false.
func (o *listOrder) walk(after *pagePos, fn func(key string) bool) {
	end := len(o.entries)
	if after != nil {
		// Entries after the position in list order are those before it here.
		end = o.search(*after)
	}
	for i := end - 1; i >= 0; i-- {
		if !fn(o.entries[i].key) {
			return
		}
	}
}

// earlierPending returns the still pending records of ref's call with a
// revision before ref's, oldest first.
func (ix *index) earlierPending(ref callref.Ref) []*airlockv1.ApprovalRecord {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []*airlockv1.ApprovalRecord
	for _, rev := range slices.Sorted(slices.Values(ix.pendingRevs[ref.CallKey()])) {
		if rec := ix.recs[ref.WithRev(rev).Key()]; rev < ref.Rev && rec != nil && rec.pending() {
			out = append(out, rec.record(ix.log))
		}
	}
	return out
}

// pendingRev records that revision rev of the call key ("<agent>.<call>")
// is pending or no longer is (ix.mu held).
func (ix *index) pendingRev(key string, rev uint32, pending bool) {
	revs := ix.pendingRevs[key]
	i := slices.Index(revs, rev)
	switch {
	case pending && i < 0:
		ix.pendingRevs[key] = append(revs, rev)
	case !pending && i >= 0:
		if revs = slices.Delete(revs, i, i+1); len(revs) == 0 {
			delete(ix.pendingRevs, key)
		} else {
			ix.pendingRevs[key] = revs
		}
	}
}

// dueRecords returns the pending records the sweeper has work for at now
// (domain.NextDue), earliest first. A record stays due until it changes,
// so one whose expiry or timer failed is returned again at the next sweep.
func (ix *index) dueRecords(now time.Time) []*airlockv1.ApprovalRecord {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []*airlockv1.ApprovalRecord
	for _, key := range ix.due.due(now) {
		if rec := ix.recs[key]; rec != nil && rec.pending() {
			out = append(out, rec.record(ix.log))
		}
	}
	return out
}

// announcers returns the replicas announcing pending records, each once.
func (ix *index) announcers() []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, announcer := range ix.announcing {
		if !seen[announcer] {
			seen[announcer] = true
			out = append(out, announcer)
		}
	}
	return out
}

// announcedBy returns the keys of the pending records announcer is
// announcing.
func (ix *index) announcedBy(announcer string) []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []string
	for key, a := range ix.announcing {
		if a == announcer {
			out = append(out, key)
		}
	}
	return out
}

// queuedRecords returns the pending records queued behind their thread's
// turn (the sweeper's repair pass releases their threads).
func (ix *index) queuedRecords() []*airlockv1.ApprovalRecord {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]*airlockv1.ApprovalRecord, 0, len(ix.queued))
	for key := range ix.queued {
		if rec := ix.recs[key]; rec != nil {
			out = append(out, rec.record(ix.log))
		}
	}
	return out
}

// strandedLocks returns the keys of the thread locks that are not retired
// though, as far as the index knows, nothing of their thread is pending:
// the call a lock names is not pending (or not held) and no call of its
// thread is queued. A lock naming a pending call holds its turn; a thread
// with a queued call is the release's (releaseQueues). It costs the locks
// and the queued calls held, as a sweep's releaseQueues does.
func (ix *index) strandedLocks() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	waiting := map[string]bool{}
	for key := range ix.queued {
		if rec := ix.recs[key]; rec != nil {
			waiting[domain.QueueKeyOf(rec.ref.Agent, rec.thread)] = true
		}
	}
	var out []string
	for key, lock := range ix.locks {
		if lock.retired || waiting[key] {
			continue
		}
		if holder := ix.recs[lock.holder]; holder != nil && holder.pending() {
			continue
		}
		out = append(out, key)
	}
	return out
}

// pendingCount is how many records are pending.
func (ix *index) pendingCount() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.npending
}
