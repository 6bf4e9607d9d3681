package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestExecutorEndsEveryCallOnceWhileNATSIsPausedAndRestarted runs the
// executor as its own process under a bounded load of webhook calls while
// the NATS server process is frozen (SIGSTOP/SIGCONT) several times and
// restarted once: every started call ends in exactly one terminal event, a
// non-idempotent tool runs at most once, and nothing stays started.
func TestExecutorEndsEveryCallOnceWhileNATSIsPausedAndRestarted(t *testing.T) {
	n := startNATSProcess(t)
	cfg := testenv.Config(n.URL())
	deps := testenv.Deps(t, cfg)
	var mu sync.Mutex
	hits := map[string]int{} // idempotency key → requests
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		time.Sleep(30 * time.Millisecond) // the tool's own work: calls are in flight when NATS freezes
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf("servers:\n  hook:\n    webhook:\n      url: %s\n      secret: s\n    tools:\n      pay: {}\n      sync: {idempotent: true}\n", hook.URL))
	conf := filepath.Join(dir, "airlock.yaml")
	writeFile(t, conf, fmt.Sprintf("executor:\n  tools_file: %s\n  sandbox: %s\n  ack_wait: 2s\n", tools, filepath.Join(dir, "sandbox")))
	startServe(t, n.URL(), []string{"AIRLOCK_SECURITY_DECISION_KEY=" + cfg.Security.DecisionKey}, "executor", "--config", conf)

	dk, err := deps.DecisionKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := deps.Publisher("approval")
	const calls = 160
	idempotent := func(i int) bool { return i%2 == 1 }
	approve := func(i int) {
		tool := "pay"
		if idempotent(i) {
			tool = "sync"
		}
		args, _ := structpb.NewStruct(map[string]any{"n": i})
		call := &airlockv1.ToolCall{CallId: fmt.Sprintf("p%03d", i), AgentId: "bot", Server: "hook", Tool: tool, Arguments: args, Revision: 1}
		digest, _ := canon.Digest(args)
		ev := &airlockv1.Event{EventId: "bot." + call.CallId + ".1.approved", AgentId: "bot", CallId: call.CallId, Revision: 1,
			Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digest}}}
		if err := dk.SealDecision(ev); err != nil {
			t.Error(err)
			return
		}
		for attempt := 0; ; attempt++ { // NATS may be frozen right now: retry, the stream stores it once
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := pub.Publish(ctx, ev, "")
			cancel()
			if err == nil {
				return
			}
			if attempt == 30 {
				t.Errorf("approve %s: %v", call.CallId, err)
				return
			}
		}
	}
	load := make(chan struct{})
	go func() {
		defer close(load)
		for i := 0; i < calls; i++ {
			approve(i)
			time.Sleep(15 * time.Millisecond)
		}
	}()
	for range 4 {
		time.Sleep(600 * time.Millisecond)
		n.pause(1300 * time.Millisecond)
	}
	n.restart()
	<-load

	ends := func() map[string][]string {
		out := map[string][]string{}
		for _, m := range testenv.Messages(t, deps.JS, "airlock.evt.bot.*.exec.*") {
			p, err := subject.Parse(m.Subject())
			if err != nil {
				t.Fatal(err)
			}
			out[p.Call] = append(out[p.Call], p.Type)
		}
		return out
	}
	var ledgers map[string][]string
	testenv.Eventually(t, 3*time.Minute, "every call to end", func() bool {
		ledgers = ends()
		done := 0
		for _, l := range ledgers {
			for _, typ := range l {
				if typ == subject.Completed || typ == subject.Failed {
					done++
					break
				}
			}
		}
		return done == calls
	})
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < calls; i++ {
		id := fmt.Sprintf("p%03d", i)
		starts, terminals := 0, 0
		for _, typ := range ledgers[id] {
			switch typ {
			case subject.Started:
				starts++
			case subject.Completed, subject.Failed:
				terminals++
			}
		}
		if terminals != 1 {
			t.Errorf("%s: %d terminal events (ledger %v), want exactly 1", id, terminals, ledgers[id])
		}
		if !idempotent(i) && (starts > 1 || hits["bot."+id+".1"] > 1) {
			t.Errorf("%s (not idempotent): %d starts, %d executions (ledger %v)", id, starts, hits["bot."+id+".1"], ledgers[id])
		}
		if ledgers[id][len(ledgers[id])-1] == subject.Started {
			t.Errorf("%s: its ledger ends started: %v", id, ledgers[id])
		}
	}
	for key, n := range hits {
		if n > 1 {
			t.Logf("idempotent key %s was sent %d times (allowed: the same key)", key, n)
		}
	}
}
