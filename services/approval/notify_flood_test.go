package approval_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// gatedChannel is a notification channel that lets announcements through
// in rounds the test opens: a channel as slow as the test wants, with what
// it posted in order.
type gatedChannel struct {
	name    string
	mu      sync.Mutex
	round   chan struct{}
	blocked int      // announcements waiting for the round to open
	posted  []string // "<agent>/<call>", in the order they went through
}

func newGatedChannel(name string) *gatedChannel {
	return &gatedChannel{name: name, round: make(chan struct{})}
}

func (g *gatedChannel) Name() string                         { return g.name }
func (g *gatedChannel) Wants(*airlockv1.ApprovalRecord) bool { return true }
func (g *gatedChannel) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	g.mu.Lock()
	round := g.round
	g.blocked++
	g.mu.Unlock()
	select {
	case <-round:
	case <-ctx.Done():
		return "", errors.New("channel unreachable")
	}
	call := rec.GetCall().GetAgentId() + "/" + rec.GetCall().GetCallId()
	g.mu.Lock()
	g.posted = append(g.posted, call)
	g.mu.Unlock()
	return g.name + "/" + call, nil
}
func (g *gatedChannel) Remind(context.Context, *airlockv1.ApprovalRecord, string) error { return nil }
func (g *gatedChannel) Update(context.Context, *airlockv1.ApprovalRecord, string) error { return nil }

// open lets the n announcements the channel is making at once through,
// once all n are waiting.
func (g *gatedChannel) open(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d announcements to wait on the channel", n), func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.blocked >= n
	})
	g.mu.Lock()
	close(g.round)
	g.round, g.blocked = make(chan struct{}), 0
	want := len(g.posted) + n
	g.mu.Unlock()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d announcements to go through", n), func() bool { return g.count() >= want })
}

func (g *gatedChannel) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.posted)
}

func (g *gatedChannel) hasPosted(call string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.posted, call)
}

// R-attack5 F4: agent bot floods calls while a channel answers slowly (a
// rate-limited Slack): every announcement of bot's waits on the channel,
// and agent victim's call is still recorded pending, for the console and
// the approvers, while none of them has gone through. (Announcements held
// the service's workers: victim's call was recorded only once enough of
// bot's had been posted or given up, 42 s with Slack at 1 post/s.)
func TestAFloodOnASlowChannelDoesNotDelayAnotherAgentsCallBeingRecorded(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Approval.Workers = 2
		c.Approval.NotifyTimeout = time.Minute
	})
	slow := newGatedChannel("slow")
	w.start(slow)
	for i := range 20 {
		w.ask(&airlockv1.ToolCall{AgentId: "bot", CallId: fmt.Sprintf("flood-%d", i)}, nil)
	}
	w.pending(&airlockv1.ToolCall{AgentId: "victim", CallId: "v1"}, nil)
	for i := range 20 {
		w.waitAgentState("bot", fmt.Sprintf("flood-%d", i), 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
	}
	if slow.count() > 0 {
		t.Fatal("the channel let an announcement through before the test opened it")
	}
}

// A channel's deliveries are made agent by agent in turn: the victim's
// announcement, queued behind twenty of bot's on a slow channel, goes
// through in the channel's first or second round, not after bot's twenty.
func TestASlowChannelAnnouncesAnotherAgentsCallBetweenAFloodsCalls(t *testing.T) {
	const workers = 2
	w := newWorld(t, func(c *config.Config) {
		c.Approval.Workers = workers
		c.Approval.NotifyTimeout = time.Minute
	})
	slow := newGatedChannel("slow")
	w.start(slow)
	for i := range 20 {
		w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: fmt.Sprintf("flood-%d", i)}, nil)
	}
	w.pending(&airlockv1.ToolCall{AgentId: "victim", CallId: "v1"}, nil)
	for round := 1; !slow.hasPosted("victim/v1"); round++ {
		if round > 2 {
			slow.mu.Lock()
			posted := slices.Clone(slow.posted)
			slow.mu.Unlock()
			t.Fatalf("victim's call was not announced in the channel's first two rounds: %v went first", posted)
		}
		slow.open(t, workers)
	}
	testenv.Eventually(t, 10*time.Second, "victim's reference to be stored", func() bool {
		rec, err := w.api.Get(context.Background(), "victim", "v1", 0)
		return err == nil && len(rec.GetNotifications()) == 1
	})
}

// digestChannel is a recorder that also takes digests.
type digestChannel struct {
	recorder
	dmu     sync.Mutex
	digests []notify.Digest
}

func (d *digestChannel) Digest(_ context.Context, dg notify.Digest) error {
	d.dmu.Lock()
	defer d.dmu.Unlock()
	d.digests = append(d.digests, dg)
	return nil
}

// digested is how many calls of agent the digests told of, in how many digests.
func (d *digestChannel) digested(agent string) (calls, digests int) {
	d.dmu.Lock()
	defer d.dmu.Unlock()
	for _, dg := range d.digests {
		if dg.Agent == agent {
			calls += dg.Calls
			digests++
		}
	}
	return calls, digests
}

// count is how many of the channel's entries are kind ("announce",
// "update") of a call whose id starts with prefix.
func (r *recorder) count(kind, prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		if strings.HasPrefix(s, kind+":"+prefix) {
			n++
		}
	}
	return n
}

// R-attack5 F3: an agent's flood of calls reaches each channel as
// approval.notify_burst messages and then digests, not one message per
// call (and no outcome for the calls that were not announced), while
// another agent's call is announced on its own; the flood's calls all
// wait in the console.
func TestAFloodOfOneAgentsCallsIsCoalescedOnEachChannel(t *testing.T) {
	const burst, flood = 3, 20
	w := newWorld(t, func(c *config.Config) {
		c.Approval.NotifyBurst = burst
		c.Approval.NotifyRefill = time.Hour // no refill while the test runs
	})
	ch := &digestChannel{recorder: recorder{name: "mail"}}
	w.start(ch)
	for i := range flood {
		w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: fmt.Sprintf("flood-%d", i)}, nil)
	}
	w.pending(&airlockv1.ToolCall{AgentId: "victim", CallId: "v1"}, nil)
	testenv.Eventually(t, 10*time.Second, "victim's call to be announced", func() bool { return ch.has("announce:v1") })
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 10*time.Second)
	if got := ch.count("announce", "flood-"); got != burst {
		t.Fatalf("the channel announced %d of bot's %d calls one by one, want notify_burst (%d)", got, flood, burst)
	}
	for i := range flood {
		if _, err := w.api.Cancel(context.Background(), &airlockv1.CancelRequest{AgentId: "bot", CallId: fmt.Sprintf("flood-%d", i),
			By: human("alice")}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the announced calls to show their outcome", func() bool {
		return ch.has("update:flood-0:APPROVAL_STATE_CANCELED")
	})
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 10*time.Second)
	if got := ch.count("update", "flood-"); got > burst {
		t.Fatalf("the channel was sent %d outcomes of bot's calls, want at most the %d it announced", got, burst)
	}
}

// The calls a channel did not announce are told in a digest, each call
// either announced or counted in one.
func TestCoalescedCallsAreToldInADigest(t *testing.T) {
	const burst, flood = 2, 12
	w := newWorld(t, func(c *config.Config) {
		c.Approval.NotifyBurst = burst
		c.Approval.NotifyRefill = 300 * time.Millisecond
	})
	ch := &digestChannel{recorder: recorder{name: "mail"}}
	w.start(ch)
	for i := range flood {
		w.ask(&airlockv1.ToolCall{AgentId: "bot", CallId: fmt.Sprintf("flood-%d", i)}, nil)
	}
	testenv.Eventually(t, 20*time.Second, "every call to be announced or told in a digest", func() bool {
		calls, _ := ch.digested("bot")
		return ch.count("announce", "flood-")+calls == flood
	})
	calls, digests := ch.digested("bot")
	if calls == 0 || digests == 0 {
		t.Fatalf("no digest told of bot's coalesced calls")
	}
	if text := (notify.Digest{Agent: "bot", Calls: calls}).Text(); !strings.Contains(text, fmt.Sprintf("agent bot has %d more", calls)) || !strings.Contains(text, "console") {
		t.Fatalf("digest text %q", text)
	}
}

// Found in review (SPEC §6, a hostile agent): a pending call's
// approval_requested stayed unacknowledged until every channel had answered
// its announcement, and unacknowledged messages count against the
// consumer's MaxAckPending. With one channel hanging (a webhook that answers
// only at approval.notify_timeout) and enough agents each announcing its
// approval.notify_burst, the held messages reached MaxAckPending and the
// server delivered nothing more: another agent's call was neither recorded
// pending nor shown anywhere until the hanging channel timed out. However
// many announcements hang, a new call is recorded, announced on the
// channels that answer, and decided.
func TestAnnouncementsHangingOnAChannelDoNotStopAnotherAgentsCall(t *testing.T) {
	const burst = 10
	w := newWorld(t, func(c *config.Config) {
		c.Approval.NotifyBurst = burst
		c.Approval.NotifyRefill = time.Hour  // every call of the flood is announced one by one
		c.Approval.NotifyTimeout = time.Hour // the hanging channel holds each announcement for the whole test
	})
	hung := &recorder{name: "webhook-hung", block: true}
	mail := &recorder{name: "mail"}
	w.start(hung, mail)
	cons, err := w.js.Consumer(context.Background(), w.cfg.Stream.Name, approval.Durable)
	if err != nil {
		t.Fatal(err)
	}
	// More announcements than the consumer may leave unacknowledged.
	agents := cons.CachedInfo().Config.MaxAckPending/burst + 10
	for a := range agents {
		for i := range burst {
			w.ask(&airlockv1.ToolCall{AgentId: fmt.Sprintf("agent-%d", a), CallId: fmt.Sprintf("flood-%d", i)}, nil)
		}
	}
	w.ask(&airlockv1.ToolCall{AgentId: "victim", CallId: "v1"}, nil)

	testenv.Eventually(t, time.Minute, "victim's call to be announced on the channel that answers", func() bool { return mail.has("announce:v1") })
	w.waitAgentState("victim", "v1", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
	testenv.Eventually(t, time.Minute, "every call of the flood to be recorded and announced on the channel that answers", func() bool {
		return mail.count("announce", "flood-") == agents*burst
	})
	if _, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "victim", CallId: "v1", Kind: approve,
		Principal: human("alice")}); err != nil {
		t.Fatal(err)
	}
	w.waitAgentState("victim", "v1", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
	if hung.count("gave-up", "") > 0 {
		t.Fatal("the hanging channel gave up on an announcement while the test ran: it did not hang")
	}
}

// A replica stopped while a channel still held a call's announcement
// leaves the record naming it the announcer, and the next replica, finding
// it gone, announces the call.
func TestACallWhoseAnnouncementAReplicaStoppedInIsAnnouncedByTheNext(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.NotifyTimeout = time.Hour })
	slow := newGatedChannel("chat")
	w.start(slow)
	w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "r1"}, nil)
	testenv.Eventually(t, 10*time.Second, "the announcement to wait on the channel", func() bool {
		slow.mu.Lock()
		defer slow.mu.Unlock()
		return slow.blocked == 1
	})
	w.stopAll()

	next := &recorder{name: "chat"}
	w.start(next)
	testenv.Eventually(t, time.Minute, "the next replica to announce the call", func() bool { return next.has("announce:r1") })
	testenv.Eventually(t, 10*time.Second, "the call's reference to be stored", func() bool {
		rec, err := w.api.Get(context.Background(), "bot", "r1", 0)
		return err == nil && len(rec.GetNotifications()) == 1
	})
}

// A replica still on the bus keeps its announcements: while a channel
// holds one, another replica's sweeps do not announce the call again.
func TestAnAnnouncementUnderWayIsNotTakenOverWhileItsReplicaRuns(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.NotifyTimeout = time.Hour })
	slow := newGatedChannel("chat")
	w.start(slow)
	w.start(slow)
	rec := w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "u1"}, nil)
	if rec.GetAnnouncer() == "" {
		t.Fatal("the pending record names no replica announcing it")
	}
	// Both replicas sweep meanwhile: a call expiring shows that sweeps ran.
	w.ask(&airlockv1.ToolCall{AgentId: "other", CallId: "e1"}, &airlockv1.Decision{Timeout: seconds(1)})
	w.waitAgentState("other", "e1", 1, airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED)
	slow.mu.Lock()
	blocked := slow.blocked
	slow.mu.Unlock()
	if blocked != 2 {
		t.Fatalf("the channel holds %d announcements, want one of each call: a running replica's announcement was made again", blocked)
	}
	if now := w.waitAgentState("bot", "u1", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); now.GetAnnouncer() != rec.GetAnnouncer() {
		t.Fatalf("the call's announcer changed from %s to %s while it ran", rec.GetAnnouncer(), now.GetAnnouncer())
	}
}
