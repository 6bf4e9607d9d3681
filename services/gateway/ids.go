package gateway

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// hashID is a call or thread id made from parts: a prefix and 32 base64url
// characters (192 bits) of their SHA-256, each part length-prefixed so no
// two lists of parts give the same id. It fits [A-Za-z0-9_-]{1,64}.
func hashID(prefix string, parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return prefix + base64.RawURLEncoding.EncodeToString(h.Sum(nil))[:32]
}

func newNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // cannot happen on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// threadOf maps an MCP session to a thread id: the endpoint and the
// session, hashed into [A-Za-z0-9_-]. A session the client cannot name
// (stdio) is the connection's own nonce; a request without any session
// (protocol 2026-07-28) has no thread.
func (ep *endpoint) threadOf(sessionID string, stdio bool) string {
	switch {
	case sessionID != "":
		return hashID("mcp-", ep.cfg.Name, "session", sessionID)
	case stdio:
		return hashID("mcp-", ep.cfg.Name, "stdio", ep.nonce)
	}
	return ""
}

// callIDOf is the id of a tools/call. In a session whose id the server
// chose (streamable HTTP before 2026-07-28) with the request's JSON-RPC id
// known, it is derived from the endpoint, the session, the request id, the
// tool and the arguments' digest: a client that lost the connection and sends the
// same request again reaches the same call, which the policy service
// records once and the executor runs once. A request id used again for
// other arguments is another call. Everywhere else (stdio, where a new
// process means new request ids; 2026-07-28, where a retry is a new
// request) the id is random.
func (ep *endpoint) callIDOf(sessionID, requestID, tool, argsDigest string) string {
	if sessionID == "" || requestID == "" {
		return ids.New("mcp")
	}
	return hashID("mcp-", ep.cfg.Name, sessionID, requestID, tool, argsDigest)
}

// callIDAfter is the id of a request's new call when the call its id
// derives to (lost) had its outcome returned to another session.
func callIDAfter(id, lost string) string { return hashID("mcp-", "after/v1", id, lost) }

// argsDigest is the canonical digest of a call's arguments ("" for
// arguments protobuf cannot hold, which the policy refuses anyway).
func argsDigest(args map[string]any) string {
	digest := ""
	if s, err := structpb.NewStruct(args); err == nil {
		digest, _ = canon.Digest(s)
	}
	return digest
}

// recentCalls remembers the call ids an endpoint derived lately, so that a
// request sent again (same session, same id) follows the call it already
// submitted from the stream instead of waiting for events it may have missed.
// It holds at most recentMax ids, the least recently seen forgotten first.
type recentCalls struct {
	mu    sync.Mutex
	seen  map[string]*list.Element // of order
	order *list.List               // of recentCall, least recently seen first
}

type recentCall struct {
	id string
	at time.Time
}

// recentFor is how long a derived call id is remembered; sessions idle
// longer are closed anyway.
const recentFor = 2 * time.Hour

// recentMax bounds how many derived call ids an endpoint remembers
// (about 200 bytes each): however fast its clients call, the memory stays
// a few MB. An id forgotten early is followed as a new call's when it
// comes again, as one older than recentFor is.
const recentMax = 32 << 10

func newRecentCalls() *recentCalls {
	return &recentCalls{seen: map[string]*list.Element{}, order: list.New()}
}

// add records id and reports whether it was seen before.
func (r *recentCalls) add(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The oldest ids are at the front: forgetting the expired ones costs
	// only what expired.
	for e := r.order.Front(); e != nil && now.Sub(e.Value.(recentCall).at) > recentFor; e = r.order.Front() {
		r.drop(e)
	}
	if e, ok := r.seen[id]; ok {
		e.Value = recentCall{id: id, at: now}
		r.order.MoveToBack(e)
		return true
	}
	for r.order.Len() >= recentMax {
		r.drop(r.order.Front())
	}
	r.seen[id] = r.order.PushBack(recentCall{id: id, at: now})
	return false
}

// forget drops id: a call refused before it was submitted is none to follow.
func (r *recentCalls) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.seen[id]; ok {
		r.drop(e)
	}
}

func (r *recentCalls) drop(e *list.Element) {
	delete(r.seen, e.Value.(recentCall).id)
	r.order.Remove(e)
}

// state is what a 2026-07-28 client echoes back (requestState) after the
// gateway asked its person to confirm a call: which call, for which
// endpoint and tool, until when. It is sealed with the front-end key, so a
// client can neither forge it nor aim it at another endpoint's or another
// tool's call, and any gateway replica can open it.
type state struct {
	Endpoint string `json:"e"`
	Call     string `json:"c"`
	Rev      uint32 `json:"r"`
	Tool     string `json:"t"`
	// Digest of the arguments the person was shown.
	Digest  string `json:"d"`
	Expires int64  `json:"x"`
}

// stateFor is how long a confirmation may take before its state expires
// (the call's own approval deadline usually ends it sooner).
const stateFor = 24 * time.Hour

func sealState(k seal.Key, s state) (string, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(raw)
	return body + "." + k.Sign("gateway-state/v1", body), nil
}

var errBadState = errors.New("the requestState is not one this gateway issued for this endpoint and tool, or it expired: call the tool again")

func openState(k seal.Key, token, endpoint, tool string, now time.Time) (state, error) {
	body, sig, ok := strings.Cut(token, ".")
	if !ok || !k.Verify(sig, "gateway-state/v1", body) {
		return state{}, errBadState
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return state{}, errBadState
	}
	var s state
	if err := json.Unmarshal(raw, &s); err != nil || s.Endpoint != endpoint || s.Tool != tool || now.Unix() > s.Expires {
		return state{}, errBadState
	}
	if err := ids.Validate("call id", s.Call); err != nil {
		return state{}, errBadState
	}
	return s, nil
}
