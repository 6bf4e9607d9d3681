package console

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// heardOverBudget keeps the over-budget notices this console heard (the
// policy's answer, never stored, to a request it did not decide because
// the agent was over its budget), so that an agent on the REST API, which
// submits and then asks, is told even when the notice came between the two:
// until the notice's retry after, when the agent may submit the call
// again. At most maxHeardOverBudget calls are kept, the oldest forgotten
// first: a notice forgotten leaves its call "not found", as before notices.
type heardOverBudget struct {
	now   func() time.Time
	mu    sync.Mutex
	calls map[string]heardNotice // by agent + "." + call
	order []string               // the keys of calls in the order heard, for the bound; no other key
}

type heardNotice struct {
	notice ingress.OverBudget
	until  time.Time
}

// maxHeardOverBudget bounds the notices a console keeps: a few hundred
// bytes each.
const maxHeardOverBudget = 4096

func newHeardOverBudget(now func() time.Time) *heardOverBudget {
	return &heardOverBudget{now: now, calls: map[string]heardNotice{}}
}

// hear keeps the notice m carries (subject.OverBudgetNotice), if it is one.
func (h *heardOverBudget) hear(m *nats.Msg) {
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
	for len(h.calls) >= maxHeardOverBudget && len(h.order) > 0 {
		delete(h.calls, h.order[0])
		h.order = h.order[1:]
	}
	if _, known := h.calls[key]; !known {
		h.order = append(h.order, key)
	}
	h.calls[key] = heardNotice{notice: n, until: h.now().Add(time.Duration(n.RetryAfterSeconds) * time.Second)}
}

// get is the notice about agent's call still in force.
func (h *heardOverBudget) get(agent, call string) (ingress.OverBudget, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.calls[agent+"."+call]
	if !ok || h.now().After(n.until) {
		return ingress.OverBudget{}, false
	}
	return n.notice, true
}

// forget drops the notice about agent's call: the agent submitted it again.
func (h *heardOverBudget) forget(agent, call string) {
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
