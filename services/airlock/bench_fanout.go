package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify/pagerduty"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// fanoutBenchOptions tune `airlock bench fanout`.
type fanoutBenchOptions struct {
	JSON       bool
	Samples    int
	CPUProfile string
}

// fanoutReport holds the figures of one run.
type fanoutReport struct {
	Setup string `json:"setup"`
	// One is approval_requested → the mail delivered, for calls routed to email alone.
	One latency `json:"one_channel"`
	// Five is approval_requested → the last of five deliveries (email, three
	// webhooks, PagerDuty), for calls routed to all five.
	Five latency `json:"five_channels"`
	// Ratio is Five.P50us / One.P50us; the goal is ≤ GoalMax.
	Ratio   float64 `json:"five_per_one_p50"`
	GoalMax float64 `json:"goal_max"`
	GoalMet bool    `json:"goal_met"`
}

// benchWebhooks are the webhook endpoints of the five-channel fan-out.
var benchWebhooks = []string{"oncall", "audit", "chat"}

func newBenchFanoutCmd(g *globals) *cobra.Command {
	o := fanoutBenchOptions{}
	cmd := &cobra.Command{
		Use:   "fanout",
		Short: "Notification fan-out: a pending call told to five channels vs to one (SPEC §8, goal p50 ≤ 1.2×)",
		Long: `Starts an embedded NATS server, the approval service with the email, webhook
and PagerDuty notifiers built from configuration as ` + "`airlock serve approval`" + ` builds
them, and local receivers: a real SMTP server (STARTTLS, AUTH PLAIN), an HTTP
server that verifies each webhook's signature, and a PagerDuty Events API v2
stand-in. It then publishes approval_requested events, one at a time, and
times each from the publish to the last channel's delivery at its receiver:
  one:  calls routed to email alone (the costliest single channel: TLS
        handshake, authentication, SMTP round trips);
  five: calls routed to email, three webhook endpoints and PagerDuty.
One and five alternate, sample by sample, so a change in the machine's load
affects both alike. SPEC §8's goal: five ≤ 1.2 × one, p50. Exit status 1
when the goal is missed (docs/benchmarks.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, g, o.CPUProfile, o.JSON, func(ctx context.Context, cfg config.Config) (*fanoutReport, error) {
				return runFanoutBench(ctx, cfg, o)
			}, printFanoutBench)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Samples, "samples", 300, "calls timed for each figure")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	return cmd
}

// Missed implements goalReport.
func (r *fanoutReport) Missed() []string {
	if r.GoalMet {
		return nil
	}
	return []string{fmt.Sprintf("five channels %.2f× one, p50, goal ≤ %.1f×", r.Ratio, r.GoalMax)}
}

func printFanoutBench(w io.Writer, r *fanoutReport) {
	fmt.Fprintf(w, "setup: %s\n\n", r.Setup)
	fmt.Fprintf(w, "%-46s %10s %10s\n", "approval_requested → last delivery", "p50 µs", "p99 µs")
	fmt.Fprintf(w, "%-46s %10.0f %10.0f\n", "one channel (email)", r.One.P50us, r.One.P99us)
	fmt.Fprintf(w, "%-46s %10.0f %10.0f\n", "five channels (email, 3 webhooks, PagerDuty)", r.Five.P50us, r.Five.P99us)
	fmt.Fprintf(w, "\ngoal five ≤ %.1f× one, p50: %s (%.2f×, %d samples each)\n", r.GoalMax, mark(r.GoalMet), r.Ratio, r.One.N)
}

func runFanoutBench(ctx context.Context, cfg config.Config, o fanoutBenchOptions) (*fanoutReport, error) {
	if o.Samples < 10 {
		return nil, errors.New("--samples must be at least 10")
	}
	dir, url, stop, err := startBenchServer(cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	rx, err := startFanoutReceivers(dir)
	if err != nil {
		return nil, err
	}
	defer rx.close()
	cfg.NATS.URL = url
	cfg.Dev.DataDir = dir
	cfg.Approval.LogNotifier = false
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	rx.configure(&cfg)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	services := newBenchServices(ctx, cfg, log)
	defer services.stop()
	if _, err := services.start("approval", func(d svc.Deps) (svc.Service, error) {
		return approval.NewFromConfig(ctx, d, onCallNotifiers(d)...)
	}); err != nil {
		return nil, err
	}
	deps, err := connectDeps(ctx, cfg, log, "airlock-bench-policy")
	if err != nil {
		return nil, err
	}
	defer deps.NC.Close()
	pub := deps.Publisher("policy")

	// "webhook" routes to every endpoint: email + 3 webhooks + PagerDuty.
	one, five := []string{"email"}, []string{"email", "webhook", "pagerduty"}
	sample := func(i int, notify []string) (time.Duration, error) {
		id := fmt.Sprintf("fan-%d", i)
		n := 1
		if len(notify) > 1 {
			n = 2 + len(benchWebhooks)
		}
		wait := rx.expect(id, n)
		t0 := time.Now()
		if err := publishAsk(ctx, pub, id, notify); err != nil {
			return 0, err
		}
		select {
		case last := <-wait:
			return last.Sub(t0), nil
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("call %s: not every channel delivered within 30s (%s)", id, rx.missing(id))
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	warm := o.Samples/10 + 20
	a, b := make([]time.Duration, 0, o.Samples), make([]time.Duration, 0, o.Samples)
	for i := range warm + o.Samples {
		d1, err := sample(2*i, one)
		if err != nil {
			return nil, err
		}
		d5, err := sample(2*i+1, five)
		if err != nil {
			return nil, err
		}
		if i >= warm {
			a, b = append(a, d1), append(b, d5)
		}
	}
	rep := &fanoutReport{
		Setup: fmt.Sprintf("embedded NATS, file store, fsync %s; the approval service in-process; receivers on loopback: an SMTP server (go-smtp, STARTTLS, AUTH PLAIN), an HTTP server verifying webhook signatures, a PagerDuty Events v2 stand-in; one call at a time",
			syncText(cfg.Dev.Sync)),
		One: summarize(a), Five: summarize(b), GoalMax: 1.2,
	}
	rep.Ratio = rep.Five.P50us / rep.One.P50us
	rep.GoalMet = rep.Ratio <= rep.GoalMax
	return rep, nil
}

// publishAsk publishes approval_requested for call id as the policy service
// would, routed to notify; approvers decide (alice, mailed at
// alice@example.com, when none are given).
func publishAsk(ctx context.Context, pub *bus.Publisher, id string, notify []string, approvers ...string) error {
	if len(approvers) == 0 {
		approvers = []string{"alice"}
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/bench.txt", "text": "hello from the bench"})
	call := &airlockv1.ToolCall{CallId: id, AgentId: "bench", Server: "fs", Tool: "write_file", Arguments: args, Revision: 1,
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

// fanoutReceivers are the local ends of every channel: a real SMTP server,
// the webhook endpoints and a PagerDuty Events v2 stand-in. Each delivery is
// checked as its receiver would check it (a webhook's signature, the
// Events API's required fields) and counted against the call it is about.
type fanoutReceivers struct {
	smtp   *smtptest.Server
	http   *http.Server
	url    string
	secret string
	// hang, when set, makes the endpoint of that webhook name never answer
	// until the receivers close (a channel that hangs).
	hang string

	mu      sync.Mutex
	waits   map[string]*fanoutWait
	got     map[string][]string // call id → "channel kind" deliveries, for tests
	stopped chan struct{}
}

type fanoutWait struct {
	left int
	seen []string
	done chan time.Time
}

func startFanoutReceivers(dir string) (*fanoutReceivers, error) {
	srv, err := smtptest.Start(dir, smtptest.Options{TLS: true, Username: "airlock", Password: "bench-password"})
	if err != nil {
		return nil, err
	}
	rx := &fanoutReceivers{smtp: srv, secret: "bench-webhook-secret", waits: map[string]*fanoutWait{}, got: map[string][]string{},
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

// configure points cfg's email, webhooks and PagerDuty at the receivers.
func (rx *fanoutReceivers) configure(cfg *config.Config) {
	cfg.Email = config.Email{SMTPHost: rx.smtp.Host, SMTPPort: rx.smtp.Port, TLS: "starttls", CAFile: rx.smtp.CAFile,
		Username: "airlock", Password: "bench-password", From: "airlock <airlock@example.com>",
		Addresses: map[string]string{"alice": "alice@example.com"}}
	cfg.Webhooks = nil
	for _, name := range benchWebhooks {
		cfg.Webhooks = append(cfg.Webhooks, config.Webhook{Name: name, URL: rx.url + "/hook/" + name, Secret: rx.secret})
	}
	cfg.PagerDuty = config.PagerDuty{RoutingKey: "bench-routing-key", URL: rx.url + "/v2/enqueue", Source: "airlock-bench"}
}

func (rx *fanoutReceivers) close() {
	close(rx.stopped)
	_ = rx.http.Close()
	rx.smtp.Close()
}

// expect returns a channel that receives the time of the n-th delivery
// about call id.
func (rx *fanoutReceivers) expect(id string, n int) <-chan time.Time {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	w := &fanoutWait{left: n, done: make(chan time.Time, 1)}
	rx.waits[id] = w
	return w.done
}

func (rx *fanoutReceivers) missing(id string) string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if w := rx.waits[id]; w != nil {
		return fmt.Sprintf("%d still missing; delivered: %v", w.left, w.seen)
	}
	return "not expected"
}

// delivered counts a delivery of kind on channel about call id.
func (rx *fanoutReceivers) delivered(id, channel, kind string) {
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

// deliveries lists what each channel received about call id ("email
// request", "webhook-oncall outcome", "pagerduty resolve", ...).
func (rx *fanoutReceivers) deliveries(id string) []string {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return append([]string(nil), rx.got[id]...)
}

func (rx *fanoutReceivers) readMail() {
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

func (rx *fanoutReceivers) webhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == rx.hang {
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
	if err := webhook.Verify([]byte(rx.secret), r.Header, body, time.Now(), 0); err != nil {
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

func (rx *fanoutReceivers) pagerDuty(w http.ResponseWriter, r *http.Request) {
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
