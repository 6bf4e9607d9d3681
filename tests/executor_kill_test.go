package tests

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// blockingHook is a webhook receiver that verifies signatures and holds
// the first request of every call until the caller hangs up (the executor
// process dies); later requests are answered at once.
type blockingHook struct {
	*httptest.Server
	t      *testing.T
	secret string
	mu     sync.Mutex
	hits   map[string][]string // call id → idempotency keys, in arrival order
	arrive chan string
}

func newBlockingHook(t *testing.T, secret string) *blockingHook {
	h := &blockingHook{t: t, secret: secret, hits: map[string][]string{}, arrive: make(chan string, 16)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(h.secret))
		mac.Write(body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(r.Header.Get("X-Airlock-Signature")), []byte(want)) {
			t.Errorf("bad webhook signature %q", r.Header.Get("X-Airlock-Signature"))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		call := r.Header.Get("X-Airlock-Call-Id")
		h.mu.Lock()
		h.hits[call] = append(h.hits[call], r.Header.Get("Idempotency-Key"))
		first := len(h.hits[call]) == 1
		h.mu.Unlock()
		h.arrive <- call
		if first {
			select { // until the executor that sent it is killed
			case <-r.Context().Done():
				return
			case <-time.After(60 * time.Second):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"done":%q}`, call)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *blockingHook) keys(call string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.hits[call]...)
}

// TestExecutorKilledMidCallNeverRunsANonIdempotentToolTwice kills an
// `airlock serve executor` process with SIGKILL while a webhook tool is
// running, and checks what a restarted executor makes of it: a
// non-idempotent tool ends failed/indeterminate and is not run again; an
// idempotent one is run again with the same idempotency key and completes once.
func TestExecutorKilledMidCallNeverRunsANonIdempotentToolTwice(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	deps := testenv.Deps(t, cfg) // provisions the stream and buckets
	hook := newBlockingHook(t, "kill-test-secret")

	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf(`servers:
  hook:
    webhook:
      url: %s
      secret_env: HOOK_SECRET
    tools:
      pay: {}
      sync: {idempotent: true}
`, hook.URL))
	conf := filepath.Join(dir, "airlock.yaml")
	writeFile(t, conf, fmt.Sprintf("executor:\n  tools_file: %s\n  sandbox: %s\n  ack_wait: 2s\n", tools, filepath.Join(dir, "sandbox")))
	env := []string{"HOOK_SECRET=kill-test-secret", "AIRLOCK_SECURITY_DECISION_KEY=" + cfg.Security.DecisionKey}
	dk, err := deps.DecisionKey()
	if err != nil {
		t.Fatal(err)
	}
	serve := func() *serveProcess { return startServe(t, n.URL(), env, "executor", "--config", conf) }

	pub := bus.NewPublisher(deps.JS, "airlock/approval")
	approve := func(id, tool string) {
		t.Helper()
		args, _ := structpb.NewStruct(map[string]any{"amount": 42})
		srv, name, _ := strings.Cut(tool, "__")
		call := &airlockv1.ToolCall{CallId: id, AgentId: "bot", Server: srv, Tool: name, Arguments: args, Revision: 1, IdempotencyKey: id + "-idem"}
		digest, _ := canon.Digest(args)
		ev := &airlockv1.Event{EventId: "bot." + id + ".1.approved", AgentId: "bot", CallId: id, Revision: 1,
			Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digest}}}
		if err := dk.SealDecision(ev); err != nil {
			t.Fatal(err)
		}
		if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	arrival := func(want string) {
		t.Helper()
		select {
		case got := <-hook.arrive:
			if got != want {
				t.Fatalf("webhook called for %s, want %s", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the webhook was not called for %s within 30s", want)
		}
	}
	end := func(id string) *airlockv1.Event {
		t.Helper()
		var found *airlockv1.Event
		testenv.Eventually(t, 30*time.Second, "the end of "+id, func() bool {
			for _, ev := range testenv.Events(t, deps.JS, subject.OfCall("bot", id)) {
				if ev.GetCompleted() != nil || ev.GetFailed() != nil {
					found = ev
					return true
				}
			}
			return false
		})
		return found
	}

	first := serve()
	approve("kill-pay", "hook__pay")
	arrival("kill-pay")
	first.Kill()

	second := serve()
	f := end("kill-pay").GetFailed()
	if f == nil || f.Outcome != "indeterminate" {
		t.Fatalf("non-idempotent call ended %v, want failed with outcome indeterminate", f)
	}
	if keys := hook.keys("kill-pay"); len(keys) != 1 {
		t.Fatalf("the non-idempotent webhook ran %d times, want once", len(keys))
	}

	approve("kill-sync", "hook__sync")
	arrival("kill-sync")
	second.Kill()

	serve()
	arrival("kill-sync")
	c := end("kill-sync").GetCompleted()
	if c == nil || c.Attempt != 2 || !strings.Contains(c.ResultJson, "kill-sync") {
		t.Fatalf("idempotent call ended %v, want completed on attempt 2", c)
	}
	if keys := hook.keys("kill-sync"); len(keys) != 2 || keys[0] != "bot/kill-sync-idem" || keys[1] != keys[0] {
		t.Fatalf("idempotency keys sent %v, want the same key twice", keys)
	}
	for _, id := range []string{"kill-pay", "kill-sync"} {
		types := testenv.SubjectTypes(t, deps.JS, subject.OfCall("bot", id))
		ends := 0
		for _, typ := range types {
			if typ == "completed" || typ == "failed" {
				ends++
			}
		}
		if ends != 1 {
			t.Fatalf("%s has events %v: want exactly one completed or failed", id, types)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
