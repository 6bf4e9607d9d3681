package violation

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// The format and arguments are what nats-server v2.15.2 passes its logger
// (client.go: c.format prefixes the client's description to the format).
func TestParseReadsTheServersViolationLines(t *testing.T) {
	const bot = `"AGENT_bot/nkey:UBOT"`
	cases := []struct {
		name   string
		format string
		args   []any
		want   Violation
		ok     bool
	}{
		{"a_refused_publish", `127.0.0.1:5000 - cid:7 - "v1.55.0:go:agent" - ` + bot + ` - Publish Violation - Subject %q`,
			[]any{[]byte("airlock.req.victim.c1")},
			Violation{Kind: Publish, Subject: "airlock.req.victim.c1", Source: "127.0.0.1:5000", CID: 7, ClientName: "v1.55.0:go:agent", Label: "AGENT_bot/nkey:UBOT"}, true},
		{"a_refused_reply_subject", `127.0.0.1:5000 - cid:7 - ` + bot + ` - Publish Violation - Reply %q`, []any{[]byte("$JS.ACK.S.c.1")},
			Violation{Kind: Reply, Subject: "$JS.ACK.S.c.1", Source: "127.0.0.1:5000", CID: 7, Label: "AGENT_bot/nkey:UBOT"}, true},
		{"a_refused_subscription", `[::1]:5000 - cid:8 - "n" - ` + bot + ` - Subscription Violation - Subject "airlock.out.victim.>", SID 3`, nil,
			Violation{Kind: Subscribe, Subject: "airlock.out.victim.>", Source: "[::1]:5000", CID: 8, ClientName: "n", Label: "AGENT_bot/nkey:UBOT"}, true},
		{"a_refused_queue_subscription", `h:1 - cid:9 - ` + bot + ` - Subscription Violation - Subject "a.b", Queue: "q", SID 3`, nil,
			Violation{Kind: Subscribe, Subject: "a.b", Source: "h:1", CID: 9, Label: "AGENT_bot/nkey:UBOT"}, true},
		{"a_name_that_imitates_another_users_label_stays_the_name",
			`h:1 - cid:9 - "v1:go:x\" - \"AGENT_victim/nkey:UVICTIM" - ` + bot + ` - Publish Violation - Subject %q`, []any{[]byte("s")},
			Violation{Kind: Publish, Subject: "s", Source: "h:1", CID: 9, ClientName: `v1:go:x" - "AGENT_victim/nkey:UVICTIM`, Label: "AGENT_bot/nkey:UBOT"}, true},
		{"a_name_with_format_verbs_changes_nothing",
			`h:1 - cid:9 - "%q%s" - ` + bot + ` - Publish Violation - Subject %q`, []any{[]byte("s")},
			Violation{Kind: Publish, Subject: "s", Source: "h:1", CID: 9, ClientName: "%q%s", Label: "AGENT_bot/nkey:UBOT"}, true},
		{"a_failed_sign_in_is_no_violation", `h:1 - cid:9 - authentication error - Nkey "UX"`, nil, Violation{}, false},
		{"a_routes_line_is_no_violation", `h:1 - rid:2 - Publish Violation - Subject %q`, []any{[]byte("s")}, Violation{}, false},
		{"a_publish_line_without_its_subject_is_no_violation", `h:1 - cid:9 - ` + bot + ` - Publish Violation - Subject %q`, nil, Violation{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Parse(c.format, c.args)
			if ok != c.ok || got != c.want {
				t.Fatalf("Parse = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// fixture drives a recorder's state by hand, on a clock it sets.
type fixture struct {
	r      *Recorder
	st     *state
	now    time.Time
	events []*airlockv1.Event
}

func newFixture(t *testing.T, limits Limits) *fixture {
	f := &fixture{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	users := func() ([]natsauth.User, error) {
		return []natsauth.User{{Agent: "bot", NKey: "UBOT"}, {Agent: "victim", NKey: "UVICTIM"}, {Role: "gateway", NKey: "UGW"}}, nil
	}
	whois := func(cid uint64) (Identity, bool) {
		switch cid {
		case 1:
			return Identity{Account: natsauth.AgentAccount("bot"), User: "UBOT"}, true
		case 2:
			return Identity{Account: natsauth.AccountAirlock, User: "UGW"}, true
		}
		return Identity{}, false
	}
	f.r = NewRecorder(limits, whois, users, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.r.now = func() time.Time { return f.now }
	f.st = f.r.newState(func(_ context.Context, ev *airlockv1.Event) error {
		// As the events stream would: an event that does not encode is not stored.
		if _, err := proto.Marshal(ev); err != nil {
			return err
		}
		f.events = append(f.events, ev)
		return nil
	})
	return f
}

func (f *fixture) violate(cid uint64, kind, subj string, n int) {
	for range n {
		f.st.add(context.Background(), Violation{Kind: kind, Subject: subj, CID: cid, Label: "AGENT_victim/nkey:UVICTIM", ClientName: "victim"})
	}
}

// advance moves the clock by d, one tick a second.
func (f *fixture) advance(d time.Duration) {
	for end := f.now.Add(d); f.now.Before(end); {
		f.now = f.now.Add(time.Second)
		f.st.tick(context.Background())
	}
}

// total is every attempt the events stand for.
func (f *fixture) total() (n uint64) {
	for _, ev := range f.events {
		b := ev.GetUnauthorizedAttempt().GetBus()
		n += b.GetCount() + b.GetUnrecorded() + b.GetDropped()
	}
	return n
}

func TestTheRecorderStaysWithinItsBounds(t *testing.T) {
	limits := Limits{Window: 10 * time.Second, PerMinute: 30, Subjects: 256, Identities: 4, Queue: 8}

	t.Run("a_subject_is_recorded_at_once_and_its_repeats_once_a_window", func(t *testing.T) {
		f := newFixture(t, limits)
		f.violate(1, Publish, "airlock.req.victim.c1", 1000)
		if len(f.events) != 1 || f.events[0].GetUnauthorizedAttempt().GetBus().GetCount() != 1 {
			t.Fatalf("after 1000 repeats at once: %v", f.events)
		}
		f.advance(10 * time.Second)
		if len(f.events) != 2 || f.events[1].GetUnauthorizedAttempt().GetBus().GetCount() != 999 {
			t.Fatalf("after the window: %v", f.events)
		}
		f.advance(time.Minute) // nothing more happened: nothing more is recorded
		if len(f.events) != 2 || len(f.st.identities) != 0 {
			t.Fatalf("after a quiet minute: %d events, %d identities followed", len(f.events), len(f.st.identities))
		}
	})

	t.Run("an_identity_over_its_budget_is_counted_in_its_next_event", func(t *testing.T) {
		f := newFixture(t, limits)
		for i := range 100 {
			f.violate(1, Publish, "airlock.req.victim.f"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1)
		}
		if len(f.events) != 30 {
			t.Fatalf("100 subjects at once gave %d events; want the budget of 30", len(f.events))
		}
		f.advance(2 * time.Second)
		last := f.events[len(f.events)-1].GetUnauthorizedAttempt().GetBus()
		if len(f.events) != 31 || last.GetUnrecorded() != 69 || f.total() != 100 {
			t.Fatalf("after one refill: %d events, the last %v, total %d", len(f.events), last, f.total())
		}
		// Another identity has its own budget.
		f.violate(2, Subscribe, "airlock.out.>", 1)
		if a := f.events[len(f.events)-1].GetActor(); a.GetId() != "gateway" || a.GetType() != airlockv1.ActorType_ACTOR_TYPE_SERVICE {
			t.Fatalf("the gateway's violation names %v", a)
		}
	})

	t.Run("a_full_queue_drops_and_the_next_event_counts_the_drops", func(t *testing.T) {
		f := newFixture(t, limits)
		for range 20 {
			f.r.Offer(Violation{Kind: Publish, Subject: "x", CID: 1})
		}
		for len(f.r.queue) > 0 {
			f.st.add(context.Background(), <-f.r.queue)
		}
		if b := f.events[0].GetUnauthorizedAttempt().GetBus(); b.GetDropped() != 12 || f.total() != 13 {
			t.Fatalf("the first event after 12 drops: %v (total %d)", b, f.total())
		}
		f.advance(10 * time.Second)
		if f.total() != 20 {
			t.Fatalf("20 offered, %d counted", f.total())
		}
	})

	t.Run("drops_are_reported_even_when_no_one_else_causes_an_event", func(t *testing.T) {
		f := newFixture(t, limits)
		f.r.dropped.Add(5)
		f.advance(time.Second)
		if len(f.events) != 1 || f.total() != 5 || f.events[0].GetActor().GetId() != "unknown" {
			t.Fatalf("events %v", f.events)
		}
	})

	t.Run("the_actor_is_the_credential_the_server_knows_not_the_label_or_name", func(t *testing.T) {
		f := newFixture(t, limits)
		f.violate(1, Publish, "airlock.req.victim.c1", 1)
		ev := f.events[0]
		if a, b := ev.GetActor(), ev.GetUnauthorizedAttempt().GetBus(); a.GetId() != "bot" || a.GetType() != airlockv1.ActorType_ACTOR_TYPE_AGENT ||
			b.GetUser() != "UBOT" || b.GetClientName() != "victim" {
			t.Fatalf("actor %v, violation %v", a, b)
		}
	})

	t.Run("a_flood_of_made_up_subjects_does_not_hide_an_attempt_on_the_stream", func(t *testing.T) {
		f := newFixture(t, limits)
		for i := range 40 {
			f.violate(1, Publish, "junk."+strconv.Itoa(i), 1)
		}
		purge := "$JS.API.STREAM.PURGE.AIRLOCK_EVENTS"
		f.violate(1, Publish, purge, 1)
		recorded := false
		for _, ev := range f.events {
			recorded = recorded || ev.GetUnauthorizedAttempt().GetBus().GetSubject() == purge
		}
		if !recorded || len(f.events) != 31 {
			t.Fatalf("%d events after 40 made-up subjects and a purge, the purge recorded: %v; want the budget's 30 and the purge's own", len(f.events), recorded)
		}
	})

	t.Run("a_subject_or_name_that_is_not_utf8_is_recorded_escaped", func(t *testing.T) {
		f := newFixture(t, limits)
		f.st.add(context.Background(), Violation{Kind: Publish, Subject: "$JS.API.STREAM.PURGE.AIRLOCK_EVENTS.\xff", CID: 1, ClientName: "n\xfe"})
		if len(f.events) != 1 {
			t.Fatalf("%d events recorded; want the attempt recorded", len(f.events))
		}
		b := f.events[0].GetUnauthorizedAttempt().GetBus()
		if b.GetSubject() != `"$JS.API.STREAM.PURGE.AIRLOCK_EVENTS.\xff"` || b.GetClientName() != `"n\xfe"` || f.events[0].GetActor().GetId() != "bot" {
			t.Fatalf("recorded %v by %v", b, f.events[0].GetActor())
		}
	})

	t.Run("an_agent_added_while_running_is_named_at_its_first_violation", func(t *testing.T) {
		f := newFixture(t, limits)
		f.violate(1, Publish, "x", 1) // the credentials are read
		known := f.r.users
		f.r.users = func() ([]natsauth.User, error) {
			users, err := known()
			return append(users, natsauth.User{Agent: "newcomer", NKey: "UNEW"}), err
		}
		f.st.add(context.Background(), Violation{Kind: Publish, Subject: "x", CID: 7, Label: "AGENT_newcomer/nkey:UNEW"})
		if a := f.events[len(f.events)-1].GetActor(); a.GetId() != "newcomer" {
			t.Fatalf("the new agent's violation names %v", a)
		}
	})

	t.Run("identities_beyond_the_limit_are_counted_not_followed", func(t *testing.T) {
		f := newFixture(t, limits)
		for cid := range uint64(10) {
			f.st.add(context.Background(), Violation{Kind: Publish, Subject: "x", CID: 100 + cid, Label: "AGENT_bot/nkey:UK" + string(rune('A'+cid))})
		}
		if len(f.st.identities) != 4 || len(f.events) != 4 || f.r.dropped.Load() != 6 {
			t.Fatalf("%d identities followed, %d events, %d dropped", len(f.st.identities), len(f.events), f.r.dropped.Load())
		}
	})
}

// On a real embedded server with airlock dev's accounts, the lines the
// server logs become events naming the agent whose credential connected,
// whatever the connection calls itself: the format Parse reads is the one
// this nats-server writes.
func TestAnEmbeddedServersViolationsBecomeEventsNamingTheCredential(t *testing.T) {
	dir := t.TempDir()
	creds := natsauth.Dev{DataDir: dir}
	if err := creds.Ensure(config.Default(), "nats://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var ns *embedded.Server
	rec := NewRecorder(DefaultLimits, func(cid uint64) (Identity, bool) {
		acc, user, ok := ns.Who(cid)
		return Identity{Account: acc, User: user}, ok
	}, creds.Users, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var err error
	ns, err = embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(dir, "js"), ConfigFile: creds.ConfigFile(), Logger: NewLogger(ctx, rec, slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Stop)
	pub, kp := testenv.AgentKey(t, creds.CredentialFile(natsauth.FirstAgent))
	nc, err := nats.Connect(ns.URL(), nats.Nkey(pub, kp.Sign), nats.Name(`someone" - "AIRLOCK/nkey:UADMIN`),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	_ = nc.Publish("airlock.api.approval.decide", nil)
	_, _ = nc.SubscribeSync("airlock.out.victim.>")
	_ = nc.PublishRequest("airlock.req.bot.c1", "$JS.ACK.AIRLOCK_EVENTS.policy.1.1.1.1.1", nil)
	// The recorder runs only once the connection is gone: the server still
	// says who it was.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	testenv.Eventually(t, 10*time.Second, "the server to close the connection", func() bool { return ns.NumClients() == 0 })
	events := make(chan *airlockv1.Event, 16)
	go rec.Run(ctx, func(_ context.Context, ev *airlockv1.Event) error { events <- ev; return nil })
	want := map[string]string{Publish: "airlock.api.approval.decide", Subscribe: "airlock.out.victim.>", Reply: "$JS.ACK.AIRLOCK_EVENTS.policy.1.1.1.1.1"}
	for range want {
		select {
		case ev := <-events:
			u := ev.GetUnauthorizedAttempt()
			if want[u.GetAction()] != u.GetBus().GetSubject() || ev.GetActor().GetId() != natsauth.FirstAgent ||
				u.GetBus().GetUser() != pub || !strings.Contains(u.GetBus().GetClientName(), "someone") {
				t.Fatalf("event %v", ev)
			}
			delete(want, u.GetAction())
		case <-time.After(10 * time.Second):
			t.Fatalf("no event for %v", want)
		}
	}
}

// blockingHandler is a slog handler stuck on its writer until release is
// closed, then counting what it was handed.
type blockingHandler struct {
	release chan struct{}
	records chan slog.Record
}

func (h blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h blockingHandler) Handle(_ context.Context, r slog.Record) error {
	<-h.release
	h.records <- r
	return nil
}
func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h blockingHandler) WithGroup(string) slog.Handler      { return h }

// The server's logger never waits: not on a log that does not take lines,
// not on a recorder that is not running; what it could not hand on is
// counted and said with the next line.
func TestTheServersLoggerNeverWaits(t *testing.T) {
	h := blockingHandler{release: make(chan struct{}), records: make(chan slog.Record, 1000)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := NewRecorder(Limits{Window: time.Second, PerMinute: 1, Subjects: 1, Identities: 1, Queue: 4}, nil, nil, slog.New(h))
	l := NewLogger(ctx, rec, slog.New(h))
	done := make(chan struct{})
	go func() {
		for i := range 1000 {
			l.Warnf("line %d", i)
			l.Errorf(`h:1 - cid:9 - "AGENT_bot/nkey:UBOT" - Publish Violation - Subject %q`, []byte("airlock.req.victim.c1"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's logger waited on a log that takes no lines")
	}
	if n := len(rec.queue); n != 4 || rec.dropped.Load() != 996 {
		t.Fatalf("%d violations queued and %d dropped; want 4 and 996", n, rec.dropped.Load())
	}
	close(h.release)
	testenv.Eventually(t, 10*time.Second, "the queued lines to be logged", func() bool { return len(l.lines) == 0 })
	l.now = func() time.Time { return time.Now().Add(time.Hour) } // a new second
	l.Warnf("after")
	testenv.Eventually(t, 10*time.Second, "the line after the suppressed ones", func() bool {
		for {
			select {
			case r := <-h.records:
				if r.Message != "after" {
					continue
				}
				found := false
				r.Attrs(func(a slog.Attr) bool {
					found = found || (a.Key == "lines_suppressed_before" && a.Value.Int64() > 0)
					return true
				})
				return found
			default:
				return false
			}
		}
	})
}
