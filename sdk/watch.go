package airlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Watcher is a fast path for agents that submit many calls: one set of
// subscriptions on the agent's republished events feeds every waiting call,
// instead of a subscription and a stream read per Await.
//
// It subscribes only to the event types that can end a call revision
// (airlock.out.<agent>.*.<type> for denied, rejected, changes_requested,
// expired, canceled, completed, failed and invalid, and the over-budget
// notice, which is not stored): the requested, allowed,
// started, ... events of every call are never sent to it. What it receives
// was stored: the events stream republishes a message only once it has
// stored it, so a publish the stream refused is never reported.
//
// It sees only events published while it is subscribed, so it serves calls
// submitted through it (DoFast registers before submitting). Events
// published while the connection was down are not replayed to it: when
// DoFast notices a reconnect it falls back to Await, which reads the call's
// history from the stream. Use Await to follow a call after an agent restart.
type Watcher struct {
	c    *Client
	subs []*nats.Subscription

	mu      sync.Mutex
	waiters map[string]*waiter
}

type waiter struct {
	f    *follower
	done chan Outcome
	// overBudget receives the error of an over-budget notice for the call.
	overBudget chan error
}

// WatchOption adjusts a Watcher.
type WatchOption func(*watchOptions)

type watchOptions struct{ also []string }

// WatchAlso subscribes the watcher to further event types of the agent's
// calls (e.g. approval_requested), which DoFast passes to its OnEvent hook.
func WatchAlso(types ...string) WatchOption {
	return func(o *watchOptions) { o.also = append(o.also, types...) }
}

// Watch subscribes to the agent's events. Close it when done.
func (c *Client) Watch(opts ...WatchOption) (*Watcher, error) {
	var o watchOptions
	for _, f := range opts {
		f(&o)
	}
	w := &Watcher{c: c, waiters: map[string]*waiter{}}
	// The over-budget notice (not an event, never stored) ends a call too.
	for _, typ := range append(append([]string{subject.OverBudget}, endTypes...), o.also...) {
		sub, err := c.nc.Subscribe(subject.OutOfAgentType(c.agent, typ), w.onMsg)
		if err == nil {
			if err = sub.SetPendingLimits(-1, -1); err != nil {
				_ = sub.Unsubscribe()
			}
		}
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watch the events of agent %s: %w", c.agent, err)
		}
		w.subs = append(w.subs, sub)
	}
	return w, nil
}

// callOf returns the <call> token of airlock.out.<agent>.<call>.<type>
// without validating it: the subscriptions only match that shape, and a
// call id that is not waited for is ignored anyway.
func callOf(subj string) string {
	dots := 0
	start := 0
	for i := 0; i < len(subj); i++ {
		if subj[i] != '.' {
			continue
		}
		dots++
		switch dots {
		case 3:
			start = i + 1
		case 4:
			return subj[start:i]
		}
	}
	return ""
}

func (w *Watcher) onMsg(m *nats.Msg) {
	call := callOf(m.Subject)
	w.mu.Lock()
	wt, ok := w.waiters[call]
	w.mu.Unlock()
	if !ok {
		return
	}
	if m.Subject == subject.OverBudgetNotice(w.c.agent, call) {
		w.mu.Lock()
		defer w.mu.Unlock()
		// Only a notice about the submitted revision ends the wait, and
		// only once DoFast has read that the revision is not recorded (a
		// notice about a recorded revision was about a repeat).
		if err := w.c.overBudgetOf(m, call, wt.f); err != nil && w.waiters[call] == wt {
			select {
			case wt.overBudget <- err:
			default: // one is being looked at
			}
		}
		return
	}
	ev, seq, ok := w.c.eventOf(m, call)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters[call] != wt {
		return
	}
	wt.f.add(ev, seq)
	// The first end of the submitted revision, or of a later one, ends
	// the wait; ends of earlier revisions (a late duplicate) do not.
	if out, ok := wt.f.outcome(); ok {
		delete(w.waiters, call)
		wt.done <- out
	}
}

// DoFast submits call and waits for its outcome through the watcher, with
// Do's semantics: the outcome of the submitted revision, or of a later
// revision of the same call whose end arrives first. If the connection reconnected while it waited (events may
// have been missed) it finishes with Await.
func (w *Watcher) DoFast(ctx context.Context, call Call, opts ...AwaitOption) (Outcome, error) {
	if call.ID == "" {
		call.ID = ids.New("call")
	}
	rev := max(call.Revision, 1)
	wt := &waiter{f: newFollower(call.ID, rev), done: make(chan Outcome, 1), overBudget: make(chan error, 1)}
	wt.f.onEvent = awaitOpts(opts).onEvent
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
		case err := <-wt.overBudget:
			if ended, err := w.overBudgetEnds(ctx, call.ID, wt, err); ended {
				forget()
				return Outcome{}, err
			}
		case <-tick.C:
			if w.c.nc.Stats().Reconnects != reconnects {
				forget()
				return w.c.AwaitRevision(ctx, call.ID, rev, opts...)
			}
		case <-ctx.Done():
			forget()
			return Outcome{}, fmt.Errorf("await call %s: %w", call.ID, ctx.Err())
		}
	}
}

// overBudgetEnds reports whether the notice (notice, an OverBudgetError)
// ends wt's wait once the call's newest recorded revision is read: the
// watcher's follower sees only live events, so it does not know a revision
// recorded before DoFast began (the request was a repeat). A read that
// fails ends the wait with its error.
func (w *Watcher) overBudgetEnds(ctx context.Context, callID string, wt *waiter, notice error) (bool, error) {
	m, err := w.c.lastOf(ctx, callID, subject.Requested)
	if err != nil {
		return true, fmt.Errorf("await call %s: read its newest recorded revision after an over-budget notice: %w", callID, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if m != nil {
		if ev, seq, ok := w.c.eventOf(m, callID); ok {
			wt.f.add(ev, seq)
		}
	}
	var ob *OverBudgetError
	if errors.As(notice, &ob) && !ob.Notice().Answers(wt.f.want, wt.f.recorded) {
		return false, nil
	}
	return true, notice
}

// Close unsubscribes; calls still waiting end with their context.
func (w *Watcher) Close() error {
	var errs []error
	for _, sub := range w.subs {
		if err := sub.Unsubscribe(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
