package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/notify/pagerduty"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// onCallReceiver is a webhook endpoint and a PagerDuty Events v2 stand-in
// on loopback: it verifies each webhook's signature and keeps what arrived.
type onCallReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	hooks   []webhook.Event
	pages   []pagerduty.Event
	refused []string
}

const onCallSecret = "dev-webhook-secret-0123"

func newOnCallReceiver(t *testing.T) *onCallReceiver {
	r := &onCallReceiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev webhook.Event
		_, err := webhook.Verify([]byte(onCallSecret), req.Header, body, time.Now(), 0)
		if err == nil {
			err = json.Unmarshal(body, &ev)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.refused = append(r.refused, err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.hooks = append(r.hooks, ev)
	})
	mux.HandleFunc("POST /v2/enqueue", func(w http.ResponseWriter, req *http.Request) {
		var ev pagerduty.Event
		if err := json.NewDecoder(req.Body).Decode(&ev); err != nil {
			http.Error(w, "invalid event", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.pages = append(r.pages, ev)
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	r.Server = httptest.NewServer(mux)
	t.Cleanup(r.Close)
	return r
}

func (r *onCallReceiver) hook(typ, state string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.hooks {
		if ev.Type == typ && ev.State == state && ev.Call.ID == "mailme" {
			return true
		}
	}
	return false
}

func (r *onCallReceiver) page(action string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.pages {
		if ev.EventAction == action && ev.DedupKey == "airlock.bot.mailme.1" {
			return true
		}
	}
	return false
}

// devMailServer is a real SMTP server (STARTTLS, AUTH PLAIN) for `airlock
// dev` to mail through, and what it receives.
func devMailServer(t *testing.T) (*smtptest.Server, *smtptest.Collector) {
	t.Helper()
	smtp, err := smtptest.Start(t.TempDir(), smtptest.Options{TLS: true, Username: "airlock", Password: "dev-mail-pass"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(smtp.Close)
	return smtp, smtptest.Collect(smtp)
}

// devMailYAML is the email section of a configuration that mails through
// smtp; addresses is its email.addresses map, extra more email settings
// (indented lines).
func devMailYAML(smtp *smtptest.Server, addresses, extra string) string {
	return fmt.Sprintf(`email:
  smtp_host: %s
  smtp_port: %d
  tls: starttls
  ca_file: %s
  username: airlock
  password: dev-mail-pass
  from: "airlock <airlock@example.com>"
  addresses: %s
`, smtp.Host, smtp.Port, smtp.CAFile, addresses) + extra
}

// `airlock dev` configured with email, a webhook and PagerDuty: a call
// that asks is mailed to the reviewers (not to the requester), posted to
// the webhook and paged; when a reviewer rejects it, the outcome is a reply
// in the mail thread, a webhook outcome event and a PagerDuty resolve.
func TestDevTellsEmailWebhookAndPagerDutyOfACallAndItsOutcome(t *testing.T) {
	smtp, mails := devMailServer(t)
	rx := newOnCallReceiver(t)
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	yaml := `approval:
  groups: {reviewers: [alice, bob]}
  default_notify: [console, email, webhook, pagerduty]
` + devMailYAML(smtp, "{alice: alice@example.com, bob: bob@example.com}", "") + fmt.Sprintf(`webhooks:
  - {name: oncall, url: %q, secret: %q}
pagerduty: {routing_key: dev-routing-key, url: %q}
`, rx.URL+"/hook", onCallSecret, rx.URL+"/v2/enqueue")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := agent.Submit(ctx, airlock.Call{ID: "mailme", Server: "fs", Tool: "write_file",
		Args: map[string]any{"path": "/tmp/notes.txt"}, OnBehalfOf: "alice", Reason: "keep notes"}); err != nil {
		t.Fatal(err)
	}
	root := "<airlock.bot.mailme.1.request@example.com>"
	header := func(m smtptest.Message, h string) string {
		msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			return ""
		}
		return msg.Header.Get(h)
	}
	testenv.Eventually(t, 20*time.Second, "the request mailed to bob, posted to the webhook and paged", func() bool {
		return len(mails.Find(func(m smtptest.Message) bool { return header(m, "Message-ID") == root })) > 0 &&
			rx.hook(webhook.TypeRequested, "pending") && rx.page("trigger")
	})
	for _, m := range mails.Find(func(smtptest.Message) bool { return true }) {
		if len(m.To) != 1 || m.To[0] != "bob@example.com" {
			t.Fatalf("mail went to %v; want bob alone (alice asked for the call)", m.To)
		}
	}
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "mailme", Kind: airlockv1.DecisionKind_DECISION_KIND_REJECT,
		Reason: "not now", Principal: apprReviewer("bob")}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the outcome in the mail thread, at the webhook and at PagerDuty", func() bool {
		return len(mails.Find(func(m smtptest.Message) bool {
			return header(m, "In-Reply-To") == root && header(m, "Message-ID") == "<airlock.bot.mailme.1.outcome-rejected@example.com>"
		})) > 0 && rx.hook(webhook.TypeOutcome, "rejected") && rx.page("resolve")
	})
	rx.mu.Lock()
	defer rx.mu.Unlock()
	if len(rx.refused) > 0 {
		t.Fatalf("the webhook receiver refused deliveries: %v", rx.refused)
	}
}
