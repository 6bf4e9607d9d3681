package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestTwoExecutorsRaceForOneClaim runs two executor processes against one
// server and against a 3-node cluster with every stream and bucket at R3.
// Each call's approval is stored three times, so both executors are handed
// the same call at once and race for its claim: a non-idempotent tool runs
// exactly once per call and every ledger holds one started and one end.
func TestTwoExecutorsRaceForOneClaim(t *testing.T) {
	cases := []struct {
		name     string
		replicas int
		urls     func(t *testing.T) string
	}{
		{"single server", 1, func(t *testing.T) string { return testenv.StartNATS(t).URL() }},
		{"R3 cluster", 3, func(t *testing.T) string {
			servers, err := embedded.StartCluster(t.TempDir(), 3)
			if err != nil {
				t.Fatal(err)
			}
			var urls []string
			for _, s := range servers {
				t.Cleanup(s.Stop)
				urls = append(urls, s.URL())
			}
			return strings.Join(urls, ",")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.urls(t)
			cfg := testenv.Config(url)
			cfg.Stream.Replicas, cfg.Buckets.Replicas = tc.replicas, tc.replicas
			deps := testenv.Deps(t, cfg)

			var mu sync.Mutex
			hits := map[string]int{} // idempotency key → requests
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits[r.Header.Get("Idempotency-Key")]++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // the copies meet a claim that is still running
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"ok":true}`)
			}))
			t.Cleanup(hook.Close)
			dir := t.TempDir()
			tools := filepath.Join(dir, "tools.yaml")
			writeFile(t, tools, fmt.Sprintf("servers:\n  hook:\n    webhook:\n      url: %s\n      secret: s\n    tools:\n      pay: {}\n", hook.URL))
			conf := filepath.Join(dir, "airlock.yaml")
			writeFile(t, conf, fmt.Sprintf("executor:\n  tools_file: %s\n  sandbox: %s\n  ack_wait: 3s\n", tools, filepath.Join(dir, "sandbox")))
			env := []string{"AIRLOCK_SECURITY_DECISION_KEY=" + cfg.Security.DecisionKey}
			startServe(t, url, env, "executor", "--config", conf)
			startServe(t, url, env, "executor", "--config", conf)

			dk, err := deps.DecisionKey()
			if err != nil {
				t.Fatal(err)
			}
			pub := deps.Publisher("approval")
			const calls, copies = 40, 3
			for i := range calls {
				args, _ := structpb.NewStruct(map[string]any{"n": i})
				digest, _ := canon.Digest(args)
				call := &airlockv1.ToolCall{CallId: fmt.Sprintf("r%02d", i), AgentId: "bot", Server: "hook", Tool: "pay", Arguments: args, Revision: 1}
				for c := range copies {
					ev := &airlockv1.Event{EventId: fmt.Sprintf("bot.%s.1.approved.%d", call.CallId, c), AgentId: "bot", CallId: call.CallId, Revision: 1,
						Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digest}}}
					if err := dk.SealDecision(ev); err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := pub.Publish(ctx, ev, "")
					cancel()
					if err != nil {
						t.Fatalf("approve %s: %v", call.CallId, err)
					}
				}
			}

			ledgers := map[string][]string{}
			testenv.Eventually(t, 90*time.Second, "every call to end", func() bool {
				ledgers = map[string][]string{}
				ended := 0
				for _, m := range testenv.Messages(t, deps.JS, "airlock.evt.bot.*.exec.*") {
					p, err := subject.Parse(m.Subject())
					if err != nil {
						t.Fatal(err)
					}
					ledgers[p.Call] = append(ledgers[p.Call], p.Type)
					if p.Type == subject.Completed || p.Type == subject.Failed {
						ended++
					}
				}
				return ended >= calls
			})
			mu.Lock()
			defer mu.Unlock()
			for i := range calls {
				id := fmt.Sprintf("r%02d", i)
				if got := strings.Join(ledgers[id], ","); got != "started,completed" {
					t.Errorf("%s: ledger %s, want started,completed", id, got)
				}
				if n := hits["bot."+id+".1"]; n != 1 {
					t.Errorf("%s: the non-idempotent tool ran %d times, want once", id, n)
				}
			}
		})
	}
}
