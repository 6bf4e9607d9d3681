package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAnMCPClientComingAndGoingTellsNoReviewerAnOutcome:
// an MCP client (the endpoint's bearer token: an agent credential) whose
// call waits for a person calls the tool again, as the gateway's "pending"
// answer tells it to, or calls and cancels over and over. Each time its
// client starts or stops waiting, the approval service's followClients
// calls Update on every channel that announced the call — meant to redraw
// Slack and Teams cards, but email, webhooks, Web Push and PagerDuty
// implement Update as "the outcome": each start and each stop mails every
// approver an outcome of a call nobody decided, posts an outcome webhook,
// and resolves the on-call page; and every redraw stores a `notified`
// event per channel in the events stream (and ClickHouse). Nothing bounds
// how often: no budget is charged, and approval.notify_burst bounds
// announcements only.
func TestAnMCPClientComingAndGoingTellsNoReviewerAnOutcome(t *testing.T) {
	smtp, mails := devMailServer(t)
	rx := newOnCallReceiver(t)
	dir := t.TempDir()
	tok := fmt.Sprintf("flood-token-%d-abcdefghijklmnop", time.Now().UnixNano())
	tokFile := filepath.Join(dir, "flood.token")
	writeFile(t, tokFile, tok+"\n")
	cfg := filepath.Join(dir, "airlock.yaml")
	yaml := `approval:
  groups: {reviewers: [alice, bob]}
  default_notify: [console, email, webhook, pagerduty]
` + devMailYAML(smtp, "{alice: alice@example.com, bob: bob@example.com}", "") + fmt.Sprintf(`webhooks:
  - {name: oncall, url: %q, secret: %q}
pagerduty: {routing_key: dev-routing-key, url: %q}
gateway:
  heartbeat: 1s
  endpoints:
    - {name: flood, agent: flooder, token_file: %q, answer_within: 1s}
`, rx.URL+"/hook", onCallSecret, rx.URL+"/v2/enqueue", tokFile)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, filepath.Join(dir, "data"), 0, "", "AIRLOCK_CONFIG="+cfg)
	_, js := dev.Admin(t)
	g := &gatewayEnv{baseURL: dev.HTTPURL, tokens: map[string]string{"flood": tok}}
	cs := g.connect(t, "flood", clientOpts{version: "2025-11-25"})
	testenv.Eventually(t, 60*time.Second, "the gateway to list demo__write_file", func() bool {
		return toolNames(t, cs)["demo__write_file"] != nil
	})
	args := map[string]any{"path": "notes.txt", "content": "hello"}
	call := func(within time.Duration) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_file", Arguments: args})
	}

	// The call waits for a person; the gateway answers "pending".
	res, err := call(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Meta["airlock/status"] != "pending" {
		t.Fatalf("the first call answered %v: %s", res.Meta, text(res))
	}
	callID, _ := res.Meta["airlock/call_id"].(string)
	header := func(m smtptest.Message, h string) string {
		msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			return ""
		}
		return msg.Header.Get(h)
	}
	ofCall := func(kind string) int {
		prefix := fmt.Sprintf("<airlock.flooder.%s.1.%s", callID, kind)
		return len(mails.Find(func(m smtptest.Message) bool { return strings.HasPrefix(header(m, "Message-ID"), prefix) }))
	}
	count := func(match func(typ, state, action, callID string) bool) int {
		rx.mu.Lock()
		defer rx.mu.Unlock()
		n := 0
		for _, ev := range rx.hooks {
			if match(ev.Type, ev.State, "", ev.Call.ID) {
				n++
			}
		}
		for _, ev := range rx.pages {
			if match("", "", ev.EventAction, "") && strings.Contains(ev.DedupKey, callID) {
				n++
			}
		}
		return n
	}
	requested := func() int {
		return count(func(typ, state, _, id string) bool { return typ == webhook.TypeRequested && id == callID })
	}
	outcomeHooks := func() int {
		return count(func(typ, state, _, id string) bool { return typ == webhook.TypeOutcome && id == callID })
	}
	resolves := func() int { return count(func(_, _, action, _ string) bool { return action == "resolve" }) }
	testenv.Eventually(t, 20*time.Second, "the call mailed, posted to the webhook and paged", func() bool {
		return ofCall("request") > 0 && requested() > 0 && count(func(_, _, a, _ string) bool { return a == "trigger" }) > 0
	})
	notified := func() uint64 {
		subj, err := subject.Event("flooder", callID, subject.Notified)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, config.Default().Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subj]
	}

	// The client calls again, as it was told to: five times.
	for i := 0; i < 5; i++ {
		if _, err := call(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Then it calls and cancels as fast as the lease is written.
	start, cycles := time.Now(), 0
	for time.Since(start) < 15*time.Second {
		_, _ = call(150 * time.Millisecond)
		cycles++
	}
	time.Sleep(5 * time.Second) // what the follower has queued is delivered
	rec, err := dev.API(t).Get(context.Background(), "flooder", callID, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("call %s is %s after 5 repeats and %d call-and-cancel cycles in 15s: outcome mails %d (to 2 approvers), outcome webhooks %d, PagerDuty resolves %d, notified events %d",
		callID, rec.GetState(), cycles, ofCall("outcome-"), outcomeHooks(), resolves(), notified())
	if n := ofCall("outcome-"); n > 0 {
		t.Errorf("reviewers were mailed %d outcome mails of a call nobody decided", n)
	}
	if n := outcomeHooks(); n > 0 {
		t.Errorf("the webhook received %d outcome events of a call nobody decided", n)
	}
	if n := resolves(); n > 0 {
		t.Errorf("the on-call page of a call still waiting was resolved %d times", n)
	}
	// Announced on four channels (console, email, webhook, PagerDuty).
	if n := notified(); n > 8 {
		t.Errorf("the client's comings and goings stored %d notified events of one call", n)
	}
}
