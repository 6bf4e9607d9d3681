package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// sessionCap bounds an endpoint's live HTTP sessions (gateway.max_sessions):
// each holds goroutines and memory until it idles out
// (gateway.session_timeout), and one bearer token could otherwise open
// them without end. A new session past the bound closes the endpoint's
// least recently used session with no request in flight (its client's next
// request is answered 404, and MCP clients then start a new session);
// when every session has a request in flight the new one is refused.
type sessionCap struct {
	max int

	mu   sync.Mutex
	tick uint64
	// uses: the endpoint's sessions by id, as the SDK named them; one the
	// SDK has since closed is dropped at the next admission. It counts
	// every live session, so the bound holds.
	uses map[string]*sessionUse
	// admitting counts new sessions admitted whose id is not yet known.
	admitting int
}

type sessionUse struct {
	last     uint64 // tick of its latest request
	inFlight int    // its POSTs being served
	// seen: it was among the server's sessions at an admission. The SDK
	// names a session before it connects it: until then it is kept, or
	// it would escape the count (one that never connects is an old,
	// idle entry, the first evicted).
	seen bool
}

func newSessionCap(max int) *sessionCap {
	return &sessionCap{max: max, uses: map[string]*sessionUse{}}
}

// named notes a session the SDK just created.
func (c *sessionCap) named(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	c.uses[id] = &sessionUse{last: c.tick}
}

// use notes a request in session id; done ends it. A POST is in flight
// until done (a session's GET stream does not keep it from being closed,
// as it does not keep the SDK's idle timer from closing it).
func (c *sessionCap) use(id string, post bool) (done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.uses[id]
	if u == nil {
		return func() {}
	}
	c.tick++
	u.last = c.tick
	if !post {
		return func() {}
	}
	u.inFlight++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		u.inFlight--
	}
}

// closer is a live session, as admit closes it.
type closer interface{ Close() error }

// admit makes room for a new session among the endpoint's server's
// sessions (liveNow reads them): it closes the least recently used idle
// session when the endpoint is at its bound. ok is false when every
// session is busy; else release is called once the new session's request
// is served.
//
// The sessions are read under the lock: read before it, they could miss a
// session an admission connected just before its release, and a session
// both unseen and with no admission under way is taken for one that never
// connected, dropped without being closed, and lives on uncounted.
func (c *sessionCap) admit(liveNow func() map[string]closer) (release func(), ok bool) {
	c.mu.Lock()
	live := liveNow()
	for id, u := range c.uses {
		switch {
		case live[id] != nil:
			u.seen = true
		case u.seen: // closed since
			delete(c.uses, id)
		}
	}
	var evict closer
	if len(c.uses)+c.admitting >= c.max {
		// A session not yet seen live may be one another admission is
		// connecting right now: deleted here it would connect after all,
		// uncounted. It is evicted only when no admission is under way
		// (then it never connected).
		victim := ""
		for id, u := range c.uses {
			if u.inFlight == 0 && (u.seen || c.admitting == 0) && (victim == "" || u.last < c.uses[victim].last) {
				victim = id
			}
		}
		if victim == "" {
			c.mu.Unlock()
			return nil, false
		}
		delete(c.uses, victim)
		evict = live[victim] // nil: it never connected
	}
	c.admitting++
	c.mu.Unlock()
	if evict != nil {
		_ = evict.Close()
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.admitting--
	}, true
}

// liveSessions are the sessions of the endpoint's server now.
func (ep *endpoint) liveSessions() map[string]closer {
	live := map[string]closer{}
	for s := range ep.server.Sessions() {
		if id := s.ID(); id != "" {
			live[id] = s
		}
	}
	return live
}

// tooManySessions refuses a new session with a JSON-RPC error (id: the
// request's, if it has one) saying what to do.
func (ep *endpoint) tooManySessions(w http.ResponseWriter, body []byte) {
	refuseBusy(w, body, fmt.Sprintf("endpoint %s already has %d MCP sessions, each with a request in flight (gateway.max_sessions): "+
		"end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id), wait for a request to finish, or raise gateway.max_sessions",
		ep.cfg.Name, ep.sessions.max))
}

// tooManyRequests refuses a request past gateway.max_requests the same way.
func (ep *endpoint) tooManyRequests(w http.ResponseWriter, body []byte) {
	refuseBusy(w, body, fmt.Sprintf("endpoint %s is already serving %d requests (gateway.max_requests): "+
		"wait for a call to finish and send this request again, cancel calls you no longer wait for, or raise gateway.max_requests",
		ep.cfg.Name, cap(ep.requests)))
}

// refuseBusy answers HTTP 503 with Retry-After and a JSON-RPC error whose
// id is the request's, if body (or the start of it) names one.
func refuseBusy(w http.ResponseWriter, body []byte, msg string) {
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": requestID(body), "error": map[string]any{"code": codeTooManySessions, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(out)
}

// codeTooManySessions is a JSON-RPC server error (-32000 to -32099 are
// the implementation's): too many sessions or requests.
const codeTooManySessions = -32001

// busyPrefix is how much of a refused request's body is read for its id:
// a request refused for want of a slot is not read whole.
const busyPrefix = 4 << 10

// requestID is the JSON-RPC id of a request whose body starts with body
// (it may be cut short), null when it names none before the cut.
func requestID(body []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return json.RawMessage("null")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if key == "id" {
			return v
		}
	}
	return json.RawMessage("null")
}
