// Package pagerduty is the on-call channel: a call routed to "pagerduty"
// (or "escalate:pagerduty", once it escalates) triggers a PagerDuty
// incident through the Events API v2, a reminder triggers it again (the
// same dedup key: PagerDuty folds it into the open incident), and the
// call's outcome resolves it. The incident links to the call's console page;
// a page never decides anything.
package pagerduty

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
)

// Name is the channel's name and its word in notify lists.
const Name = "pagerduty"

// maxSummary is PagerDuty's limit on payload.summary.
const maxSummary = 1024

// Event is an Events API v2 request body.
type Event struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"` // trigger | resolve
	DedupKey    string   `json:"dedup_key"`
	Payload     *Payload `json:"payload,omitempty"` // trigger only
	Client      string   `json:"client,omitempty"`
	ClientURL   string   `json:"client_url,omitempty"`
	Links       []Link   `json:"links,omitempty"`
}

// Payload is a trigger's incident description.
type Payload struct {
	Summary  string `json:"summary"`
	Source   string `json:"source"`
	Severity string `json:"severity"` // critical | error | warning | info
	// Timestamp is when the call asked (RFC 3339).
	Timestamp     string        `json:"timestamp,omitempty"`
	Component     string        `json:"component,omitempty"`
	Group         string        `json:"group,omitempty"`
	Class         string        `json:"class,omitempty"`
	CustomDetails webhook.Event `json:"custom_details"`
}

// Link is a link shown on the incident.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// Severity maps an airlock risk to a PagerDuty severity.
func Severity(r airlockv1.Risk) string {
	switch r {
	case airlockv1.Risk_RISK_CRITICAL:
		return "critical"
	case airlockv1.Risk_RISK_HIGH:
		return "error"
	case airlockv1.Risk_RISK_MEDIUM:
		return "warning"
	}
	return "info"
}

// DedupKey is the incident key of a call revision: one incident per call
// that waits, resolved by its outcome.
func DedupKey(rec *airlockv1.ApprovalRecord) string {
	return "airlock." + callref.Of(rec.GetCall()).Key()
}

// Notifier sends Events API v2 requests. It implements notify.Notifier and
// keeps no state: the dedup key makes a repeated trigger or resolve harmless.
type Notifier struct {
	cfg       config.PagerDuty
	publicURL string
	poster    webhook.Poster
	now       func() time.Time
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns the notifier for cfg (validated by config.Validate); client
// nil means a client with a 10 s timeout per request.
func New(cfg config.PagerDuty, publicURL string, client *http.Client) *Notifier {
	return &Notifier{cfg: cfg, publicURL: publicURL, poster: webhook.NewPoster(client), now: time.Now}
}

// Name implements notify.Notifier.
func (n *Notifier) Name() string { return Name }

// Wants implements notify.Notifier: rec's notify list names "pagerduty"
// (or "escalate:pagerduty" and rec has escalated).
func (n *Notifier) Wants(rec *airlockv1.ApprovalRecord) bool {
	return len(notify.Targets(rec, Name)) > 0
}

// Announce implements notify.Notifier: trigger; the ref is the dedup key.
func (n *Notifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	key := DedupKey(rec)
	return key, n.send(ctx, n.trigger(rec, key, webhook.TypeRequested))
}

// Remind implements notify.Notifier: trigger again on the same incident.
func (n *Notifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	typ := webhook.TypeReminder
	if rec.GetEscalated() {
		typ = webhook.TypeEscalated
	}
	return n.send(ctx, n.trigger(rec, orKey(ref, rec), typ))
}

// Update implements notify.Notifier: every outcome resolves the incident
// (nobody needs to be paged for a call that no longer waits).
func (n *Notifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	return n.send(ctx, Event{RoutingKey: n.cfg.RoutingKey, EventAction: "resolve", DedupKey: orKey(ref, rec)})
}

func orKey(ref string, rec *airlockv1.ApprovalRecord) string {
	if ref != "" {
		return ref
	}
	return DedupKey(rec)
}

func (n *Notifier) trigger(rec *airlockv1.ApprovalRecord, key, typ string) Event {
	c := rec.GetCall()
	url := notify.ConsoleURL(n.publicURL, c.GetAgentId(), c.GetCallId())
	return Event{
		RoutingKey: n.cfg.RoutingKey, EventAction: "trigger", DedupKey: key,
		Client: "airlock", ClientURL: url, Links: []Link{{Href: url, Text: "Decide in the airlock console"}},
		Payload: &Payload{
			Summary: Summary(rec, typ), Source: n.cfg.Source, Severity: Severity(rec.GetDecision().GetRisk()),
			Timestamp: c.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), Component: escape.Terminal(calls.QualifiedTool(c)),
			Group: escape.Terminal(c.GetAgentId()), Class: "approval",
			CustomDetails: shownOnCall(webhook.NewEvent(rec, typ, n.publicURL, n.now())),
		},
	}
}

// shownOnCall is ev as custom_details, which PagerDuty shows the person
// paged as plain text: every string an agent (or a reviewer) chose is one
// line with nothing hidden (escape.Terminal), so that no bidi override,
// zero-width character or line break of its own can reorder, hide or draw
// lines beside the incident's fields; the operator's policy reason is made
// visible with its lines kept. Argument names and values are escaped alike.
func shownOnCall(ev webhook.Event) webhook.Event {
	t, c := escape.Terminal, &ev.Call
	c.Agent, c.ID, c.Thread, c.Tool, c.OnBehalfOf, c.Reason = t(c.Agent), t(c.ID), t(c.Thread), t(c.Tool), t(c.OnBehalfOf), t(c.Reason)
	if args, ok := terminalStrings(c.Arguments).(map[string]any); ok {
		c.Arguments = args
	}
	ev.PolicyReason, ev.DecidedBy, ev.DecisionNote = escape.Visible(ev.PolicyReason), t(ev.DecidedBy), t(ev.DecisionNote)
	return ev
}

// terminalStrings is v (decoded JSON) with every string in it, keys
// included, escaped by escape.Terminal.
func terminalStrings(v any) any {
	switch v := v.(type) {
	case string:
		return escape.Terminal(v)
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[escape.Terminal(k)] = terminalStrings(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = terminalStrings(e)
		}
		return l
	}
	return v
}

// Summary is the incident's one line: what waits, at what risk, until when.
// The tool and agent names come from the agent: they are made visible
// and kept on one line.
func Summary(rec *airlockv1.ApprovalRecord, typ string) string {
	c := rec.GetCall()
	lead := "Approval needed"
	switch typ {
	case webhook.TypeReminder:
		lead = "Still waiting for approval"
	case webhook.TypeEscalated:
		lead = "Escalated: approval needed"
	}
	s := fmt.Sprintf("%s: %s by agent %s (risk %s), deadline %s", lead, escape.Terminal(calls.QualifiedTool(c)), escape.Terminal(c.GetAgentId()),
		calls.RiskName(rec.GetDecision().GetRisk()), rec.GetDeadline().AsTime().UTC().Format(time.RFC3339))
	if utf8.RuneCountInString(s) > maxSummary {
		s = string([]rune(s)[:maxSummary-1]) + "…"
	}
	return s
}

func (n *Notifier) send(ctx context.Context, ev Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode PagerDuty %s of %s: %w", ev.EventAction, ev.DedupKey, err)
	}
	if err := n.poster.Post(ctx, n.cfg.URL, body, nil); err != nil {
		return fmt.Errorf("PagerDuty %s of %s: %w", ev.EventAction, ev.DedupKey, err)
	}
	return nil
}
