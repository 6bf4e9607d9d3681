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
// MaxOverBudgetNoticesPerAgent calls of one agent, that agent's oldest
// forgotten first (so that other agents' notices never push out an
// agent's own), and MaxOverBudgetNotices in all, the expired forgotten
// first, then the oldest of the agent that has the most. A wait whose
// notice was forgotten waits for its context, as before notices.
type OverBudgetNotices struct {
	now    func() time.Time
	mu     sync.Mutex
	agents map[string]*agentNotices
	total  int // the calls kept, of all agents
	// heard is closed, and replaced, when a notice is kept: a waiter that
	// took it before looking wakes up to look again.
	heard chan struct{}
}

// agentNotices are one agent's kept notices; an agent with none has no
// entry (Forget and the bounds remove it), so that the agents kept are
// bounded by the notices kept.
type agentNotices struct {
	agent string
	calls map[string]heardNotice // by call id
	order []string               // the keys of calls in the order heard, for the bounds; no other key
}

type heardNotice struct {
	notice ingress.OverBudget
	until  time.Time
}

// MaxOverBudgetNoticesPerAgent bounds the notices kept of one agent: more
// than the policy sends one agent in the minute a notice is kept at the
// default budget (max(intake.max_pending_per_agent, calls a minute)).
const MaxOverBudgetNoticesPerAgent = 4096

// MaxOverBudgetNotices bounds the notices an OverBudgetNotices keeps in
// all: a few hundred bytes each.
const MaxOverBudgetNotices = 4 * MaxOverBudgetNoticesPerAgent

// noticeKeptAtLeast is how long a notice is kept even when its retry after
// is shorter: long enough for an agent's Await that follows its Submit.
const noticeKeptAtLeast = time.Minute

// NewOverBudgetNotices keeps notices by now's clock (nil: time.Now).
func NewOverBudgetNotices(now func() time.Time) *OverBudgetNotices {
	if now == nil {
		now = time.Now
	}
	return &OverBudgetNotices{now: now, agents: map[string]*agentNotices{}, heard: make(chan struct{})}
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
	agent, call := parts[0], parts[1]
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	a := h.agents[agent]
	if a == nil {
		a = &agentNotices{agent: agent, calls: map[string]heardNotice{}}
	}
	if _, known := a.calls[call]; !known {
		h.trimExpired(a, now)
		for len(a.calls) >= MaxOverBudgetNoticesPerAgent {
			h.dropOldest(a)
		}
		if h.total >= MaxOverBudgetNotices {
			for _, other := range h.agents {
				h.trimExpired(other, now)
			}
		}
		for h.total >= MaxOverBudgetNotices {
			h.dropOldest(h.largest())
		}
		a.order = append(a.order, call)
		h.total++
		h.agents[agent] = a // again, if the bounds emptied and removed it
	}
	keep := max(time.Duration(n.RetryAfterSeconds)*time.Second, noticeKeptAtLeast)
	a.calls[call] = heardNotice{notice: n, until: now.Add(keep)}
	close(h.heard)
	h.heard = make(chan struct{})
}

// trimExpired forgets a's oldest notices while they are expired (a
// notice's until follows the order heard but for its retry after, so this
// may leave an expired one behind a live one, until it is pushed out).
func (h *OverBudgetNotices) trimExpired(a *agentNotices, now time.Time) {
	for len(a.order) > 0 && now.After(a.calls[a.order[0]].until) {
		h.dropOldest(a)
	}
}

// dropOldest forgets a's oldest notice, and a when it was its last.
func (h *OverBudgetNotices) dropOldest(a *agentNotices) {
	delete(a.calls, a.order[0])
	a.order = a.order[1:]
	h.total--
	if len(a.calls) == 0 {
		delete(h.agents, a.agent)
	}
}

// largest is the agent with the most notices kept (one, when the total
// bound is reached).
func (h *OverBudgetNotices) largest() *agentNotices {
	var most *agentNotices
	for _, a := range h.agents {
		if most == nil || len(a.calls) > len(most.calls) {
			most = a
		}
	}
	return most
}

// Heard is the notice about agent's call still kept.
func (h *OverBudgetNotices) Heard(agent, call string) (ingress.OverBudget, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.agents[agent]
	if a == nil {
		return ingress.OverBudget{}, false
	}
	n, ok := a.calls[call]
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
	return h.total
}

// Forget drops the notice about agent's call: it is submitted again, and
// decided anew.
func (h *OverBudgetNotices) Forget(agent, call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.agents[agent]
	if a == nil {
		return
	}
	if _, known := a.calls[call]; !known {
		return
	}
	delete(a.calls, call)
	h.total--
	// Its key leaves order too: an agent resubmitting the same call over
	// its budget would otherwise add a key to order at each notice, which
	// is trimmed only when calls is full.
	a.order = slices.DeleteFunc(a.order, func(k string) bool { return k == call })
	if len(a.calls) == 0 {
		delete(h.agents, agent)
	}
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
