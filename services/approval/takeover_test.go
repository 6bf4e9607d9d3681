package approval_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus/testutil"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// R-held F1: the first delivery of revision 2's approval_requested stores
// its record, naming this replica its announcer, and then fails (revision
// 1's record does not decode for a moment, so superseding it fails). The
// message, delivered again, finds the record naming a replica that runs:
// it was acknowledged, never announced, and revision 1 stayed pending.
func TestACallStoredByAnAttemptThatFailedIsAnnouncedAndSupersedesTheEarlierRevision(t *testing.T) {
	w := newWorld(t)
	chat := &recorder{name: "chat"}
	w.start(chat)
	w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1}, nil)
	ctx := context.Background()
	// Its announcement over (the reference stored, the name cleared), no
	// write of it meets the fault below.
	testenv.Eventually(t, 10*time.Second, "revision 1's announcement to end", func() bool {
		rec, err := w.api.Get(ctx, "bot", "c1", 1)
		return err == nil && rec.GetAnnouncer() == "" && len(rec.GetNotifications()) == 1
	})

	kv, err := w.js.KeyValue(ctx, w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	k1 := callref.Ref{Agent: "bot", Call: "c1", Rev: 1}.Key()
	orig, err := kv.Get(ctx, k1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, k1, []byte{0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for rev := uint32(1); rev <= 2; rev++ {
				rec, err := w.api.Get(ctx, "bot", "c1", rev)
				t.Logf("revision %d: %v, announcer %q, %d references (%v)", rev, rec.GetState(), rec.GetAnnouncer(), len(rec.GetNotifications()), err)
			}
			chat.mu.Lock()
			t.Logf("the channel saw %v", chat.seen)
			chat.mu.Unlock()
		}
	}()
	retries := w.replica.Metrics.Handled.WithLabelValues("approval", "retry")
	before := testutil.ToFloat64(retries)
	w.ask(&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 2}, nil)
	testenv.Eventually(t, 10*time.Second, "the first attempt at revision 2 to fail", func() bool { return testutil.ToFloat64(retries) > before })
	if _, err := kv.Get(ctx, callref.Ref{Agent: "bot", Call: "c1", Rev: 2}.Key()); err != nil {
		t.Fatalf("revision 2's failed attempt stored no record (%v): the failure is not the one under test", err)
	}
	if _, err := kv.Put(ctx, k1, orig.Value()); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, 10*time.Second, "revision 2 to be announced", func() bool { return len(chat.seenOf("announce:c1")) == 2 })
	testenv.Eventually(t, 10*time.Second, "revision 1 to be superseded", func() bool {
		rec, err := w.api.Get(ctx, "bot", "c1", 1)
		return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_CANCELED
	})
	testenv.Eventually(t, 10*time.Second, "revision 2's announcement to end", func() bool {
		rec, err := w.api.Get(ctx, "bot", "c1", 2)
		return err == nil && rec.GetAnnouncer() == "" && len(rec.GetNotifications()) == 1
	})
	if n := len(chat.seenOf("announce:c1")); n != 2 {
		t.Fatalf("the channel announced call c1 %d times, want once per revision", n)
	}
}

// cutProxy forwards TCP connections to a NATS server; cut drops every
// connection and refuses new ones until mend: a network blip, or the
// server restarting, as a client sees it.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
	return p
}

func (p *cutProxy) forward(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		_ = c.Close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.conns = append(p.conns, c, s)
	go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
	go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) mend() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// pingsAnswered reports whether the approval replica id answers a ping on
// the bus (false: "no responders").
func pingsAnswered(t *testing.T, nc *nats.Conn, id string) bool {
	t.Helper()
	subj, err := micro.ControlSubject(micro.PingVerb, approvalapi.Service, id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = nc.RequestWithContext(ctx, subj, nil)
	if err != nil && !errors.Is(err, nats.ErrNoResponders) {
		t.Logf("ping of replica %s: %v", id, err)
	}
	return err == nil
}

// R-held F3: a replica alive but cut off from NATS for 2 s (a network
// blip, a NATS server restarting in a rolling upgrade) answered no ping
// meanwhile, and another replica's next sweep took it for gone and
// announced its call again while its own announcement was under way.
func TestAReplicaCutOffFromNATSForAMomentKeepsItsAnnouncement(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Approval.NotifyTimeout = time.Hour
		c.Approval.TakeoverAfter = time.Minute
	})
	direct := w.cfg.NATS.URL
	p := newCutProxy(t, strings.TrimPrefix(direct, "nats://"))
	w.cfg.NATS.URL = p.url()
	slow := newGatedChannel("chat")
	w.start(slow) // replica A, through the proxy
	w.cfg.NATS.URL = direct
	rec := w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "p1"}, nil)
	a := rec.GetAnnouncer()
	if a == "" {
		t.Fatal("the pending record names no replica announcing it")
	}
	testenv.Eventually(t, 10*time.Second, "A's announcement to wait on the channel", func() bool {
		slow.mu.Lock()
		defer slow.mu.Unlock()
		return slow.blocked == 1
	})
	other := &recorder{name: "chat"}
	w.start(other) // replica B, direct

	p.cut()
	testenv.Eventually(t, 10*time.Second, "A to be off the bus", func() bool { return !pingsAnswered(t, w.deps.NC, a) })
	// The blip lasts 2 s, 40 of B's sweeps (approval.sweep_interval 50ms
	// here): each took A for gone before.
	time.Sleep(2 * time.Second)
	p.mend()
	testenv.Eventually(t, 10*time.Second, "A to be on the bus again", func() bool { return pingsAnswered(t, w.deps.NC, a) })

	if other.has("announce:p1") {
		t.Fatal("replica B announced p1 again while A, alive and back on the bus, still announces it")
	}
	if now := w.waitAgentState("bot", "p1", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); now.GetAnnouncer() != a {
		t.Fatalf("the call's announcer changed from %s to %s while A was cut off", a, now.GetAnnouncer())
	}
	// A finishes its announcement: the call is announced once.
	slow.open(t, 1)
	testenv.Eventually(t, 10*time.Second, "A's announcement to end", func() bool {
		rec, err := w.api.Get(context.Background(), "bot", "p1", 0)
		return err == nil && rec.GetAnnouncer() == "" && len(rec.GetNotifications()) == 1
	})
	if other.has("announce:p1") {
		t.Fatal("replica B announced p1 too")
	}
}

// escalationChannel is a gated channel routed only on escalation
// ("escalate:pagerduty").
type escalationChannel struct{ *gatedChannel }

func (e escalationChannel) Wants(rec *airlockv1.ApprovalRecord) bool { return rec.GetEscalated() }

// R-held F2: announcements other than a new call's named no announcer, so
// a replica stopped before every channel answered lost them: the next
// replica never told the channels.
func TestAnAnnouncementAReplicaStoppedInIsMadeByTheNext(t *testing.T) {
	tests := []struct {
		name string
		// ask makes the call whose announcement the first replica stops in.
		ask func(w *world)
		// waiting is the first replica's channel the announcement waits
		// on; next is the same channel of the next replica.
		waiting func() notify.Notifier
		next    func() (notify.Notifier, *recorder)
	}{
		{
			name: "a queued call released on its arrival",
			ask: func(w *world) {
				w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "x1", ThreadId: "s"}, &airlockv1.Decision{QueuePerThread: true})
			},
			waiting: func() notify.Notifier { return newGatedChannel("chat") },
			next:    func() (notify.Notifier, *recorder) { r := &recorder{name: "chat"}; return r, r },
		},
		{
			name: "an escalated call on its escalation channel",
			ask: func(w *world) {
				w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "x1"}, &airlockv1.Decision{
					Timeout: seconds(60), EscalateAfter: seconds(1), EscalateTo: []string{"group:oncall"}})
			},
			waiting: func() notify.Notifier { return escalationChannel{newGatedChannel("pager")} },
			next: func() (notify.Notifier, *recorder) {
				r := &recorder{name: "pager", wants: func(rec *airlockv1.ApprovalRecord) bool { return rec.GetEscalated() }}
				return r, r
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, func(c *config.Config) { c.Approval.NotifyTimeout = time.Hour })
			waiting := tt.waiting()
			first := &recorder{name: "first"}
			w.start(first, waiting)
			tt.ask(w)
			testenv.Eventually(t, 10*time.Second, "the announcement to wait on the channel", func() bool { return blockedOn(waiting) == 1 })
			w.stopAll()

			ch, told := tt.next()
			w.start(&recorder{name: "first"}, ch)
			testenv.Eventually(t, 15*time.Second, "the next replica to announce the call", func() bool { return told.has("announce:x1") })
		})
	}
}

// blockedOn is how many announcements wait on a gated channel.
func blockedOn(n notify.Notifier) int {
	g, ok := n.(*gatedChannel)
	if e, isEsc := n.(escalationChannel); isEsc {
		g, ok = e.gatedChannel, true
	}
	if !ok {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}
