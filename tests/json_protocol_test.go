package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/airlock-gate/airlock/services/shared/subject"
)

// jsonAgent is an agent written the way the README's "any language"
// section says, with nothing of airlock's: a NATS client, its credential
// file read as JSON, and JSON on the wire. It never decodes protobuf.
type jsonAgent struct {
	t     *testing.T
	nc    *nats.Conn
	agent string
}

func dialJSONAgent(t *testing.T, credFile, url string) *jsonAgent {
	t.Helper()
	raw, err := os.ReadFile(credFile)
	if err != nil {
		t.Fatal(err)
	}
	var cred struct{ Agent, Seed string }
	if err := json.Unmarshal(raw, &cred); err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(cred.Seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	nc, err := nats.Connect(url, nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix("_INBOX_"+cred.Agent))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &jsonAgent{t: t, nc: nc, agent: cred.Agent}
}

// follow subscribes to airlock.out.<agent>.<call>.> and hands every
// message on as (stored subject, JSON object).
type jsonEvent struct {
	Subject string
	Doc     map[string]any
}

func (a *jsonAgent) follow(call string) <-chan jsonEvent {
	a.t.Helper()
	out := make(chan jsonEvent, 64)
	_, err := a.nc.Subscribe("airlock.out."+a.agent+"."+call+".>", func(m *nats.Msg) {
		var doc map[string]any
		if ct := m.Header.Get("Content-Type"); ct != "application/json" {
			a.t.Errorf("%s arrived as %q, not JSON", m.Subject, ct)
			return
		}
		if err := json.Unmarshal(m.Data, &doc); err != nil {
			a.t.Errorf("%s is not JSON: %v: %s", m.Subject, err, m.Data)
			return
		}
		out <- jsonEvent{Subject: m.Header.Get("Nats-Subject"), Doc: doc}
	})
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		a.t.Fatal(err)
	}
	return out
}

// submit publishes a request as a JetStream request and checks the ack.
func (a *jsonAgent) submit(call, body string) {
	a.t.Helper()
	msg := &nats.Msg{Subject: "airlock.req." + a.agent + "." + call, Header: nats.Header{"Content-Type": {"application/json"}}, Data: []byte(body)}
	reply, err := a.nc.RequestMsg(msg, 5*time.Second)
	if err != nil {
		a.t.Fatal(err)
	}
	var ack struct {
		Stream string
		Seq    uint64
		Error  any
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Stream == "" || ack.Error != nil {
		a.t.Fatalf("the stream did not acknowledge the request: %s", reply.Data)
	}
}

// until reads events until one of the wanted body types arrives and
// returns the types seen in order, and that event.
func until(t *testing.T, ch <-chan jsonEvent, want ...string) ([]string, map[string]any) {
	t.Helper()
	var seen []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ch:
			typ := bodyType(ev.Doc)
			seen = append(seen, typ)
			if !strings.HasSuffix(ev.Subject, "."+typ) {
				t.Errorf("a %s event was stored on %s", typ, ev.Subject)
			}
			for _, w := range want {
				if typ == w {
					return seen, ev.Doc
				}
			}
		case <-deadline:
			t.Fatalf("no %v within 30s; saw %v", want, seen)
		}
	}
}

// bodyType is the event's type: its one body member.
func bodyType(doc map[string]any) string {
	for _, k := range []string{"requested", "allowed", "denied", "approval_requested", "notified", "approved", "rejected", "changes_requested",
		"expired", "canceled", "started", "completed", "failed", "unauthorized_attempt", "invalid", "vote_cast", "decision_refused", "grant_used"} {
		if _, ok := doc[k]; ok {
			return k
		}
	}
	return "?"
}

func obj(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// TestAnAgentThatSpeaksOnlyJSON follows the README's protocol end to end:
// an auto-allowed call, a call a person approves, a malformed request, and
// reading outcomes back with Direct Get after a "restart" — all JSON.
func TestAnAgentThatSpeaksOnlyJSON(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	dev.Agent(t, "json-bot") // creates the credential; the SDK client is not used
	a := dialJSONAgent(t, dev.Creds("json-bot"), dev.NATSURL)
	token := adminToken(t, dev)

	t.Run("an_allowed_call_runs_and_every_event_is_json", func(t *testing.T) {
		ch := a.follow("j-1")
		a.submit("j-1", `{"requested":{"call":{"call_id":"j-1","tool":"demo__echo","arguments":{"text":"hi"},"reason":"say hi"}}}`)
		seen, end := until(t, ch, "completed", "failed", "denied", "invalid")
		if strings.Join(seen, " ") != "requested allowed started completed" {
			t.Fatalf("events %v", seen)
		}
		var result map[string]any
		if err := json.Unmarshal([]byte(obj(end, "completed", "result_json").(string)), &result); err != nil || result["text"] != "hi" {
			t.Fatalf("completed %v", end)
		}
	})
	t.Run("a_call_a_person_approves_says_who", func(t *testing.T) {
		ch := a.follow("j-2")
		a.submit("j-2", `{"requested":{"call":{"call_id":"j-2","tool":"demo__write_file","arguments":{"path":"j.txt","content":"x"}}}}`)
		_, asked := until(t, ch, "approval_requested")
		if obj(asked, "approval_requested", "decision", "rule_id") != "write" || obj(asked, "approval_requested", "deadline") == nil {
			t.Fatalf("approval_requested %v", asked)
		}
		waitPending(t, dev, token, "j-2")
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/approvals/json-bot/j-2/approve", token, `{}`); status != http.StatusOK {
			t.Fatalf("approve: %d %s", status, body)
		}
		_, approved := until(t, ch, "approved")
		if obj(approved, "actor", "id") != "admin" {
			t.Fatalf("approved %v", approved)
		}
		until(t, ch, "completed")
	})
	t.Run("a_malformed_request_gets_an_invalid_event_in_json", func(t *testing.T) {
		ch := a.follow("j-3")
		a.submit("j-3", `{"requested":{"call":{"call_id":"j-3","tool":"demo__echo","arguments":"not an object"}}}`)
		_, inv := until(t, ch, "invalid")
		if why, _ := obj(inv, "invalid", "reason").(string); why == "" {
			t.Fatalf("invalid %v", inv)
		}
	})
	t.Run("a_gate_only_calls_report_is_recorded_in_json", func(t *testing.T) {
		ch := a.follow("j-4")
		a.submit("j-4", `{"requested":{"call":{"call_id":"j-4","tool":"demo__echo","agent_runs":true,"arguments":{"text":"mine"}}}}`)
		until(t, ch, "allowed")
		a.submit("j-4", `{"call_id":"j-4","revision":1,"reported":{"result_json":"{\"ran\":true}"}}`)
		_, done := until(t, ch, "completed")
		if obj(done, "completed", "agent_ran") != true {
			t.Fatalf("completed %v", done)
		}
	})
	t.Run("after_a_restart_airlocks_read_gives_the_outcome_as_json", func(t *testing.T) {
		fresh := dialJSONAgent(t, dev.Creds("json-bot"), dev.NATSURL)
		m, err := fresh.nc.Request(subject.AgentEvents("json-bot"), []byte(`{"call_id":"j-1","types":["completed","rejected"]}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		line, body, _ := bytes.Cut(m.Data, []byte("\n"))
		var doc map[string]any
		f := strings.Fields(string(line))
		if len(f) != 4 || f[0] != "airlock.evt.json-bot.j-1.exec.completed" || f[2] != "json" || f[3] != strconv.Itoa(len(body)-1) ||
			json.Unmarshal(body, &doc) != nil || obj(doc, "completed") == nil {
			t.Fatalf("the read answered %v %q: want the completed event alone, as JSON after the line naming it", m.Header, m.Data)
		}
		none, err := fresh.nc.Request(subject.AgentEvents("json-bot"), []byte(`{"call_id":"j-1","types":["rejected"]}`), 5*time.Second)
		if err != nil || len(none.Data) != 0 || none.Header.Get("Nats-Service-Error-Code") != "" {
			t.Fatalf("the read of an event that never happened: %v %q %v; want an empty reply", none.Header, none.Data, err)
		}
	})
}
