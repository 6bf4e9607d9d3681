package slack

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errSuperseded ends an update of a Slack message that a newer update of
// the same message has replaced: the newer one draws the current state.
var errSuperseded = errors.New("a newer update of the message supersedes this one")

// cardOrder keeps the updates of each Slack message (channel/ts) in the
// order they were asked for, so that a card never ends up showing an older
// state than the newest update asked of it: an older update retried after
// a 503, or merely slower, would otherwise land after a newer one. Each
// update takes a turn (the message's next generation); a newer turn
// supersedes every older one, which stops before its next attempt or at
// once while it waits out a backoff or Retry-After; and updates of one
// message are sent one at a time, so an older request in flight holds a
// newer one back until Slack has answered it.
//
// The order holds within one process only: approval replicas, and the
// console's redraw of a clicked card, update the same message each on
// their own, and chat.update has no compare-and-set. The approval record
// carries no revision that could refuse an older state there (its bucket
// revision is not in the record, and updated_at is a replica's wall clock).
type cardOrder struct {
	mu    sync.Mutex
	lines map[string]*cardLine // by "channel/ts"; while an update of it is in flight, and linger after
	// linger keeps a message's line (its newest stage) after its last update
	// ended, so that an update of an earlier state that reaches the
	// notifier late (a redraw of a pending card read just before the
	// decision) is still refused; 0 removes the line at once.
	linger time.Duration
}

// cardLine is the state of one message's updates in flight.
type cardLine struct {
	// sending holds one token while an update of the message is sent.
	sending chan struct{}
	// newest is closed when a newer update of the message begins.
	newest chan struct{}
	// inFlight counts the turns begun and not ended; at 0 the line goes.
	inFlight int
	// stage is the newest turn's state's stage (calls.Stage).
	stage int
	// ends counts the times the line had no turn left: a linger timer
	// removes the line only if none came after its own.
	ends uint64
}

// turn is one update's place in its message's order.
type turn struct {
	key  string
	line *cardLine
	// stale is closed once a newer update of the message has begun.
	stale <-chan struct{}
}

func newCardOrder(linger time.Duration) *cardOrder {
	return &cardOrder{lines: map[string]*cardLine{}, linger: linger}
}

// begin takes the next turn for the message key, for a card drawn of a
// state at stage (calls.Stage), superseding every older turn of it. A turn
// of an earlier stage than one in flight is stale from the start: the
// updates reach here several goroutines after their states were stored, so
// the later state may begin first. Every turn must be ended (end).
func (o *cardOrder) begin(key string, stage int) *turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.lines[key]
	switch {
	case l == nil:
		l = &cardLine{sending: make(chan struct{}, 1)}
		o.lines[key] = l
	case stage < l.stage:
		l.inFlight++
		stale := make(chan struct{})
		close(stale)
		return &turn{key: key, line: l, stale: stale}
	default:
		close(l.newest)
	}
	l.newest = make(chan struct{})
	l.stage = stage
	l.inFlight++
	return &turn{key: key, line: l, stale: l.newest}
}

// end releases t; the message's line is removed linger after its last
// turn, unless another turn has begun by then.
func (o *cardOrder) end(t *turn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.line.inFlight--; t.line.inFlight > 0 {
		return
	}
	if o.linger <= 0 {
		delete(o.lines, t.key)
		return
	}
	t.line.ends++
	ends := t.line.ends
	time.AfterFunc(o.linger, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		// Only the timer of the line's last end removes it: a turn that
		// began and ended since restarted the linger.
		if l := o.lines[t.key]; l == t.line && l.inFlight == 0 && l.ends == ends {
			delete(o.lines, t.key)
		}
	})
}

// send runs f once no other update of the message is being sent, unless a
// newer update has begun (errSuperseded) or ctx ends first. A nil turn
// (an update outside any order) runs f at once.
func (t *turn) send(ctx context.Context, f func(context.Context) error) error {
	if t == nil {
		return f(ctx)
	}
	select {
	case t.line.sending <- struct{}{}:
	case <-t.stale:
		return errSuperseded
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.line.sending }()
	// Both may have been ready above; a newer update must win.
	select {
	case <-t.stale:
		return errSuperseded
	default:
	}
	return f(ctx)
}

// superseded is closed once a newer update has begun; nil (never) for a
// nil turn.
func (t *turn) superseded() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.stale
}
