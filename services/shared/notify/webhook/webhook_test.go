package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
)

const secret = "s3cret-s3cret-s3cret"

// receiver is a local webhook endpoint that verifies every delivery as a
// receiver following the README would, and keeps the verified ones.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	events   []webhook.Event
	bodies   []map[string]any // each verified delivery's JSON, as a receiver in any language reads it
	raw      []string         // each verified delivery's body as sent
	refused  []string
	failNext int // answer 503 to this many deliveries first
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.failNext > 0 {
			r.failNext--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		id, err := webhook.Verify([]byte(secret), req.Header, body, time.Now(), 0)
		if err != nil {
			r.refused = append(r.refused, err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID != id {
			r.refused = append(r.refused, "body does not parse or its id differs from the signed one")
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var raw map[string]any
		_ = json.Unmarshal(body, &raw) // it parsed as an Event above
		r.events, r.bodies, r.raw = append(r.events, ev), append(r.bodies, raw), append(r.raw, string(body))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) find(typ, callID string) (webhook.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Type == typ && ev.Call.ID == callID {
			return ev, true
		}
	}
	return webhook.Event{}, false
}

func endpoint(url string) config.Webhook {
	return config.Webhook{Name: "oncall", URL: url, Secret: secret}
}

func routed(rec *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord {
	rec.Decision.Notify = []string{"webhook:oncall"}
	return rec
}

func TestWebhookNotifierPassesTheNotifierContract(t *testing.T) {
	var r *receiver
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			r = newReceiver(t)
			return webhook.New(endpoint(r.URL), "https://airlock.example.com", nil)
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			typ := map[string]string{"announce": webhook.TypeRequested, "remind": webhook.TypeReminder, "update": webhook.TypeOutcome}[kind]
			ev, ok := r.find(typ, rec.GetCall().GetCallId())
			if kind == "update" {
				return ok && ev.State == calls.StateName(rec.GetState()) && ev.DecidedBy == "alice"
			}
			return ok
		},
	})
}

func TestWebhookEventCarriesTheCallAndItsOutcome(t *testing.T) {
	r := newReceiver(t)
	n := webhook.New(endpoint(r.URL), "https://airlock.example.com/", nil)
	rec := routed(notifytest.Record("c-1"))
	rec.Decision.Redact = []string{"/text"}
	if !n.Wants(rec) {
		t.Fatal("an endpoint named in the notify list does not want the call")
	}
	ref, err := n.Announce(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := r.find(webhook.TypeRequested, "c-1")
	if !ok {
		t.Fatalf("no approval_requested delivered; refused: %v", r.refused)
	}
	for _, c := range []struct{ name, got, want string }{
		{"tool", ev.Call.Tool, "fs__write_file"},
		{"risk", ev.Risk, "high"},
		{"policy reason", ev.PolicyReason, "writes need a person"},
		{"console link", ev.ConsoleURL, "https://airlock.example.com/calls/bot/c-1"},
		{"redacted argument", ev.Call.Arguments["text"].(string), "[redacted]"},
		{"plain argument", ev.Call.Arguments["path"].(string), "/tmp/notes.txt"},
		{"state", ev.State, "pending"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	rec.State = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
	rec.DecidedBy = &airlockv1.Actor{Id: "alice"}
	rec.Reason = "not today"
	if err := n.Update(context.Background(), rec, ref); err != nil {
		t.Fatal(err)
	}
	out, ok := r.find(webhook.TypeOutcome, "c-1")
	if !ok || out.State != "rejected" || out.DecidedBy != "alice" || out.DecisionNote != "not today" || out.ID == ev.ID {
		t.Fatalf("outcome event = %+v (found %v)", out, ok)
	}
}

// body is the JSON of the delivery of typ about callID.
func (r *receiver) body(t *testing.T, typ, callID string) map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if c, _ := b["call"].(map[string]any); b["type"] == typ && c["id"] == callID {
			return b
		}
	}
	t.Fatalf("no %s delivered about %s; refused: %v", typ, callID, r.refused)
	return nil
}

// TestAReceiverCanTellAClaimFromWhatAirlockVerified: the JSON says whether
// airlock verified whom the call acts for, and whether an outcome's reason
// is a person's or the agent's own (an agent cancels its own calls).
func TestAReceiverCanTellAClaimFromWhatAirlockVerified(t *testing.T) {
	r := newReceiver(t)
	n := webhook.New(endpoint(r.URL), "https://airlock.example.com/", nil)
	for _, tt := range []struct {
		name     string
		verified bool
		by       *airlockv1.Actor
		wantBy   string
	}{
		{"an_agents_claim_canceled_by_the_agent", false, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"}, "agent"},
		{"a_verified_person_rejected_by_a_reviewer", true, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}, "human"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := routed(notifytest.Record("c-" + tt.name))
			rec.Call.OnBehalfOf, rec.Call.OnBehalfOfVerified = "alice, verified by airlock SSO", tt.verified
			ref, err := n.Announce(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			call, _ := r.body(t, webhook.TypeRequested, rec.GetCall().GetCallId())["call"].(map[string]any)
			if got, ok := call["on_behalf_of_verified"]; !ok || got != tt.verified {
				t.Errorf("call.on_behalf_of_verified = %v (present %v), want %v beside on_behalf_of %q", got, ok, tt.verified, call["on_behalf_of"])
			}
			rec.State, rec.DecidedBy, rec.Reason = airlockv1.ApprovalState_APPROVAL_STATE_CANCELED, tt.by, "superseded"
			if err := n.Update(context.Background(), rec, ref); err != nil {
				t.Fatal(err)
			}
			if got := r.body(t, webhook.TypeOutcome, rec.GetCall().GetCallId())["decided_by_type"]; got != tt.wantBy {
				t.Errorf("decided_by_type = %v, want %q", got, tt.wantBy)
			}
		})
	}
}

func TestWebhookRoutingReadsTheNotifyList(t *testing.T) {
	n := webhook.New(endpoint("http://127.0.0.1:1"), "", nil)
	for _, c := range []struct {
		name      string
		notify    []string
		escalated bool
		want      bool
	}{
		{"wants_a_call_naming_every_webhook", []string{"webhook"}, false, true},
		{"wants_a_call_naming_this_endpoint", []string{"console", " webhook:oncall "}, false, true},
		{"ignores_a_call_naming_another_endpoint", []string{"webhook:audit"}, false, false},
		{"ignores_an_escalation_entry_before_escalation", []string{"escalate:webhook:oncall"}, false, false},
		{"wants_an_escalation_entry_once_escalated", []string{"escalate:webhook:oncall"}, true, true},
		{"ignores_a_call_naming_no_webhook", []string{"slack", "email"}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := notifytest.Record("c")
			rec.Decision.Notify, rec.Escalated = c.notify, c.escalated
			if got := n.Wants(rec); got != c.want {
				t.Fatalf("Wants(%v, escalated=%v) = %v, want %v", c.notify, c.escalated, got, c.want)
			}
		})
	}
}

func TestVerifyRefusesForgedStaleAndAlteredDeliveries(t *testing.T) {
	body := []byte(`{"id":"x"}`)
	now := time.Now()
	signed := func(ts time.Time, key string, b []byte) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(webhook.HeaderSignature, webhook.Sign([]byte(key), ts.Unix(), b))
		return h
	}
	for _, c := range []struct {
		name string
		h    http.Header
		ok   bool
	}{
		{"accepts_a_fresh_delivery_signed_with_the_secret", signed(now, secret, body), true},
		{"refuses_a_delivery_signed_with_another_secret", signed(now, "another-secret-123", body), false},
		{"refuses_a_delivery_older_than_the_window", signed(now.Add(-6*time.Minute), secret, body), false},
		{"refuses_a_delivery_from_the_future", signed(now.Add(6*time.Minute), secret, body), false},
		{"refuses_a_body_altered_after_signing", signed(now, secret, []byte(`{"id":"y"}`)), false},
		{"refuses_a_delivery_without_headers", http.Header{}, false},
		{"accepts_a_delivery_whose_id_header_is_the_signed_id", withID(signed(now, secret, body), "x"), true},
		{"refuses_a_replay_whose_id_header_was_changed", withID(signed(now, secret, body), "x-replayed"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := webhook.Verify([]byte(secret), c.h, body, now, 0)
			if (err == nil) != c.ok || (c.ok && id != "x") {
				t.Fatalf("Verify = %q, %v, want ok=%v and the signed id x", id, err, c.ok)
			}
		})
	}
}

func withID(h http.Header, id string) http.Header {
	h.Set(webhook.HeaderID, id)
	return h
}

func TestEveryReminderHasItsOwnIDAndARetryKeepsIt(t *testing.T) {
	r := newReceiver(t)
	n := webhook.New(endpoint(r.URL), "", nil)
	rec := routed(notifytest.Record("c-remind"))
	remind := func(at time.Time) {
		t.Helper()
		rec.Reminded, rec.UpdatedAt = true, timestamppb.New(at)
		if err := n.Remind(context.Background(), rec, ""); err != nil {
			t.Fatal(err)
		}
	}
	first := time.Now()
	remind(first)
	remind(first) // the same reminder delivered again (a retry after a crash)
	remind(first.Add(time.Hour))
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, ev := range r.events {
		if ev.Type == webhook.TypeReminder {
			ids = append(ids, ev.ID)
		}
	}
	if len(ids) != 3 || ids[0] != ids[1] || ids[1] == ids[2] {
		t.Fatalf("reminder ids %q: want the retry to keep the first's id and the later reminder a new one (refused: %v)", ids, r.refused)
	}
}

func TestWebhookRetriesAReceiverThatIsBrieflyDown(t *testing.T) {
	r := newReceiver(t)
	r.failNext = 2
	n := webhook.New(endpoint(r.URL), "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Announce(ctx, routed(notifytest.Record("c-retry"))); err != nil {
		t.Fatalf("Announce after two 503s: %v", err)
	}
	if _, ok := r.find(webhook.TypeRequested, "c-retry"); !ok {
		t.Fatal("the delivery did not arrive after the receiver came back")
	}
}

func TestWebhookDoesNotRetryARefusal(t *testing.T) {
	r := newReceiver(t)
	n := webhook.New(config.Webhook{Name: "oncall", URL: r.URL, Secret: "the-wrong-secret-123"}, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Announce(ctx, routed(notifytest.Record("c-wrong"))); err == nil {
		t.Fatal("a delivery the receiver refused (401) was reported as delivered")
	}
	if ctx.Err() != nil {
		t.Fatal("a 401 was retried until the deadline instead of failing at once")
	}
}

// An agent's calls past approval.notify_burst reach the endpoint as one
// signed "digest" event: the agent, how many, and the console.
func TestWebhookDigestIsOneSignedEventNamingTheAgentAndTheCount(t *testing.T) {
	r := newReceiver(t)
	n := webhook.New(endpoint(r.URL), "https://airlock.example.com/", nil)
	if err := n.Digest(context.Background(), notify.Digest{Agent: "bot", Calls: 7, Latest: routed(notifytest.Record("c-9"))}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) != 1 || len(r.refused) != 0 {
		t.Fatalf("%d deliveries verified, refused %v; want one digest", len(r.bodies), r.refused)
	}
	body := r.bodies[0]
	if body["type"] != webhook.TypeDigest || body["agent"] != "bot" || body["calls"] != float64(7) ||
		body["console_url"] != "https://airlock.example.com/" || body["call"] != nil {
		t.Fatalf("digest body %v", body)
	}
}

// TestWebhookBodyEscapesHiddenCharactersLosslessly: bidi overrides,
// isolates and zero-width characters an agent wrote reach the receiver as
// JSON \u escapes, never raw, and the body still parses to the agent's
// exact text (the webhook is data).
func TestWebhookBodyEscapesHiddenCharactersLosslessly(t *testing.T) {
	r := newReceiver(t)
	n := webhook.New(endpoint(r.URL), "https://airlock.example.com/", nil)
	rec := routed(notifytest.Record("c-hidden"))
	const sly = "fine\u202eexe.txt \u2066ok\u2069 z\u200bw"
	rec.Call.Reason = sly
	rec.Call.Arguments.Fields["path"] = structpb.NewStringValue(sly)
	if _, err := n.Announce(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	ev, ok := r.find(webhook.TypeRequested, "c-hidden")
	if !ok {
		t.Fatalf("no approval_requested delivered; refused: %v", r.refused)
	}
	if ev.Call.Reason != sly || ev.Call.Arguments["path"] != sly {
		t.Fatalf("the body parses to reason %q, path %q; want the agent's text %q", ev.Call.Reason, ev.Call.Arguments["path"], sly)
	}
	r.mu.Lock()
	body := r.raw[len(r.raw)-1]
	r.mu.Unlock()
	if i := strings.IndexAny(body, "\u202e\u2066\u2069\u200b"); i >= 0 || !strings.Contains(body, `fine\u202eexe.txt \u2066ok\u2069 z\u200bw`) {
		t.Fatalf("the body holds a hidden character raw (at %d) or not as a \\u escape:\n%s", i, body)
	}
}
