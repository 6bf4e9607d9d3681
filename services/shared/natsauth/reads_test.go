package natsauth_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/airlock-gate/airlock/services/shared/lastevents"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent cannot make the events stream run a wildcard read. NATS
// permissions cannot tell a literal "*" or ">" token from a wildcard, and
// nats-server answers a Direct Get of airlock.evt.<agent>.*.<type> by
// walking the agent's whole subject index under the stream's lock, which
// every writer shares: with 100,000 calls of history each such get took
// 4 ms, and a flood of them slowed another writer's publish a hundredfold.
// So an agent reaches no JetStream API at all, not even the Direct Get of
// its own subjects; it asks airlock (airlock.agent.<agent>.events), which
// refuses anything but an id and event types, and another agent's calls.
// Real server, the shipped permissions, bot's own credential, and the
// approval service's user answering the reads.
func TestAnAgentCannotMakeTheEventsStreamRunAWildcardRead(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot", "victim")
	stream := n.Config.Stream.Name
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, adminJS := n.Connect(natsauth.RoleAdmin)
	for _, s := range []string{"airlock.evt.bot.c1.requested", "airlock.evt.bot.c2.requested", "airlock.evt.victim.v1.requested"} {
		if _, err := adminJS.Publish(ctx, s, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	approval, _ := n.Connect(natsauth.RoleApproval)
	testenv.ServeAgentReads(t, approval, stream)
	bot, _, err := agentConn(t, n, "bot")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no_direct_get_reaches_the_stream", func(t *testing.T) {
		for _, subj := range []string{"airlock.evt.bot.*.requested", "airlock.evt.bot.*.*", "airlock.evt.bot.>", "airlock.evt.bot.c1.requested"} {
			rctx, stop := context.WithTimeout(ctx, 2*time.Second)
			m, err := bot.RequestWithContext(rctx, subject.DirectGet(stream, subj), nil)
			stop()
			if err == nil {
				t.Fatalf("bot's Direct Get of %s was answered (%q, status %q): want no JetStream API within an agent's reach", subj, m.Data, m.Header.Get("Status"))
			}
		}
	})

	// ask sends bot's raw read request on subj and returns the reply.
	ask := func(t *testing.T, subj string, body []byte) (data []byte, code, why string, err error) {
		t.Helper()
		rctx, stop := context.WithTimeout(ctx, 3*time.Second)
		defer stop()
		m, err := bot.RequestWithContext(rctx, subj, body)
		if err != nil {
			return nil, "", "", err
		}
		return m.Data, m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader), nil
	}

	t.Run("the_read_refuses_what_is_not_an_id_or_a_type", func(t *testing.T) {
		for _, req := range []lastevents.Request{
			{CallID: "*", Types: []string{subject.Requested}},
			{CallID: ">", Types: []string{subject.Requested}},
			{CallID: "c1.requested", Types: []string{subject.Requested}},
			{CallID: "c1.*", Types: []string{subject.Requested}},
			{CallID: "", Types: []string{subject.Requested}},
			{CallID: "c1", Types: []string{"*"}},
			{CallID: "c1", Types: []string{">"}},
			{CallID: "c1", Types: []string{"exec.*"}},
			{CallID: "c1", Types: []string{subject.Requested, subject.Requested}},
			{CallID: "c1"},
		} {
			body, _ := json.Marshal(req)
			data, code, why, err := ask(t, subject.AgentEvents("bot"), body)
			if err != nil || code != "invalid_request" || why == "" || len(data) != 0 {
				t.Fatalf("bot's read %s answered %q, code %q (%q), %v; want it refused as invalid_request with a sentence", body, data, code, why, err)
			}
		}
		data, code, _, err := ask(t, subject.AgentEvents("bot"), []byte(strings.Repeat(" ", lastevents.MaxRequestBytes+1)))
		if err != nil || code != "invalid_request" || len(data) != 0 {
			t.Fatalf("bot's oversized read answered %q, code %q, %v; want it refused", data, code, err)
		}
	})

	t.Run("no_read_of_another_agents_calls", func(t *testing.T) {
		body, _ := json.Marshal(lastevents.Request{CallID: "v1", Types: []string{subject.Requested}})
		for _, subj := range []string{subject.AgentEvents("victim"), subject.AgentEvents("*"), "airlock.agent.>"} {
			if data, code, _, err := ask(t, subj, body); err == nil {
				t.Fatalf("bot's read on %s was answered (%q, code %q): want NATS to refuse it", subj, data, code)
			}
		}
	})

	t.Run("its_own_call_is_read", func(t *testing.T) {
		got, err := lastevents.Read(ctx, bot, "bot", "c1", []string{subject.Requested, subject.Completed})
		if err != nil || len(got) != 1 || string(got[0].Data) != "airlock.evt.bot.c1.requested" || got[0].Header.Get("Nats-Subject") != "airlock.evt.bot.c1.requested" {
			t.Fatalf("bot's read of its call c1: %v, %v; want its requested event alone", got, err)
		}
	})
}
