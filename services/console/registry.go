package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
)

// How the console reads the executor's tool registry to warn of a pending
// call that cannot run. The registry changes rarely and the console renders
// many pages, so one list serves every page until the executor says its
// tools changed (executorapi.OnChanged, followed by Run), or for
// registryFresh in case that notice was missed; a page waits at most
// registryPageWait for it, and only when it has none: a slow or absent
// executor never holds a page, which then says nothing.
const (
	registryFresh    = 10 * time.Second
	registryPageWait = 150 * time.Millisecond
	registryAskWait  = 2 * time.Second
)

// registry is a briefly cached copy of the executor's tool list
// (executorapi.Client.List). Safe for concurrent use.
type registry struct {
	list func(context.Context) (*airlockv1.ToolsListResponse, error)
	now  func() time.Time
	log  *slog.Logger

	mu sync.Mutex
	// got is the last list the executor answered; nil when it did not
	// answer the last time it was asked (unknown).
	got *airlockv1.ToolsListResponse
	// asked is when the last ask began; asking is closed when the ask
	// under way ends (nil: none is). waited: a page already waited
	// registryPageWait for it in vain, so no other does (an inbox of many
	// rows waits once, not once a row).
	asked  time.Time
	asking chan struct{}
	waited bool
	// stale: the registry changed while an ask was under way, which may
	// have been answered before the change; another ask follows it.
	stale bool
}

// lacks says what the registry lacks of call's tool, for a call that waits
// for a person and cannot run even approved; nil when the registry has the
// tool, when the call is gate-only (the agent runs its own tools, which no
// registry holds), or when the registry's list is unknown just now.
func (r *registry) lacks(ctx context.Context, call *airlockv1.ToolCall) *airlockv1.UnknownTool {
	if r == nil || call == nil || call.GetAgentRuns() {
		return nil
	}
	list := r.current(ctx)
	if list == nil {
		return nil
	}
	return executorapi.Lacks(list, call.GetServer(), call.GetTool())
}

// current is the list to show now: the cached one, asked again in the
// background once it is older than registryFresh; with none cached, the
// answer of an ask under way if it comes within registryPageWait (waited
// once per ask).
func (r *registry) current(ctx context.Context) *airlockv1.ToolsListResponse {
	r.mu.Lock()
	if r.asking == nil && (r.asked.IsZero() || r.now().Sub(r.asked) >= registryFresh) {
		// The ask outlives the page that started it: its answer serves the
		// next pages.
		r.startAsk(context.WithoutCancel(ctx))
	}
	list, asking, waited := r.got, r.asking, r.waited
	r.mu.Unlock()
	if list != nil || asking == nil || waited {
		return list
	}
	t := time.NewTimer(registryPageWait)
	defer t.Stop()
	select {
	case <-asking:
	case <-t.C:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.asking == asking {
			r.waited = true // still under way after a page's whole wait: the next pages do not wait
		}
		return r.got
	case <-ctx.Done(): // this page is gone; the next still waits its turn
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// changed asks the registry again at once: the executor said its tools
// changed. Until the answer comes, pages show the list they had.
func (r *registry) changed(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asking != nil {
		r.stale = true
		return
	}
	r.startAsk(ctx)
}

// startAsk starts an ask of the registry; callers hold r.mu and no ask is
// under way.
func (r *registry) startAsk(ctx context.Context) {
	r.asking, r.asked, r.waited, r.stale = make(chan struct{}), r.now(), false, false
	go r.ask(ctx, r.asking)
}

// ask lists the registry's tools, keeps the answer (nil when none came)
// and closes done; when the registry changed meanwhile, it asks again.
func (r *registry) ask(ctx context.Context, done chan struct{}) {
	actx, cancel := context.WithTimeout(ctx, registryAskWait)
	defer cancel()
	list, err := r.list(actx)
	if err != nil {
		r.log.Debug("console: the tool registry could not be listed; pages say nothing of tools it lacks until it can", "err", err)
		list = nil
	}
	r.mu.Lock()
	r.got, r.asking = list, nil
	if r.stale && ctx.Err() == nil {
		r.startAsk(ctx)
	}
	r.mu.Unlock()
	close(done)
}

// unknownTool is registry.lacks as p may see it: what the registry has
// instead only for those who read every call (reviewers, auditors); the
// others (someone confirming their own call), like agents, are told only
// that the tool is missing.
func (con *Console) unknownTool(ctx context.Context, p Principal, call *airlockv1.ToolCall) *airlockv1.UnknownTool {
	u := con.tools.lacks(ctx, call)
	if !p.CanRead() {
		return executorapi.Bare(u)
	}
	return u
}
