package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/onetap"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestTheRegistryDelaysNoPageAndIsAskedOnceForMany: the call page, the
// inbox and a mail's one-tap page warn of a pending call of a tool the executor's registry lacks,
// from one list asked once for many pages; an executor that is absent or
// does not answer holds no page (each is answered well before the
// console's ask of the registry would give up) and the pages then say
// nothing of the tool.
func TestTheRegistryDelaysNoPageAndIsAskedOnceForMany(t *testing.T) {
	for _, tc := range []struct {
		name     string
		executor string // "", "silent" or "answers"
		warned   bool
	}{
		{"an_absent_executor_delays_no_page_and_nothing_is_said", "", false},
		{"an_executor_that_does_not_answer_delays_no_page_and_nothing_is_said", "silent", false},
		{"a_registry_that_lacks_the_tool_is_asked_once_and_every_page_warns", "answers", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keyFile, sk := oneTapKey(t)
			e := newEnvWith(t, func(c *config.Config) {
				c.Email.OneTap = config.OneTap{Enabled: true, KeyFile: keyFile}
				c.Console.Users = append(c.Console.Users, config.User{Name: "carol", PasswordHash: c.Console.Users[0].PasswordHash})
			})
			asked := startExecutorTools(t, e, tc.executor)
			rec := pending("call_n", "bot", "demo__nope", map[string]any{}, 0)
			e.approval.put(rec)
			for i := range 20 { // an inbox of many rows waits no longer than one
				e.approval.put(pending(fmt.Sprintf("call_%d", i), "bot", "demo__nope", map[string]any{}, 0))
			}
			// Made for carol, who has no role: she confirms only her own calls.
			forCarol := pending("call_c", "bot", "demo__nope", map[string]any{}, 0)
			forCarol.Call.OnBehalfOf, forCarol.Call.OnBehalfOfVerified = "carol", true
			e.approval.put(forCarol)
			tok, err := onetap.NewKey(sk).Mint(onetap.Token{Agent: "bot", Call: "call_n", Revision: 1, Digest: rec.GetArgumentsDigest(),
				Approver: "alice", Action: onetap.Approve, Expires: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			b := e.browser()
			b.signIn("alice")
			for i := range 3 {
				for _, path := range []string{"/calls/bot/call_n", "/", onetap.PathPrefix + url.PathEscape(tok)} {
					// Well under the 2 s the console gives the executor to answer.
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
					p := b.do(req)
					cancel()
					if p.Status != http.StatusOK {
						t.Fatalf("%s: status %d", path, p.Status)
					}
					warned := strings.Contains(strings.ToLower(p.Body), "cannot run") && strings.Contains(p.Body, "<code>demo__nope</code>")
					// The first page waits only briefly for the first list: on
					// a loaded machine it may come after.
					first := i == 0 && path == "/calls/bot/call_n"
					if warned != tc.warned && (!tc.warned || !first) {
						t.Errorf("page %d of %s warns that the call cannot run: %v, want %v", i, path, warned, tc.warned)
					}
				}
			}
			// Only those who read every call see what the registry has.
			if has := strings.Contains(b.get("/calls/bot/call_n").Body, "has <code>echo</code>"); has != tc.warned {
				t.Errorf("a reviewer is told what the registry has instead: %v, want %v", has, tc.warned)
			}
			carol := e.browser()
			carol.signIn("carol")
			p := carol.get("/calls/bot/call_c")
			if p.Status != http.StatusOK || strings.Contains(strings.ToLower(p.Body), "cannot run") != tc.warned || strings.Contains(p.Body, "has <code>echo</code>") {
				t.Errorf("carol's own call: status %d, warned %v (want %v), told what the registry has %v (want false)",
					p.Status, strings.Contains(strings.ToLower(p.Body), "cannot run"), tc.warned, strings.Contains(p.Body, "has <code>echo</code>"))
			}
			if n := asked.Load(); tc.executor != "" && n != 1 {
				t.Errorf("the registry was asked %d times for 9 pages within seconds, want once", n)
			}
		})
	}
}

// startExecutorTools answers the executor's tools endpoint as kind says:
// "" not at all (no responder), "silent" never (the request times out),
// "answers" with the demo server's echo. It counts the requests.
func startExecutorTools(t *testing.T, e *env, kind string) *atomic.Int32 {
	t.Helper()
	var asked atomic.Int32
	if kind == "" {
		return &asked
	}
	nc, _ := testenv.Connect(t, e.deps.Config.NATS.URL)
	exec, err := micro.AddService(nc, micro.Config{Name: executorapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Stop() })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the service stops
	if err := exec.AddEndpoint("tools", rpc.Handle(testenv.Logger(t), func() *airlockv1.ToolsListRequest { return &airlockv1.ToolsListRequest{} },
		func(context.Context, *airlockv1.ToolsListRequest) (*airlockv1.ToolsListResponse, error) {
			asked.Add(1)
			if kind == "silent" {
				<-release
			}
			return &airlockv1.ToolsListResponse{Tools: []*airlockv1.UpstreamTool{{Name: "demo__echo", Server: "demo", Tool: "echo"}}}, nil
		}), micro.WithEndpointSubject(executorapi.Tools)); err != nil {
		t.Fatal(err)
	}
	testenv.Subscribed(t, nc)
	return &asked
}

// TestAToolTheRegistryGainsIsSeenWhenTheExecutorSaysSo: once the executor
// announces that its tools changed (subject.ToolsChanged), the console asks
// the registry again at once: a tool just added stops being flagged without
// waiting for the periodic ask (the console's clock stands still here, so
// that ask never comes).
func TestAToolTheRegistryGainsIsSeenWhenTheExecutorSaysSo(t *testing.T) {
	e := newEnv(t)
	clk := &clock{t: time.Now()}
	_, e.srv = e.startConsoleWith(console.Options{Now: clk.Now})
	var hasNope atomic.Bool
	nc, _ := testenv.Connect(t, e.deps.Config.NATS.URL)
	exec, err := micro.AddService(nc, micro.Config{Name: executorapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Stop() })
	if err := exec.AddEndpoint("tools", rpc.Handle(testenv.Logger(t), func() *airlockv1.ToolsListRequest { return &airlockv1.ToolsListRequest{} },
		func(context.Context, *airlockv1.ToolsListRequest) (*airlockv1.ToolsListResponse, error) {
			list := &airlockv1.ToolsListResponse{Tools: []*airlockv1.UpstreamTool{{Name: "demo__echo", Server: "demo", Tool: "echo"}}}
			if hasNope.Load() {
				list.Tools = append(list.Tools, &airlockv1.UpstreamTool{Name: "demo__nope", Server: "demo", Tool: "nope"})
			}
			return list, nil
		}), micro.WithEndpointSubject(executorapi.Tools)); err != nil {
		t.Fatal(err)
	}
	testenv.Subscribed(t, nc)
	e.approval.put(pending("call_n", "bot", "demo__nope", map[string]any{}, 0))
	b := e.browser()
	b.signIn("alice")
	warns := func() bool {
		p := b.get("/calls/bot/call_n")
		if p.Status != http.StatusOK {
			t.Fatalf("the call page: status %d", p.Status)
		}
		return strings.Contains(p.Body, `id="unknown-tool"`)
	}
	// The first page may come before the first list: it then says nothing.
	testenv.Eventually(t, 10*time.Second, "the call page to warn that the registry lacks demo__nope", warns)

	hasNope.Store(true)
	body, _ := json.Marshal(executorapi.Changed{Server: "demo"})
	if err := nc.Publish(subject.ToolsChanged, body); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the call page to stop warning once the executor said its tools changed", func() bool { return !warns() })
}
