package airlock

import (
	"context"
	"fmt"
	"sync"

	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Watcher is a fast path for agents that submit many calls: one core NATS
// subscription on the agent's events (airlock.evt.<agent>.>) feeds every
// waiting call, instead of one JetStream consumer per Await.
//
// It sees only events published while it is subscribed, so it serves calls
// submitted through it (DoFast registers before submitting). Events
// published while the connection was down are not replayed to it: when
// DoFast notices a reconnect it falls back to Await, which reads the call's
// history from the stream. Use Await to follow a call after an agent restart.
type Watcher struct {
	c   *Client
	sub *nats.Subscription

	mu      sync.Mutex
	waiters map[string]*waiter
}

type waiter struct {
	f    follower
	done chan Outcome
}

// Watch subscribes to the agent's events. Close it when done.
func (c *Client) Watch() (*Watcher, error) {
	w := &Watcher{c: c, waiters: map[string]*waiter{}}
	sub, err := c.nc.Subscribe(subject.OfAgent(c.agent), w.onMsg)
	if err != nil {
		return nil, fmt.Errorf("watch the events of agent %s: %w", c.agent, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch the events of agent %s: %w", c.agent, err)
	}
	w.sub = sub
	return w, nil
}

func (w *Watcher) onMsg(m *nats.Msg) {
	p, err := subject.Parse(m.Subject)
	if err != nil {
		return
	}
	w.mu.Lock()
	wt, ok := w.waiters[p.Call]
	w.mu.Unlock()
	if !ok {
		return
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters[p.Call] != wt {
		return
	}
	wt.f.add(ev)
	// Over one subscription a call's events arrive in publish order; the
	// first end of the latest revision seen ends the wait.
	if out, ok := wt.f.ends[wt.f.latest]; ok {
		delete(w.waiters, p.Call)
		wt.done <- out
	}
}

// DoFast submits call and waits for its outcome through the watcher, with
// Do's semantics. If the connection reconnected while it waited (events may
// have been missed) it finishes with Await.
func (w *Watcher) DoFast(ctx context.Context, call Call) (Outcome, error) {
	if call.ID == "" {
		call.ID = ids.New("call")
	}
	wt := &waiter{f: follower{callID: call.ID, ends: map[uint32]Outcome{}}, done: make(chan Outcome, 1)}
	reconnects := w.c.nc.Stats().Reconnects
	w.mu.Lock()
	w.waiters[call.ID] = wt
	w.mu.Unlock()
	forget := func() {
		w.mu.Lock()
		if w.waiters[call.ID] == wt {
			delete(w.waiters, call.ID)
		}
		w.mu.Unlock()
	}
	if _, err := w.c.Submit(ctx, call); err != nil {
		forget()
		return Outcome{}, err
	}
	tick := time.NewTicker(time.Second) // how often a reconnect is checked for
	defer tick.Stop()
	for {
		select {
		case out := <-wt.done:
			if out.Status == StatusInvalid {
				return out, fmt.Errorf("%w: %s", ErrInvalid, out.Reason)
			}
			return out, nil
		case <-tick.C:
			if w.c.nc.Stats().Reconnects != reconnects {
				forget()
				return w.c.Await(ctx, call.ID)
			}
		case <-ctx.Done():
			forget()
			return Outcome{}, fmt.Errorf("await call %s: %w", call.ID, ctx.Err())
		}
	}
}

// Close unsubscribes; calls still waiting end with their context.
func (w *Watcher) Close() error { return w.sub.Unsubscribe() }
