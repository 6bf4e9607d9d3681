package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// SPEC §8 "every attack … refused and recorded": an agent's attacks on the
// bus itself — another agent's intake, the JetStream API, a service's
// endpoint, another agent's events, a subscription to another agent's
// outcomes, a forged acknowledgement as reply subject — are refused by
// NATS and recorded in the events stream and the audit table as
// unauthorized_attempt, naming the credential the server authenticated
// (bot), not the name bot gave its connection (victim's). A flood of
// 10,000 refusals (SPEC §10) becomes a bounded number of events whose
// counts add up to the 10,000.
func TestAnAgentsAttacksOnTheBusAreRefusedAndRecordedUnderItsCredential(t *testing.T) {
	t.Parallel() // it mostly waits for the audit trail to catch up
	dev, _ := startDevWithLocalClickHouse(t)
	dev.Agent(t, "victim")
	cred, err := natsauth.ReadCredential(dev.Creds("bot"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := cred.KeyPair()
	if err != nil {
		t.Fatal(err)
	}
	botKey, _ := kp.PublicKey()
	victim, err := natsauth.ReadCredential(dev.Creds("victim"))
	if err != nil {
		t.Fatal(err)
	}
	victimKey, _ := victim.PublicKey()

	// bot's own credential, under a name that claims to be victim, down to
	// the server's label of victim's key; h collects what the server refuses.
	h := &hostile{t: t, agent: "bot"}
	bot, err := nats.Connect(dev.NATSURL, nats.Nkey(botKey, kp.Sign), nats.CustomInboxPrefix(natsauth.InboxPrefix("bot")),
		nats.Name(`airlock-agent-victim" - "`+natsauth.AgentAccount("victim")+`/nkey:`+victimKey),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			h.mu.Lock()
			h.errs = append(h.errs, err.Error())
			h.mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bot.Close)
	refused := h.refused

	attacks := []struct{ action, subject, target string }{
		{"publish", "airlock.req.victim.c1", "the intake of agent victim"},
		{"publish", "$JS.API.CONSUMER.CREATE.AIRLOCK_EVENTS", "JetStream API: create a consumer on stream AIRLOCK_EVENTS"},
		{"publish", "airlock.api.approval.decide", "airlock API approval.decide"},
		{"publish", "$JS.API.DIRECT.GET.AIRLOCK_EVENTS.airlock.evt.victim.c1.requested", "events of agent victim"},
		{"subscribe", "airlock.out.victim.>", "republished events of agent victim"},
		{"reply", "$JS.ACK.AIRLOCK_EVENTS.policy.1.1.1.1.1", "acknowledgement of consumer policy"},
	}
	for _, a := range attacks {
		switch a.action {
		case "publish":
			if err := bot.Publish(a.subject, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		case "subscribe":
			if _, err := bot.SubscribeSync(a.subject); err != nil {
				t.Fatal(err)
			}
		case "reply":
			// bot's own intake, with a forged JetStream acknowledgement as the reply
			if err := bot.PublishRequest("airlock.req.bot.r1", a.subject, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		refused(a.subject)
	}

	// At once, a flood (its events are counted below, while the window of
	// its repeats runs): 5,000 repeats of one subject and 5,000 distinct subjects.
	const flood = 10000
	for i := range flood {
		subj := "airlock.req.victim.flood"
		if i%2 == 1 {
			subj = fmt.Sprintf("airlock.req.victim.f%d", i)
		}
		if err := bot.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := bot.FlushTimeout(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, js := dev.Admin(t)
	busEvents := func() []*airlockv1.UnauthorizedAttempt {
		var out []*airlockv1.UnauthorizedAttempt
		for _, ev := range testenv.Events(t, js, fmt.Sprintf("%s.%s.%s.>", subject.EventsPrefix, subject.SystemAgent, subject.BusCall)) {
			u := ev.GetUnauthorizedAttempt()
			if u.GetBus() == nil {
				t.Fatalf("a bus event without its violation: %v", ev)
			}
			if b := u.GetBus(); b.GetUser() != "" && (ev.GetActor().GetId() != "bot" || ev.GetActor().GetType() != airlockv1.ActorType_ACTOR_TYPE_AGENT ||
				b.GetAccount() != natsauth.AgentAccount("bot") || b.GetUser() != botKey) {
				t.Fatalf("a violation by bot's credential is recorded as %v, account %q, user %q (bot is %s, victim %s)",
					ev.GetActor(), b.GetAccount(), b.GetUser(), botKey, victimKey)
			}
			out = append(out, u)
		}
		return out
	}
	for _, a := range attacks {
		testenv.Eventually(t, 10*time.Second, "an unauthorized_attempt for "+a.subject, func() bool {
			for _, u := range busEvents() {
				if u.GetAction() == a.action && u.GetBus().GetSubject() == a.subject {
					if !strings.Contains(u.GetBus().GetTarget(), a.target) || !strings.Contains(u.GetBus().GetClientName(), "victim") ||
						u.GetBus().GetSource() == "" || u.GetBus().GetFirst() == nil {
						t.Fatalf("the event of %s says %v", a.subject, u)
					}
					return true
				}
			}
			return false
		})
	}

	// The audit table has them, with the subject and the actor.
	testenv.Eventually(t, 20*time.Second, "the attacks in the audit table", func() bool {
		r := cli(t, dev, "audit", "query", "--type", subject.UnauthorizedAttempt, "--agent", subject.SystemAgent, "--actor", "bot", "--limit", "0", "--json")
		if r.Code != 0 {
			return false // the sink has not created its table yet
		}
		var reasons []string
		for line := range strings.Lines(r.Stdout) {
			var row struct {
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("airlock audit query --json printed %q: %v", line, err)
			}
			reasons = append(reasons, row.Reason)
		}
		for _, a := range attacks {
			if !strings.Contains(strings.Join(reasons, "\n"), a.action+" refused: "+a.action+" to "+fmt.Sprintf("%q", a.subject)) {
				return false
			}
		}
		return true
	})

	var counted uint64
	var events int
	testenv.Eventually(t, 30*time.Second, "events whose counts add up to the flood", func() bool {
		counted, events = 0, 0
		for _, u := range busEvents() {
			if b := u.GetBus(); strings.HasPrefix(b.GetSubject(), "airlock.req.victim.f") || b.GetSubject() == "" {
				counted += b.GetCount() + b.GetUnrecorded() + b.GetDropped()
				events++
			}
		}
		return counted >= flood
	})
	if counted != flood || events > 40 {
		t.Fatalf("%d violations were recorded as %d events counting %d: want at most 40 events counting exactly %d", flood, events, counted, flood)
	}
	t.Logf("%d violations recorded as %d events", flood, events)
}
