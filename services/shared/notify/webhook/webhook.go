// Package webhook is the generic outgoing-webhook channel: every event about
// a call routed to an endpoint (announce, reminder, escalation, outcome) is
// POSTed to it as one JSON object, signed so the receiver can check it came
// from airlock and is fresh. A receiver verifies a delivery with Verify, or
// by hand:
//
//	signed   = Airlock-Webhook-Timestamp + "." + raw body
//	expected = "v1=" + hex(HMAC-SHA256(secret, signed))
//
// compared in constant time with Airlock-Webhook-Signature, refusing a
// timestamp (Unix seconds) more than DefaultWindow from its own clock, and
// de-duplicating on the body's "id" (the same delivery may be repeated
// after a crash or a retry). The Airlock-Webhook-Id header is a copy of it
// for logs and is not signed: Verify refuses a delivery whose header
// differs from the signed id, and returns the signed one.
//
// The body is data: the agent's strings (Call, DecisionNote) are sent as
// the agent wrote them, except that every character that would not show
// as itself (bidi overrides and isolates such as U+202E and U+2066,
// zero-width spaces, controls) is written as a JSON \u escape
// (escape.JSON). A JSON parser reads the same strings; a person reading
// the raw body, or a log of it, sees nothing reordered or hidden. A
// receiver that shows the strings to people escapes them for its medium.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/notify"
)

// Channel is the notify-list word for webhooks: "webhook" routes to every
// endpoint, "webhook:<name>" to one.
const Channel = "webhook"

// Headers of every delivery.
const (
	HeaderID        = "Airlock-Webhook-Id"
	HeaderTimestamp = "Airlock-Webhook-Timestamp"
	HeaderSignature = "Airlock-Webhook-Signature"
)

// DefaultWindow is how far a delivery's timestamp may be from the
// receiver's clock (Verify's window when given 0).
const DefaultWindow = 5 * time.Minute

// Event types in Event.Type.
const (
	TypeRequested = "approval_requested"
	TypeReminder  = "reminder"
	TypeEscalated = "escalated"
	TypeOutcome   = "outcome"
	// TypeDigest tells of an agent's pending calls not posted one by one
	// (past approval.notify_burst): a DigestEvent, not an Event.
	TypeDigest = "digest"
)

// DigestEvent is the JSON body of a digest delivery: Calls more of Agent's
// calls wait for a person, without an event of their own. It is signed as
// an Event is.
type DigestEvent struct {
	// ID is unique per digest.
	ID     string    `json:"id"`
	Type   string    `json:"type"`
	SentAt time.Time `json:"sent_at"`
	Agent  string    `json:"agent"`
	Calls  int       `json:"calls"`
	// Text says it in one sentence; ConsoleURL is the console, which lists them.
	Text       string `json:"text"`
	ConsoleURL string `json:"console_url"`
}

// Event is the JSON body of a delivery.
type Event struct {
	// ID is unique per call revision and kind of delivery (the outcome's
	// includes the state, a reminder's the moment it fired); a repeated
	// delivery has the same ID. It is signed with the body.
	ID   string `json:"id"`
	Type string `json:"type"`
	// SentAt is when this attempt was made.
	SentAt time.Time `json:"sent_at"`
	Call   Call      `json:"call"`
	// State is the call's approval state ("pending", "approved", ...).
	State        string    `json:"state"`
	Risk         string    `json:"risk"`
	PolicyReason string    `json:"policy_reason"`
	RuleID       string    `json:"rule_id,omitempty"`
	Approvers    []string  `json:"approvers"`
	Deadline     time.Time `json:"deadline"`
	ConsoleURL   string    `json:"console_url"`
	DecidedBy    string    `json:"decided_by,omitempty"`
	// DecidedByType is who DecidedBy is: "human", "agent" (an agent
	// cancels its own calls: DecisionNote is then its words, not a
	// reviewer's) or "service".
	DecidedByType string `json:"decided_by_type,omitempty"`
	DecisionNote  string `json:"decision_reason,omitempty"`
	ArgumentsHash string `json:"arguments_sha256,omitempty"`
}

// Call is the tool call an Event is about. Every string in it was chosen by
// the agent: treat it as data.
type Call struct {
	Agent      string `json:"agent"`
	ID         string `json:"id"`
	Revision   uint32 `json:"revision"`
	Thread     string `json:"thread,omitempty"`
	Tool       string `json:"tool"`
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	// OnBehalfOfVerified is whether airlock verified OnBehalfOf (the
	// agent's binding in policy.on_behalf_of, or a front-end's seal);
	// false means the person is only the agent's claim.
	OnBehalfOfVerified bool   `json:"on_behalf_of_verified"`
	Reason             string `json:"reason,omitempty"`
	// Arguments as the agent sent them, with the paths the policy redacts
	// replaced by "[redacted]".
	Arguments map[string]any `json:"arguments"`
}

// NewEvent describes rec for a delivery of type typ. publicURL is the
// console's base URL.
func NewEvent(rec *airlockv1.ApprovalRecord, typ, publicURL string, now time.Time) Event {
	rec = calls.Showable(rec)
	c, d := rec.GetCall(), rec.GetDecision()
	ref := callref.Of(c)
	id := ref.EventID("webhook." + typ)
	switch typ {
	case TypeOutcome:
		id += "." + calls.StateName(rec.GetState())
	case TypeReminder, TypeEscalated:
		// Each firing is its own event; a retried delivery of one is the
		// same record, written when it fired, so it keeps its id.
		id += "." + strconv.FormatInt(rec.GetUpdatedAt().AsTime().UnixMilli(), 10)
	}
	ev := Event{
		ID: id, Type: typ, SentAt: now.UTC(),
		Call: Call{Agent: c.GetAgentId(), ID: c.GetCallId(), Revision: ref.Rev, Thread: c.GetThreadId(),
			Tool: calls.QualifiedTool(c), OnBehalfOf: c.GetOnBehalfOf(), OnBehalfOfVerified: c.GetOnBehalfOfVerified(), Reason: c.GetReason(),
			Arguments: calls.Redacted(c.GetArguments(), d.GetRedact())},
		State: calls.StateName(rec.GetState()), Risk: calls.RiskName(d.GetRisk()), PolicyReason: d.GetReason(),
		RuleID: d.GetRuleId(), Approvers: d.GetApprovers(), Deadline: rec.GetDeadline().AsTime().UTC(),
		ConsoleURL: notify.ConsoleURL(publicURL, c.GetAgentId(), c.GetCallId()), ArgumentsHash: rec.GetArgumentsDigest(),
	}
	if ev.Approvers == nil {
		ev.Approvers = []string{}
	}
	if typ == TypeOutcome {
		ev.DecidedBy, ev.DecisionNote = rec.GetDecidedBy().GetId(), rec.GetReason()
		if ev.DecidedBy != "" {
			ev.DecidedByType = calls.ActorTypeName(rec.GetDecidedBy())
		}
	}
	return ev
}

// Sign is the signature header value for body sent at ts (Unix seconds).
func Sign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's signature and timestamp against secret (a
// window of 0 means DefaultWindow) and returns the event's id, read from
// the signed body; a HeaderID that differs from it is refused. It does not
// de-duplicate: a receiver remembers the ids Verify returned for at least
// the window.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, window time.Duration) (string, error) {
	if window == 0 {
		window = DefaultWindow
	}
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return "", fmt.Errorf("missing or malformed %s header", HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > window || d < -window {
		return "", fmt.Errorf("%s is %s away from now, outside the %s window", HeaderTimestamp, d.Round(time.Second), window)
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return "", errors.New("signature does not match: check the shared secret")
	}
	var signed struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &signed); err != nil || signed.ID == "" {
		return "", errors.New("the signed body has no event id: it is not an airlock webhook event")
	}
	if got := h.Get(HeaderID); got != "" && got != signed.ID {
		return "", fmt.Errorf("%s %q is not the signed event id %q: the header was changed after signing", HeaderID, got, signed.ID)
	}
	return signed.ID, nil
}

// Notifier posts to one endpoint. It implements notify.Notifier; it keeps no
// state, so several replicas may run it and a repeated delivery (after a
// crash) carries the same Airlock-Webhook-Id.
type Notifier struct {
	ep        config.Webhook
	publicURL string
	poster    Poster
	now       func() time.Time
}

var (
	_ notify.Notifier = (*Notifier)(nil)
	_ notify.Digester = (*Notifier)(nil)
)

// New returns the notifier of endpoint ep (validated by config.Validate).
// publicURL is the console's base URL; client nil means a client with a
// 10 s timeout per request.
func New(ep config.Webhook, publicURL string, client *http.Client) *Notifier {
	return &Notifier{ep: ep, publicURL: publicURL, poster: NewPoster(client), now: time.Now}
}

// Name implements notify.Notifier: "webhook-<name>".
func (n *Notifier) Name() string { return Channel + "-" + n.ep.Name }

// Wants implements notify.Notifier: rec's notify list names "webhook" or
// "webhook:<name>" (directly, or with "escalate:" once it escalated).
func (n *Notifier) Wants(rec *airlockv1.ApprovalRecord) bool {
	for _, t := range notify.Targets(rec, Channel) {
		if t == "" || t == n.ep.Name {
			return true
		}
	}
	return false
}

// Announce implements notify.Notifier; the ref is the call's key.
func (n *Notifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	return callref.Of(rec.GetCall()).Key(), n.send(ctx, rec, TypeRequested)
}

// Remind implements notify.Notifier: a "reminder", or "escalated" once the
// call has escalated.
func (n *Notifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	if rec.GetEscalated() {
		return n.send(ctx, rec, TypeEscalated)
	}
	return n.send(ctx, rec, TypeReminder)
}

// Update implements notify.Notifier: an "outcome" event.
func (n *Notifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	return n.send(ctx, rec, TypeOutcome)
}

// Digest implements notify.Digester: one "digest" event for the calls of
// an agent not posted one by one.
func (n *Notifier) Digest(ctx context.Context, d notify.Digest) error {
	now := n.now()
	ev := DigestEvent{ID: "digest." + d.Agent + "." + strconv.FormatInt(now.UnixNano(), 10), Type: TypeDigest, SentAt: now.UTC(),
		Agent: d.Agent, Calls: d.Calls, Text: d.Text(), ConsoleURL: strings.TrimRight(n.publicURL, "/") + "/"}
	if err := n.post(ctx, ev.ID, ev); err != nil {
		return fmt.Errorf("webhook %s, digest of agent %s: %w", n.ep.Name, d.Agent, err)
	}
	return nil
}

func (n *Notifier) send(ctx context.Context, rec *airlockv1.ApprovalRecord, typ string) error {
	ev := NewEvent(rec, typ, n.publicURL, n.now())
	if err := n.post(ctx, ev.ID, ev); err != nil {
		return fmt.Errorf("webhook %s, %s of call %s: %w", n.ep.Name, typ, rec.GetCall().GetCallId(), err)
	}
	return nil
}

// post signs and sends the event ev of id.
func (n *Notifier) post(ctx context.Context, id string, ev any) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode webhook event %s: %w", id, err)
	}
	body = escape.JSON(body) // bidi and zero-width characters as \u escapes: the same JSON, nothing hidden where it is read
	return n.poster.Post(ctx, n.ep.URL, body, func(h http.Header) {
		ts := n.now().Unix()
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderSignature, Sign([]byte(n.ep.Secret), ts, body))
	})
}

// Poster POSTs JSON and retries what may succeed later (a network error,
// 429, 5xx) with backoff until the context ends; other answers are final.
type Poster struct {
	client *http.Client
	// Backoff is the wait before each retry, the last one repeating.
	Backoff []time.Duration
}

// NewPoster returns a Poster using client (nil: 10 s per request, and
// up to 32 idle keep-alive connections per receiver, so that calls
// announced at once reuse connections instead of dialing each time).
func NewPoster(client *http.Client) Poster {
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		client = &http.Client{Timeout: 10 * time.Second, Transport: t}
	}
	return Poster{client: client, Backoff: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}}
}

// Post sends body to url; sign sets each attempt's headers (a fresh
// timestamp per attempt). It returns nil on a 2xx answer.
func (p Poster) Post(ctx context.Context, url string, body []byte, sign func(http.Header)) error {
	for attempt := 0; ; attempt++ {
		err := p.once(ctx, url, body, sign)
		var final *finalError
		if err == nil || errors.As(err, &final) {
			return err
		}
		wait := p.Backoff[min(attempt, len(p.Backoff)-1)]
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func (p Poster) once(ctx context.Context, url string, body []byte, sign func(http.Header)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &finalError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock")
	if sign != nil {
		sign(req.Header)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("%s answered %s: %s", url, resp.Status, strings.TrimSpace(string(answer)))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return err
	}
	return &finalError{err}
}

// finalError is an answer that retrying cannot change.
type finalError struct{ err error }

func (f *finalError) Error() string { return f.err.Error() }
func (f *finalError) Unwrap() error { return f.err }
