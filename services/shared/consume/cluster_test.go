package consume

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// When the consumer's leader moves to another node, the new leader gets the
// runner's next pull within a few seconds: pull requests waiting on the old
// leader are noticed gone by their missing heartbeats, not only when they
// expire.
func TestConsumerFollowsItsLeaderToAnotherNode(t *testing.T) {
	c := testenv.StartCluster(t, 3)
	cfg, js, nc := c.Config, c.JS, c.NC
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan string, 16)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, js, Spec{Service: "test", Stream: cfg.Stream.Name, Durable: "follow", FilterSubjects: []string{subject.OfType(subject.Requested)}},
			testenv.Logger(t), obs.NewMetrics(), func(_ context.Context, m jetstream.Msg) error {
				got <- m.Subject()
				return nil
			})
	}()
	t.Cleanup(func() { stop(); <-done })
	send := func(call string) {
		t.Helper()
		subj, _ := subject.Event("bot", call, subject.Requested)
		testenv.Eventually(t, 20*time.Second, "a publish to be stored", func() bool {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			defer pcancel()
			_, err := js.Publish(pctx, subj, []byte("x"))
			return err == nil
		})
	}
	send("before")
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the first message was not handled")
	}

	// The leader hands over (as after a node that was paused resumes):
	// the pull requests waiting on it are not answered by the new one.
	resp, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+cfg.Stream.Name+".follow", nil)
	if err != nil || strings.Contains(string(resp.Data), `"error"`) {
		t.Fatalf("consumer leader step-down: %v %s", err, resp.Data)
	}
	moved := time.Now()
	send("after")
	select {
	case <-got:
		// A new leader is in place at once; the runner must not wait out its pull's expiry.
		if took := time.Since(moved); took > 10*time.Second {
			t.Fatalf("the message after the leader moved was handled %s later", took)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the message after the consumer's leader moved was not handled within 25s")
	}
}

// A pull request asks the server for a heartbeat every second and expires
// after a few: a consumer leader that goes silent (its node hung or paused,
// its pending requests lost when it hands over) is left within two seconds,
// not after the library's 30 s expiry — the stall `airlock chaos` found after
// a paused node resumed.
func TestPullRequestsAskForHeartbeatsSoASilentLeaderIsLeftQuickly(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	pulls := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe("$JS.API.CONSUMER.MSG.NEXT."+deps.Config.Stream.Name+".pulls", pulls)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, deps.JS, Spec{Service: "test", Stream: deps.Config.Stream.Name, Durable: "pulls"}, deps.Log, deps.Metrics,
			func(context.Context, jetstream.Msg) error { return nil })
	}()
	defer func() { cancel(); <-done }()
	select {
	case m := <-pulls:
		var req struct {
			Expires   time.Duration `json:"expires"`
			Heartbeat time.Duration `json:"idle_heartbeat"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Fatalf("pull request %s: %v", m.Data, err)
		}
		if req.Heartbeat <= 0 || req.Heartbeat > time.Second || req.Expires > 5*time.Second {
			t.Fatalf("pull requests expire after %s with heartbeats every %s: a silent leader would hold the consumer that long", req.Expires, req.Heartbeat)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner sent no pull request within 10s")
	}
}

// A service started while its stream's cluster cannot answer (two of three
// nodes down: no quorum to place its consumer) keeps trying to create the
// consumer and handles messages once the nodes are back, instead of ending
// on the first unanswered request: an executor replica did end so while
// `airlock chaos` started it, and CI failed.
func TestAConsumerIsCreatedOnceTheClusterAnswers(t *testing.T) {
	c := testenv.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	down := []embedded.Options{c.Servers[1].Options(), c.Servers[2].Options()}
	c.Servers[1].Stop()
	c.Servers[2].Stop()

	retrying := &firstWarning{seen: make(chan struct{})}
	got := make(chan string, 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, c.JS, Spec{Service: "test", Stream: c.Config.Stream.Name, Durable: "late", FilterSubjects: []string{subject.OfType(subject.Requested)}},
			slog.New(retrying), obs.NewMetrics(), func(_ context.Context, m jetstream.Msg) error {
				got <- m.Subject()
				return nil
			})
	}()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-retrying.seen:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("the runner ended while the cluster could not answer, instead of trying again: %v", err)
	case <-ctx.Done():
		t.Fatal("the runner neither created its consumer nor said it was trying again")
	}
	for _, o := range down {
		s, err := embedded.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}
	subj, _ := subject.Event("bot", "late-1", subject.Requested)
	testenv.Eventually(t, time.Minute, "a publish to be stored once the cluster is back", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		_, err := c.JS.Publish(pctx, subj, []byte("x"))
		return err == nil
	})
	select {
	case s := <-got:
		if s != subj {
			t.Fatalf("handled %s, want %s", s, subj)
		}
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("the runner ended: %v", err)
	case <-ctx.Done():
		t.Fatal("the message published once the cluster was back was not handled")
	}
}

// firstWarning is a log handler that closes seen at the first warning.
type firstWarning struct {
	once sync.Once
	seen chan struct{}
}

func (h *firstWarning) Enabled(context.Context, slog.Level) bool { return true }
func (h *firstWarning) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *firstWarning) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *firstWarning) WithGroup(string) slog.Handler      { return h }
