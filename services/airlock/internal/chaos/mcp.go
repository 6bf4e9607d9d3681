package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-gate/airlock/services/airlock/internal/mcpclient"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// The run's MCP gateway endpoint and the agent its calls are submitted as.
const (
	mcpEndpoint = "chaos-mcp"
	mcpAgent    = "mcp-bot"
	// mcpSessions is the protocol of the clients that hold a session (the
	// replica that started it is the only one serving it); mcpStateless's
	// requests have none, so any replica answers them.
	mcpSessions  = "2025-11-25"
	mcpStateless = "2026-07-28"
	// mcpAnswerWithin is the endpoint's answer_within: short, so that most
	// asked calls are answered "pending" and called again (rejoined).
	mcpAnswerWithin = "2s"
	// mcpHeartbeat is the gateway's heartbeat: a waiting request's lease
	// lasts two, so a call whose replica died is rejoined from a new
	// session within seconds, not the default 45 s (longer than the
	// clients wait for an answer).
	mcpHeartbeat = "2s"
)

// mcpRecord is one tools/call an MCP client made through a gateway replica.
type mcpRecord struct {
	// N is in the call's arguments ("n"): one request, one N, sent again
	// (Attempt > 1) only while it is answered "pending" or its answer was
	// lost, with the same arguments.
	N        int
	Attempt  int
	Tool     string // as the gateway lists it: hook__notify
	Client   string
	Replica  int    // index of the gateway replica it was sent to
	Session  string // the MCP session id ("" without a session)
	Protocol string
	Sent     time.Time
	// Status is the answer's airlock/status ("completed" for the tool's
	// own result); CallID the call it names. Both "" when no answer came:
	// Err says why (the replica died with the request, say).
	Status, CallID string
	Err            string
	Probe          bool
}

// mcpLoad is the MCP side of the load: clients that reach the gateway
// replicas as a deployment's do — each session client kept on one replica
// (the Service's ClientIP affinity) and moved to another when its replica
// is gone, starting a new session there; a stateless client sending each
// request to the next replica.
type mcpLoad struct {
	urls  []string // each gateway replica's endpoint URL
	token string
	// ready says whether a replica serves (its /healthz): a Service sends
	// clients to ready pods only.
	ready func(ctx context.Context, replica int) bool
	// askAt is the replica the asking client is kept on: the one the
	// schedule kills, so a session dies while its calls wait for a person.
	askAt int
	// askFor bounds how long a call waiting for a person is asked about.
	askFor time.Duration
	// killAt: when the schedule kills the asker's replica (zero: never);
	// killed: when it did (unix ns, 0 before). Around it the asker has a
	// call waiting and reviewers hold their decisions (holdDecision), so
	// that the kill finds a call waiting for a person, offered, and the
	// client's new session rejoins it while it still waits.
	killAt time.Time
	killed atomic.Int64
	// askWaiting: the replica (+1; 0: none) on which the asker's current
	// request was answered "pending": its call waits for a person, offered.
	askWaiting atomic.Int64
	seq        atomic.Int64

	mu      sync.Mutex
	records []mcpRecord
	// sessions counts the MCP sessions started (more than the session
	// clients: the probes', and those started again on another replica).
	sessions int
	// reviewErrs: what the reviewers of the asked calls could not do (the
	// call then expires, or was decided already).
	reviewErrs []string
}

// askLead: the asker sends a request this long before its replica's
// scheduled kill (unless one is under way), long enough for its call to be
// asked of a person and offered (offerLag) first; holdAfterKill: decisions
// of MCP calls wait until this long after the kill, longer than the dead
// replica's leases take to run out (2 heartbeats) and a new session to
// start; askerWaitLimit: how long the kill of the asker's replica waits for
// a call of the asker to wait there (awaitAskerWaiting).
const (
	askLead        = 3 * time.Second
	holdAfterKill  = 8 * time.Second
	askerWaitLimit = 10 * time.Second
)

// awaitAskerWaiting waits, at most within, until the asker's current
// request on replica was answered "pending": the kill of that replica then
// finds a call waiting for a person and offered (its approval request may
// come late while the bus recovers from an earlier fault). It reports
// whether it did.
func (m *mcpLoad) awaitAskerWaiting(ctx context.Context, replica int, within time.Duration) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for m.askWaiting.Load() != int64(replica+1) {
		select {
		case <-tick.C:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// noteKill records that the asker's replica was killed at at (the first
// gateway kill: the schedule's first is the asker's).
func (m *mcpLoad) noteKill(at time.Time) { m.killed.CompareAndSwap(0, at.UnixNano()) }

// holdDecision is how long a reviewer about to decide an MCP call at now
// waits first (0: none): from a moment before the asker's scheduled
// request until holdAfterKill after the kill (a kill later than scheduled
// is waited for, a minute at most).
func (m *mcpLoad) holdDecision(now time.Time) time.Duration {
	if m.killAt.IsZero() || now.Before(m.killAt.Add(-askLead-time.Second)) {
		return 0
	}
	k := m.killed.Load()
	switch {
	case k == 0 && now.After(m.killAt.Add(time.Minute)):
		return 0
	case k == 0:
		return 500 * time.Millisecond
	}
	return max(time.Until(time.Unix(0, k).Add(holdAfterKill)), 0)
}

func (m *mcpLoad) noteReviewErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reviewErrs = append(m.reviewErrs, err.Error())
}

// mcpTools are what the MCP clients call, by weight: notify (allowed, not
// idempotent: it must never run twice), lookup (allowed, idempotent) and
// drop (denied).
var mcpTools = []weighted[string]{
	{45, serverHook + "__" + toolNotify}, {35, serverHook + "__" + toolLookup}, {20, serverHook + "__" + toolDrop},
}

// run drives the clients from now until until, one request each every
// interval (with jitter), the choices fixed by seed.
func (m *mcpLoad) run(ctx context.Context, seed int64, until time.Time, interval time.Duration) {
	var wg sync.WaitGroup
	clients := []struct {
		name     string
		protocol string
		replica  int // -1: the next replica for each request
	}{{"mcp-session-1", mcpSessions, 0}, {"mcp-session-2", mcpSessions, 1 % len(m.urls)}, {"mcp-stateless", mcpStateless, -1}}
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(seed), uint64(100+i)))
			m.client(ctx, r, c.name, c.protocol, c.replica, until, interval)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.asker(ctx, rand.New(rand.NewPCG(uint64(seed), 110)), until, interval)
	}()
	wg.Wait()
}

// asker is an MCP client whose calls (sync: asked, idempotent) wait for a
// person longer than the endpoint's answer_within: answered "pending", it
// calls again with the same arguments in its session, which rejoins the
// call, until the outcome comes. When its replica dies it starts a session
// on another and calls again there, which rejoins the call too once the
// dead replica's lease on it has run out (the gateway offers a call waiting
// for a person to the endpoint's other sessions).
func (m *mcpLoad) asker(ctx context.Context, r *rand.Rand, until time.Time, interval time.Duration) {
	const name, tool = "mcp-asker", serverHook + "__" + toolSync
	var cs *mcp.ClientSession
	replica := m.askAt
	defer func() {
		if cs != nil {
			_ = cs.Close()
		}
	}()
	for time.Now().Before(until) && ctx.Err() == nil {
		wait := interval/2 + time.Duration(r.Int64N(int64(interval))) // the load's own pacing
		if lead := m.killAt.Add(-askLead); !m.killAt.IsZero() && time.Now().Before(lead) && time.Now().Add(wait).After(lead) {
			wait = time.Until(lead) // a call waits for a person when the replica is killed
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		n := int(m.seq.Add(1))
		if cs != nil && replica != m.askAt && m.ready(ctx, m.askAt) {
			// Back to the replica the schedule kills, once it serves again
			// (a fault sent the client elsewhere meanwhile).
			_ = cs.Close()
			cs, replica = nil, m.askAt
		}
		giveUp := time.Now().Add(m.askFor)
		for attempt := 1; time.Now().Before(giveUp) && ctx.Err() == nil; attempt++ {
			if attempt > 1 {
				select {
				case <-time.After(300 * time.Millisecond): // a client calling again
				case <-ctx.Done():
					return
				}
			}
			if cs == nil {
				var err error
				if cs, replica, err = m.connect(ctx, name, mcpSessions, replica); err != nil {
					continue
				}
			}
			rec := m.call(ctx, cs, name, mcpSessions, replica, tool, n, attempt, false)
			if rec.Status == "pending" {
				m.askWaiting.Store(int64(replica + 1))
			} else {
				m.askWaiting.Store(0)
			}
			if rec.Err != "" {
				_ = cs.Close()
				cs = nil
				continue
			}
			if rec.Status != "pending" {
				break
			}
		}
	}
}

// client is one MCP client making one call after another until until.
func (m *mcpLoad) client(ctx context.Context, r *rand.Rand, name, protocol string, pinned int, until time.Time, interval time.Duration) {
	var cs *mcp.ClientSession
	replica := max(pinned, 0)
	defer func() {
		if cs != nil {
			_ = cs.Close()
		}
	}()
	for k := 0; time.Now().Before(until) && ctx.Err() == nil; k++ {
		select {
		case <-time.After(interval/2 + time.Duration(r.Int64N(int64(interval)))): // the load's own pacing
		case <-ctx.Done():
			return
		}
		if pinned < 0 {
			replica = k % len(m.urls)
		}
		if cs == nil || pinned < 0 {
			var err error
			if cs, replica, err = m.connect(ctx, name, protocol, replica); err != nil {
				continue // no replica answers at all: try again at the next turn
			}
		}
		rec := m.call(ctx, cs, name, protocol, replica, pick(r, mcpTools), int(m.seq.Add(1)), 1, false)
		if pinned < 0 || rec.Err != "" {
			// A stateless client has nothing to keep; a session client whose
			// request failed starts a new session (its replica may be gone).
			_ = cs.Close()
			cs = nil
		}
	}
}

// connect starts a session at replica, or at the next live one when it is
// gone (as a Service sends a client whose pod died to another), and says
// which replica it reached.
func (m *mcpLoad) connect(ctx context.Context, name, protocol string, replica int) (*mcp.ClientSession, int, error) {
	var errs []error
	for i := range m.urls {
		at := (replica + i) % len(m.urls)
		if !m.ready(ctx, at) {
			continue
		}
		// A stream that breaks is not resumed: the gateway keeps no event
		// store, and its replica may be gone.
		cs, err := mcpclient.Connect(ctx, m.urls[at], mcpclient.Options{Name: name, Token: m.token, Protocol: protocol, Within: 10 * time.Second, NoResume: true})
		if err == nil {
			if protocol == mcpSessions {
				m.mu.Lock()
				m.sessions++
				m.mu.Unlock()
			}
			return cs, at, nil
		}
		errs = append(errs, err)
	}
	return nil, replica, fmt.Errorf("no gateway replica answers: %w", errors.Join(errs...))
}

// call makes one tools/call and records what came back.
func (m *mcpLoad) call(ctx context.Context, cs *mcp.ClientSession, client, protocol string, replica int, tool string, n, attempt int, probe bool) mcpRecord {
	rec := mcpRecord{N: n, Attempt: attempt, Tool: tool, Client: client, Replica: replica, Session: cs.ID(), Protocol: protocol, Sent: time.Now(), Probe: probe}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"agent": mcpAgent, "n": n}})
	cancel()
	if err != nil {
		rec.Err = err.Error()
	} else {
		rec.Status, rec.CallID = answerOf(res)
	}
	m.mu.Lock()
	m.records = append(m.records, rec)
	m.mu.Unlock()
	return rec
}

// answerOf reads an answer: an airlock status and call id from _meta, or
// the tool's own result (the run's tool server names the call it ran).
func answerOf(res *mcp.CallToolResult) (status, callID string) {
	if s, ok := res.Meta["airlock/status"].(string); ok {
		id, _ := res.Meta["airlock/call_id"].(string)
		return s, id
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			var out struct {
				Call string `json:"call"`
			}
			if json.Unmarshal([]byte(t.Text), &out) == nil && out.Call != "" {
				return subject.Completed, out.Call
			}
		}
	}
	return "unrecognised answer", ""
}

// probe measures a gateway replica's loss: from since, a new client (a
// session at the first live replica) calls lookup every second until one
// call completes, and returns when it did.
func (m *mcpLoad) probe(ctx context.Context, since time.Time, limit time.Duration) (time.Duration, bool) {
	deadline := since.Add(limit)
	for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
		if k > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
		cs, replica, err := m.connect(ctx, "mcp-probe", mcpSessions, 0)
		if err != nil {
			continue
		}
		rec := m.call(ctx, cs, "mcp-probe", mcpSessions, replica, serverHook+"__"+toolLookup, int(m.seq.Add(1)), 1, true)
		_ = cs.Close()
		if rec.Status == subject.Completed {
			return time.Since(since), true
		}
	}
	return limit, false
}

// snapshot copies the records, the sessions started and the review errors.
func (m *mcpLoad) snapshot() ([]mcpRecord, int, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mcpRecord(nil), m.records...), m.sessions, append([]string(nil), m.reviewErrs...)
}
