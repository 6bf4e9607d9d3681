package airlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// OverBudgetNotices keeps the over-budget notices heard (ingress.OverBudget,
// the policy's answer, never stored, to a request it did not decide because
// its agent was over its budget), so that a wait that begins after the
// notice came — Await after Submit, a REST agent's GET after its POST —
// still hears it. A Client keeps one for its agent, heard from before its
// first Submit; a front-end that submits for many agents (the console)
// keeps one for them all (Hear on subject.OverBudgetNotice("*", "*")) and
// gives it to its clients with WithOverBudgetNotices.
//
// It is bounded: a notice is kept until the later of its retry after and
// a minute, or until its call is submitted again; at most
// MaxOverBudgetNotices calls, the oldest forgotten first. A wait whose
// notice was forgotten waits for its context, as before notices.
type OverBudgetNotices struct {
	now   func() time.Time
	mu    sync.Mutex
	calls map[string]heardNotice // by agent + "." + call
	order []string               // the keys of calls in the order heard, for the bound; no other key
	// heard is closed, and replaced, when a notice is kept: a waiter that
	// took it before looking wakes up to look again.
	heard chan struct{}
}

type heardNotice struct {
	notice ingress.OverBudget
	until  time.Time
}

// MaxOverBudgetNotices bounds the notices an OverBudgetNotices keeps: a few
// hundred bytes each.
const MaxOverBudgetNotices = 4096

// noticeKeptAtLeast is how long a notice is kept even when its retry after
// is shorter: long enough for an agent's Await that follows its Submit.
const noticeKeptAtLeast = time.Minute

// NewOverBudgetNotices keeps notices by now's clock (nil: time.Now).
func NewOverBudgetNotices(now func() time.Time) *OverBudgetNotices {
	if now == nil {
		now = time.Now
	}
	return &OverBudgetNotices{now: now, calls: map[string]heardNotice{}, heard: make(chan struct{})}
}

// Hear keeps the notice m carries (subject.OverBudgetNotice), if it is
// one; a nats.MsgHandler.
func (h *OverBudgetNotices) Hear(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, subject.OutPrefix+".")
	if !ok {
		return
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || parts[2] != subject.OverBudget {
		return
	}
	n, err := ingress.DecodeOverBudget(m.Data, parts[0], parts[1])
	if err != nil {
		return
	}
	key := parts[0] + "." + parts[1]
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.calls) >= MaxOverBudgetNotices && len(h.order) > 0 {
		delete(h.calls, h.order[0])
		h.order = h.order[1:]
	}
	if _, known := h.calls[key]; !known {
		h.order = append(h.order, key)
	}
	keep := max(time.Duration(n.RetryAfterSeconds)*time.Second, noticeKeptAtLeast)
	h.calls[key] = heardNotice{notice: n, until: h.now().Add(keep)}
	close(h.heard)
	h.heard = make(chan struct{})
}

// Heard is the notice about agent's call still kept.
func (h *OverBudgetNotices) Heard(agent, call string) (ingress.OverBudget, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.calls[agent+"."+call]
	if !ok || h.now().After(n.until) {
		return ingress.OverBudget{}, false
	}
	return n.notice, true
}

// Len is how many calls' notices are kept (expired ones included until
// they are pushed out or forgotten).
func (h *OverBudgetNotices) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

// Forget drops the notice about agent's call: it is submitted again, and
// decided anew.
func (h *OverBudgetNotices) Forget(agent, call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := agent + "." + call
	if _, known := h.calls[key]; !known {
		return
	}
	delete(h.calls, key)
	// Its key leaves order too: an agent resubmitting the same call over
	// its budget would otherwise add a key to order at each notice, which
	// is trimmed only when calls is full.
	h.order = slices.DeleteFunc(h.order, func(k string) bool { return k == key })
}

// next is closed when the next notice is kept.
func (h *OverBudgetNotices) next() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heard
}

// WithOverBudgetNotices makes the client read over-budget notices from
// notices, which its owner hears on a subscription of its own (a front-end
// that submits for many agents over one connection), instead of
// subscribing to its agent's notices at its first Submit.
func WithOverBudgetNotices(notices *OverBudgetNotices) Option {
	return func(c *Client) { c.notices, c.noticesHeard = notices, true }
}

// hearNotices subscribes, once, to the agent's over-budget notices, before
// the first request is published: a notice that comes before the call is
// awaited is kept for the wait.
func (c *Client) hearNotices(ctx context.Context) error {
	c.noticesMu.Lock()
	defer c.noticesMu.Unlock()
	if c.noticesHeard {
		return nil
	}
	sub, err := c.nc.Subscribe(subject.OutOfAgentType(c.agent, subject.OverBudget), c.notices.Hear)
	if err != nil {
		return fmt.Errorf("follow agent %s's over-budget notices: %w", c.agent, err)
	}
	// FlushWithContext needs a deadline; ctx may have none.
	fctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := c.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("follow agent %s's over-budget notices: %w", c.agent, err)
	}
	c.noticesHeard = true
	return nil
}

// overBudgetHeard is the error of a kept notice about the call that ends
// f's wait, nil when none does.
func (c *Client) overBudgetHeard(callID string, f *follower) error {
	n, ok := c.notices.Heard(c.agent, callID)
	if !ok || !n.Answers(f.want, f.recorded) {
		return nil
	}
	return OverBudgetErrorOf(n)
}
