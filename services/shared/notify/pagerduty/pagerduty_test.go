package pagerduty_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/notify/pagerduty"
	"google.golang.org/protobuf/types/known/structpb"
)

const routingKey = "R0123456789abcdef0123456789abcdef"

// eventsAPI is a local stand-in for PagerDuty's Events API v2: it checks
// each request as the API does (required fields, known actions and
// severities, summary length), answers 202 with the dedup key, and keeps
// each incident's history.
type eventsAPI struct {
	*httptest.Server
	mu        sync.Mutex
	incidents map[string][]pagerduty.Event
	refused   []string
}

func newEventsAPI(t *testing.T) *eventsAPI {
	a := &eventsAPI{incidents: map[string][]pagerduty.Event{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/enqueue", func(w http.ResponseWriter, r *http.Request) {
		var ev pagerduty.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			a.refuse(w, "invalid JSON")
			return
		}
		switch {
		case ev.RoutingKey != routingKey:
			a.refuse(w, "invalid routing key")
			return
		case ev.EventAction != "trigger" && ev.EventAction != "resolve" && ev.EventAction != "acknowledge":
			a.refuse(w, "invalid event_action")
			return
		case ev.EventAction == "trigger" && (ev.Payload == nil || ev.Payload.Summary == "" || ev.Payload.Source == "" ||
			!strings.Contains(" critical error warning info ", " "+ev.Payload.Severity+" ") || len([]rune(ev.Payload.Summary)) > 1024):
			a.refuse(w, "trigger needs payload.summary (≤ 1024), payload.source and a known payload.severity")
			return
		case ev.EventAction != "trigger" && ev.DedupKey == "":
			a.refuse(w, "dedup_key required")
			return
		}
		a.mu.Lock()
		a.incidents[ev.DedupKey] = append(a.incidents[ev.DedupKey], ev)
		a.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "success", "message": "Event processed", "dedup_key": ev.DedupKey})
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *eventsAPI) refuse(w http.ResponseWriter, why string) {
	a.mu.Lock()
	a.refused = append(a.refused, why)
	a.mu.Unlock()
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "errors": []string{why}})
}

func (a *eventsAPI) history(key string) []pagerduty.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]pagerduty.Event(nil), a.incidents[key]...)
}

func newNotifier(a *eventsAPI) *pagerduty.Notifier {
	return pagerduty.New(config.PagerDuty{RoutingKey: routingKey, URL: a.URL + "/v2/enqueue", Source: "airlock-test"}, "https://airlock.example.com", nil)
}

func TestPagerDutyNotifierPassesTheNotifierContract(t *testing.T) {
	var a *eventsAPI
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			a = newEventsAPI(t)
			return newNotifier(a)
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			h := a.history(ref)
			want := map[string]string{"announce": "trigger", "remind": "trigger", "update": "resolve"}[kind]
			n := map[string]int{"announce": 1, "remind": 2}[kind]
			return len(h) > 0 && h[len(h)-1].EventAction == want && (n == 0 || len(h) >= n)
		},
	})
}

func TestPagerDutyTriggersWithTheCallAndResolvesOnTheOutcome(t *testing.T) {
	a := newEventsAPI(t)
	n := newNotifier(a)
	rec := notifytest.Record("c-page")
	rec.Decision.Notify = []string{"pagerduty"}
	rec.Call.Tool = "write_file\r\nSeverity: info\u202e"
	if !n.Wants(rec) {
		t.Fatal("a call routed to pagerduty is not wanted")
	}
	ref, err := n.Announce(context.Background(), rec)
	if err != nil {
		t.Fatalf("Announce: %v (refused: %v)", err, a.refused)
	}
	if ref != "airlock.bot.c-page.1" {
		t.Fatalf("dedup key = %q", ref)
	}
	trig := a.history(ref)[0]
	p := trig.Payload
	if p.Severity != "error" || p.Source != "airlock-test" || trig.ClientURL != "https://airlock.example.com/calls/bot/c-page" {
		t.Fatalf("trigger = %+v, payload %+v", trig, p)
	}
	if strings.ContainsAny(p.Summary, "\r\n\u202e") || !strings.Contains(p.Summary, `write_file\u000d\nSeverity: info\u202e`) {
		t.Fatalf("summary %q shows agent text raw: it must be one line with hidden characters made visible", p.Summary)
	}
	if p.CustomDetails.PolicyReason != "writes need a person" || p.CustomDetails.Call.Arguments["path"] != "/tmp/notes.txt" {
		t.Fatalf("custom_details = %+v", p.CustomDetails)
	}
	rec.State = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
	if err := n.Update(context.Background(), rec, ref); err != nil {
		t.Fatal(err)
	}
	h := a.history(ref)
	if last := h[len(h)-1]; last.EventAction != "resolve" || last.DedupKey != ref {
		t.Fatalf("outcome sent %+v, want a resolve of %s", last, ref)
	}
}

func TestSeverityFollowsRisk(t *testing.T) {
	for risk, want := range map[airlockv1.Risk]string{
		airlockv1.Risk_RISK_LOW: "info", airlockv1.Risk_RISK_MEDIUM: "warning",
		airlockv1.Risk_RISK_HIGH: "error", airlockv1.Risk_RISK_CRITICAL: "critical", airlockv1.Risk_RISK_UNSPECIFIED: "info",
	} {
		if got := pagerduty.Severity(risk); got != want {
			t.Errorf("Severity(%s) = %s, want %s", risk, got, want)
		}
	}
}

func TestPagerDutyIsToldOfAnEscalationEntryOnlyOnceEscalated(t *testing.T) {
	n := newNotifier(newEventsAPI(t))
	rec := notifytest.Record("c")
	rec.Decision.Notify = []string{"slack", "escalate:pagerduty"}
	if n.Wants(rec) {
		t.Fatal("escalate:pagerduty paged before the call escalated")
	}
	rec.Escalated = true
	if !n.Wants(rec) {
		t.Fatal("escalate:pagerduty did not page once the call escalated")
	}
}

// TestPagerDutyShowsAgentTextEscaped: the person paged reads custom_details
// as plain text, so every string an agent chose there (reason, arguments,
// names) is one line with its bidi overrides, isolates and zero-width
// characters shown as \u escapes (escape.Terminal), as Slack and mail
// show them.
func TestPagerDutyShowsAgentTextEscaped(t *testing.T) {
	a := newEventsAPI(t)
	n := newNotifier(a)
	rec := notifytest.Record("c-text")
	rec.Decision.Notify = []string{"pagerduty"}
	const sly = "fine\u202eexe.txt\nApproved by: admin \u2066ok\u2069 z\u200bw"
	const shown = `fine\u202eexe.txt\nApproved by: admin \u2066ok\u2069 z\u200bw`
	rec.Call.Reason, rec.Call.ThreadId, rec.Call.OnBehalfOf = sly, sly, sly
	rec.Call.Arguments.Fields["path"] = structpb.NewStringValue(sly)
	rec.Call.Arguments.Fields["k\u202e"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue(sly)}})
	ref, err := n.Announce(context.Background(), rec)
	if err != nil {
		t.Fatalf("Announce: %v (refused: %v)", err, a.refused)
	}
	d := a.history(ref)[0].Payload.CustomDetails
	for _, c := range []struct{ name, got, want string }{
		{"reason", d.Call.Reason, shown},
		{"thread", d.Call.Thread, shown},
		{"on_behalf_of", d.Call.OnBehalfOf, shown},
		{"an argument", fmt.Sprint(d.Call.Arguments["path"]), shown},
		{"a list in an argument with a sly name", fmt.Sprint(d.Call.Arguments[`k\u202e`]), "[" + shown + "]"},
	} {
		if c.got != c.want {
			t.Errorf("custom_details %s = %q, want %q (one line, nothing hidden)", c.name, c.got, c.want)
		}
	}
}
