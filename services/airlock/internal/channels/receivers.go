package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify/pagerduty"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
)

// Webhooks are the webhook endpoints Receivers serve and Configure names:
// with email and PagerDuty, the five channels of a fan-out.
var Webhooks = []string{"oncall", "audit", "chat"}

// PublishAsk publishes approval_requested for agent's call id as the policy
// service would, routed to notify; approvers decide (alice, mailed at
// alice@example.com, when none are given). The call stays pending, and
// counts against agent's share of pending calls
// (approval.max_pending_per_agent): past it the approval service cancels a
// call instead of announcing it.
func PublishAsk(ctx context.Context, pub *bus.Publisher, agent, id string, notify []string, approvers ...string) error {
	if len(approvers) == 0 {
		approvers = []string{"alice"}
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/bench.txt", "text": "hello from the bench"})
	call := &airlockv1.ToolCall{CallId: id, AgentId: agent, Server: "fs", Tool: "write_file", Arguments: args, Revision: 1,
		Reason: "benchmark the fan-out"}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "writes need a person", RuleId: "bench",
		Risk: airlockv1.Risk_RISK_HIGH, Approvers: approvers, Quorum: 1, Notify: notify, PolicyRevision: "bench"}
	ev := &airlockv1.Event{
		EventId: callref.Of(call).EventID("decision"), AgentId: call.AgentId, CallId: id, Revision: 1,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
		Body:  &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: d}},
	}
	if _, err := pub.Publish(ctx, ev, ""); err != nil {
		return fmt.Errorf("publish approval_requested of %s: %w", id, err)
	}
	return nil
}

// Receivers are the local ends of every channel: a real SMTP server,
// the webhook endpoints and a PagerDuty Events v2 stand-in. Each delivery is
// checked as its receiver would check it (a webhook's signature, the
// Events API's required fields) and counted against the call it is about.
type Receivers struct {
	smtp   *smtptest.Server
	http   *http.Server
	url    string
	secret string
	// Hang, when set, makes the endpoint of that webhook name never answer
	// until the receivers close (a channel that hangs).
	Hang string

	mu      sync.Mutex
	waits   map[string]*receiverWait
	got     map[string][]string // call id → "channel kind" deliveries, for tests
	stopped chan struct{}
}

type receiverWait struct {
	left int
	seen []string
	done chan time.Time
}

func StartReceivers(dir string) (*Receivers, error) {
	srv, err := smtptest.Start(dir, smtptest.Options{TLS: true, Username: "airlock", Password: "bench-password"})
	if err != nil {
		return nil, err
	}
	rx := &Receivers{smtp: srv, secret: "bench-webhook-secret", waits: map[string]*receiverWait{}, got: map[string][]string{},
		stopped: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{name}", rx.webhook)
	mux.HandleFunc("POST /v2/enqueue", rx.pagerDuty)
	rx.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	rx.url = "http://" + ln.Addr().String()
	go func() { _ = rx.http.Serve(ln) }()
	go rx.readMail()
	return rx, nil
}

// Configure points cfg's email, webhooks and PagerDuty at the receivers.
func (rx *Receivers) Configure(cfg *config.Config) {
	cfg.Email = config.Email{SMTPHost: rx.smtp.Host, SMTPPort: rx.smtp.Port, TLS: "starttls", CAFile: rx.smtp.CAFile,
		Username: "airlock", Password: "bench-password", From: "airlock <airlock@example.com>",
		Addresses: map[string]string{"alice": "alice@example.com"}}
	cfg.Webhooks = nil
	for _, name := range Webhooks {
		cfg.Webhooks = append(cfg.Webhooks, config.Webhook{Name: name, URL: rx.url + "/hook/" + name, Secret: rx.secret})
	}
	cfg.PagerDuty = config.PagerDuty{RoutingKey: "bench-routing-key", URL: rx.url + "/v2/enqueue", Source: "airlock-bench"}
}

func (rx *Receivers) Close() {
	close(rx.stopped)
	_ = rx.http.Close()
	rx.smtp.Close()
}

// Expect returns a channel that receives the time of the n-th delivery
// about call id.
func (rx *Receivers) Expect(id string, n int) <-chan time.Time {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	w := &receiverWait{left: n, done: make(chan time.Time, 1)}
	rx.waits[id] = w
	return w.done
}

func (rx *Receivers) Missing(id string) string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if w := rx.waits[id]; w != nil {
		return fmt.Sprintf("%d still missing; delivered: %v", w.left, w.seen)
	}
	return "not expected"
}

// delivered counts a delivery of kind on channel about call id.
func (rx *Receivers) delivered(id, channel, kind string) {
	at := time.Now()
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.got[id] = append(rx.got[id], channel+" "+kind)
	w := rx.waits[id]
	if w == nil || w.left == 0 {
		return
	}
	w.seen = append(w.seen, channel)
	if w.left--; w.left == 0 {
		w.done <- at
	}
}

// Deliveries lists what each channel received about call id ("email
// request", "webhook-oncall outcome", "pagerduty resolve", ...).
func (rx *Receivers) Deliveries(id string) []string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return append([]string(nil), rx.got[id]...)
}

func (rx *Receivers) readMail() {
	for {
		select {
		case m := <-rx.smtp.Messages():
			msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
			if err != nil {
				continue
			}
			key, err := callref.ParseKey(msg.Header.Get("X-Airlock-Call"))
			if err != nil {
				continue
			}
			// Message-ID <airlock.<key>.<kind>@<domain>>: request, reminder, outcome-<state>.
			kind, _, _ := strings.Cut(strings.TrimPrefix(msg.Header.Get("Message-ID"), "<airlock."+key.Key()+"."), "@")
			rx.delivered(key.Call, "email", kind)
		case <-rx.stopped:
			return
		}
	}
}

func (rx *Receivers) webhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == rx.Hang {
		select {
		case <-r.Context().Done():
		case <-rx.stopped:
		}
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if _, err := webhook.Verify([]byte(rx.secret), r.Header, body, time.Now(), 0); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "body is not a webhook event", http.StatusBadRequest)
		return
	}
	rx.delivered(ev.Call.ID, "webhook-"+name, ev.Type+" "+ev.State)
}

func (rx *Receivers) pagerDuty(w http.ResponseWriter, r *http.Request) {
	var ev pagerduty.Event
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.RoutingKey == "" || ev.DedupKey == "" ||
		(ev.EventAction == "trigger" && (ev.Payload == nil || ev.Payload.Summary == "" || ev.Payload.Source == "" || ev.Payload.Severity == "")) {
		http.Error(w, `{"status":"invalid event"}`, http.StatusBadRequest)
		return
	}
	key, err := callref.ParseKey(strings.TrimPrefix(ev.DedupKey, "airlock."))
	if err != nil {
		http.Error(w, `{"status":"invalid event"}`, http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"success","message":"Event processed"}`)
	rx.delivered(key.Call, "pagerduty", ev.EventAction)
}
