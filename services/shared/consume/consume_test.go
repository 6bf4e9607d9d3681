package consume

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestShardHashesAgentAndCallLikeFNV(t *testing.T) {
	tests := []struct{ name, subj, key string }{
		{"an event subject is sharded on its agent and call", "airlock.evt.bot.call_1.requested", "bot.call_1"},
		{"two types of one call land on the same worker", "airlock.evt.bot.call_1.completed", "bot.call_1"},
		{"an execution event lands with the call's other events", "airlock.evt.bot.call_1.exec.completed", "bot.call_1"},
		{"a request lands with the call's events", "airlock.req.bot.call_1", "bot.call_1"},
		{"a subject with fewer tokens is sharded whole", "airlock.evt.bot", "airlock.evt.bot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fnv.New32a()
			_, _ = h.Write([]byte(tt.key))
			if got, want := shard(tt.subj, 7), int(h.Sum32()%7); got != want {
				t.Fatalf("shard(%q) = %d, want %d (FNV-1a of %q)", tt.subj, got, want, tt.key)
			}
		})
	}
}

// run starts Run on a fresh stream-backed consumer and returns the
// publisher's JetStream and a stop function that waits for Run to return.
func run(t *testing.T, spec Spec, h Handler) (jetstream.JetStream, func()) {
	t.Helper()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	spec.Service, spec.Stream = "test", deps.Config.Stream.Name
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, deps.JS, spec, deps.Log, deps.Metrics, h) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}
	t.Cleanup(stop)
	return deps.JS, stop
}

func publish(t *testing.T, js jetstream.JetStream, agent, call, typ string) {
	t.Helper()
	subj, err := subject.Event(agent, call, typ)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subj, []byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestHandlerLongerThanAckWaitIsKeptAliveAndNotRedelivered(t *testing.T) {
	var deliveries atomic.Int32
	finished := make(chan struct{})
	js, _ := run(t, Spec{Durable: "slow", FilterSubjects: []string{subject.OfType(subject.Requested)}, AckWait: time.Second},
		func(ctx context.Context, m jetstream.Msg) error {
			if deliveries.Add(1) == 1 {
				time.Sleep(2500 * time.Millisecond) // the work itself: 2.5 ack waits
				close(finished)
			}
			return nil
		})
	publish(t, js, "bot", "slow", subject.Requested)
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never finished")
	}
	// The server would have redelivered by now (AckWait passed twice during the work).
	cons, err := js.Consumer(context.Background(), testenv.Config("").Stream.Name, "slow")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || deliveries.Load() != 1 {
		t.Fatalf("the message was redelivered (%d redelivered, %d handled) while its handler ran; keep-alives should have prevented it",
			info.NumRedelivered, deliveries.Load())
	}
}

func TestBusyWorkerDoesNotHoldUpOtherCalls(t *testing.T) {
	const workers = 2
	// Pick a second call that lands on the other worker than "blocked".
	other := ""
	for i := 0; other == ""; i++ {
		c := fmt.Sprintf("other-%d", i)
		if shard("airlock.evt.bot."+c+".requested", workers) != shard("airlock.evt.bot.blocked.requested", workers) {
			other = c
		}
	}
	release := make(chan struct{})
	otherDone := make(chan struct{})
	var once sync.Once
	js, _ := run(t, Spec{Durable: "hol", FilterSubjects: []string{subject.OfAgent("bot")}, Workers: workers},
		func(ctx context.Context, m jetstream.Msg) error {
			switch p, _ := subject.Parse(m.Subject()); p.Call {
			case "blocked":
				select {
				case <-release:
				case <-ctx.Done():
				}
			case other:
				once.Do(func() { close(otherDone) })
			}
			return nil
		})
	defer close(release)
	// More messages for the blocked call than a small per-worker queue
	// holds, then one for a call on the idle worker.
	for i := 0; i < 150; i++ {
		publish(t, js, "bot", "blocked", subject.Requested)
	}
	publish(t, js, "bot", other, subject.Requested)
	select {
	case <-otherDone:
	case <-time.After(10 * time.Second):
		t.Fatal("a call on an idle worker waited behind another call's backlog")
	}
}

func TestLanesBoundTheWorkersOneSubjectUses(t *testing.T) {
	for _, tc := range []struct {
		name           string
		workers, lanes int
		want           int
	}{
		{"without lanes one subject stays on one worker", 32, 0, 1},
		{"lanes spread one subject over that many workers", 32, 8, 8},
		{"never over the workers there are", 4, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used := map[int]bool{}
			for seq := uint64(1); seq <= 1000; seq++ {
				w := worker("airlock.req.evil", seq, tc.workers, tc.lanes)
				if w < 0 || w >= tc.workers {
					t.Fatalf("worker %d of %d", w, tc.workers)
				}
				used[w] = true
			}
			if len(used) != tc.want {
				t.Fatalf("one subject used %d workers, want %d", len(used), tc.want)
			}
		})
	}
}

// blockFiles is how many message block files the stream's file store has
// written so far: the highest block index in its directory.
func blockFiles(t *testing.T, storeDir, stream string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for _, name := range names {
		if i, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(name), ".blk")); err == nil && i > most {
			most = i
		}
	}
	return most
}

func TestAHeldAckKeepsAWorkQueueFromEmptyingBetweenMessages(t *testing.T) {
	const messages = 10
	for _, tc := range []struct {
		name string
		hold time.Duration
		// held is how many handled messages the queue still holds once
		// the next is handled; moreBlocks, whether the store wrote a new
		// block file for (about) every message.
		held       uint64
		moreBlocks bool
	}{
		{"each ack sent at once empties the queue, and the store writes a new block file each time", 0, 0, true},
		{"a held ack keeps the last message until the next is handled, and the store keeps its block", time.Hour, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testenv.StartNATS(t)
			deps := testenv.Deps(t, testenv.Config(n.URL()))
			intake := deps.Config.Intake.Name
			handled := make(chan uint64, messages)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, deps.JS, Spec{Service: "test", Stream: intake, Durable: "held", FilterSubjects: []string{subject.AllRequests},
					Workers: 4, HoldLastAck: tc.hold}, deps.Log, deps.Metrics, func(_ context.Context, m jetstream.Msg) error {
					meta, err := m.Metadata()
					if err != nil {
						return err
					}
					handled <- meta.Sequence.Stream
					return nil
				})
			}()
			stream, err := deps.JS.Stream(ctx, intake)
			if err != nil {
				t.Fatal(err)
			}
			// settled waits until the queue holds exactly want messages,
			// the first of them from sequence first on.
			settled := func(want, first uint64) {
				t.Helper()
				testenv.Eventually(t, 10*time.Second, fmt.Sprintf("the queue to hold %d messages from %d on", want, first), func() bool {
					info, err := stream.Info(context.Background())
					return err == nil && info.State.Msgs == want && (want == 0 || info.State.FirstSeq >= first)
				})
			}
			blocks := blockFiles(t, n.Dir, intake)
			for i := range messages {
				subj, err := subject.Request("bot", fmt.Sprintf("c%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := deps.JS.Publish(ctx, subj, []byte("x")); err != nil {
					t.Fatal(err)
				}
				settled(tc.held, <-handled)
			}
			if got := blockFiles(t, n.Dir, intake) - blocks; (got >= messages-1) != tc.moreBlocks {
				t.Fatalf("%d messages handled one at a time made the store write %d new block files", messages, got)
			}
			cancel() // a stopping runner sends the held ack
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			settled(0, 0)
		})
	}
}

func TestAHeldAckIsSentWhenNoMessageFollows(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	intake := deps.Config.Intake.Name
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = Run(ctx, deps.JS, Spec{Service: "test", Stream: intake, Durable: "held", FilterSubjects: []string{subject.AllRequests},
			HoldLastAck: 20 * time.Millisecond}, deps.Log, deps.Metrics, func(context.Context, jetstream.Msg) error { return nil })
	}()
	subj, err := subject.Request("bot", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deps.JS.Publish(ctx, subj, []byte("x")); err != nil {
		t.Fatal(err)
	}
	stream, err := deps.JS.Stream(ctx, intake)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the only message's held ack to be sent", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 0 && info.State.LastSeq == 1
	})
}

// A consumer deleted behind a running service's back ends Run with an
// error that says to restart, instead of a quiet nil that left the process
// alive but never delivering again.
func TestADeletedConsumerEndsRunWithAnError(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	intake := deps.Config.Intake.Name
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribed := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- Run(ctx, deps.JS, Spec{Service: "test", Stream: intake, Durable: "doomed", FilterSubjects: []string{subject.AllRequests},
			Subscribed: func() { close(subscribed) }}, deps.Log, deps.Metrics, func(context.Context, jetstream.Msg) error { return nil })
	}()
	select {
	case <-subscribed:
	case err := <-ended:
		t.Fatalf("Run ended before it subscribed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not subscribe within 30s")
	}
	if err := deps.JS.DeleteConsumer(ctx, intake, "doomed"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "restart the service") {
			t.Fatalf("Run after its consumer was deleted returned %v; want an error saying to restart", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run went on for 30s after its consumer was deleted")
	}
}
