package approval

import (
	"context"
	"sync"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/callref"
)

// clientRedrawEvery is how often at most a call's cards are redrawn as its
// MCP client comes and goes: a client that calls and cancels in a loop
// costs each chat channel one message update per call this often, and
// the last change is drawn at most this late.
const clientRedrawEvery = 2 * time.Second

// followClients redraws the cards of a pending call (Slack and Teams:
// notify.Redrawer) when whether its MCP client waits for the outcome
// changes: the MCP gateway records that in the client-waits bucket, and
// those channels draw it on the card (clientwait.CardLine). No other
// channel is told (their Update is the outcome, and the call has none), and
// no `notified` event is recorded. Every replica follows, so with several
// replicas a card may be redrawn once by each: the same card.
func (s *Service) followClients(ctx context.Context) {
	if s.clients == nil || len(s.fan.notifiers) == 0 {
		return
	}
	redraws := newRedrawGate(clientRedrawEvery)
	s.clients.Follow(ctx, s.deps.Log, func(agent, call string, waiting bool) {
		redraws.changed(agent+"."+call, func() {
			if ctx.Err() != nil {
				return // the service stopped while a redraw was due
			}
			ref := s.index.latestRevision(callref.Ref{Agent: agent, Call: call, Rev: 1})
			rec, _, err := s.store.latest(ctx, ref)
			if err != nil {
				s.deps.Log.Info("approval: a call whose client started or stopped waiting has no record", "agent", agent, "call", call, "err", err)
				return
			}
			if rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(rec.GetNotifications()) == 0 {
				return
			}
			// The record of the revision this card is of, not the call's
			// newest: a newer revision supersedes it and has cards of its own.
			key := domain.RefOf(rec).Key()
			s.fan.redraw(ctx, rec, func(ctx context.Context) (*airlockv1.ApprovalRecord, error) {
				now, _, err := s.store.get(ctx, key)
				return now, err
			})
		})
	})
}

// redrawGate coalesces the redraws of each call: the first change is drawn
// at once, the changes that follow within its interval once at its end
// (draw reads the state then). A call is remembered only while a redraw of
// it is that recent.
type redrawGate struct {
	every time.Duration
	mu    sync.Mutex
	// again holds the calls drawn within the last interval: true when a
	// change came since, to be drawn at the interval's end.
	again map[string]bool
}

func newRedrawGate(every time.Duration) *redrawGate {
	return &redrawGate{every: every, again: map[string]bool{}}
}

// changed draws key now, or once at the end of its interval when it was
// drawn within it.
func (g *redrawGate) changed(key string, draw func()) {
	g.mu.Lock()
	if _, recent := g.again[key]; recent {
		g.again[key] = true
		g.mu.Unlock()
		return
	}
	g.again[key] = false
	g.mu.Unlock()
	g.drawn(key, draw)
}

// drawn draws key and, an interval later, draws it again if it changed
// meanwhile, or forgets it.
func (g *redrawGate) drawn(key string, draw func()) {
	draw()
	time.AfterFunc(g.every, func() {
		g.mu.Lock()
		if !g.again[key] {
			delete(g.again, key)
			g.mu.Unlock()
			return
		}
		g.again[key] = false
		g.mu.Unlock()
		g.drawn(key, draw)
	})
}
