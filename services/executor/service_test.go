package executor_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
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
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

const testSecret = "whsec-test"

// hookServer is a webhook receiver that checks every request's signature
// and idempotency key and counts the side effects it performs.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hookHit
	// hit receives every request as it arrives; release, when set, holds
	// requests until it is closed.
	hit     chan hookHit
	release chan struct{}
	t       *testing.T
}

type hookHit struct {
	Path, IdempotencyKey, Attempt string
	Body                          map[string]any
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{hit: make(chan hookHit, 100), t: t}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() {
		h.mu.Lock()
		if h.release != nil {
			select {
			case <-h.release:
			default:
				close(h.release)
			}
		}
		h.mu.Unlock()
		h.Close()
	})
	return h
}

func (h *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if got, want := r.Header.Get(executor.HeaderSignature), executor.Sign([]byte(testSecret), body); !hmac.Equal([]byte(got), []byte(want)) {
		h.t.Errorf("webhook signature %q, want %q", got, want)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	key := r.Header.Get(executor.HeaderIdempotencyKey)
	if key == "" {
		h.t.Errorf("webhook request without %s", executor.HeaderIdempotencyKey)
	}
	hit := hookHit{Path: r.URL.Path, IdempotencyKey: key, Attempt: r.Header.Get(executor.HeaderAttempt)}
	_ = json.Unmarshal(body, &hit.Body)
	h.mu.Lock()
	h.hits = append(h.hits, hit)
	release := h.release
	h.mu.Unlock()
	h.hit <- hit
	if strings.HasSuffix(r.URL.Path, "/slow") {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(30 * time.Second):
		}
	}
	if release != nil {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.Path)
}

func (h *hookServer) hold() {
	h.mu.Lock()
	h.release = make(chan struct{})
	h.mu.Unlock()
}

func (h *hookServer) Hits() []hookHit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookHit(nil), h.hits...)
}

// registryFor is a tool registry with the demo tools and a webhook server
// "hook" with tools pay (not idempotent), sync (idempotent) and slow.
func registryFor(h *hookServer, slowTimeout time.Duration) executor.RegistryFile {
	yes := true
	f := executor.RegistryFile{Servers: map[string]executor.ServerEntry{}}
	if h != nil {
		f.Servers["hook"] = executor.ServerEntry{
			Webhook: &executor.WebhookConfig{URL: h.URL, Secret: testSecret},
			Tools: map[string]executor.ToolEntry{
				"pay": {}, "sync": {Idempotent: &yes}, "slow": {Timeout: slowTimeout},
			},
		}
	}
	return f
}

type testEnv struct {
	t    *testing.T
	nats *testenv.NATS
	cfg  config.Config
	deps svc.Deps
	pub  *bus.Publisher
}

func newTestEnv(t *testing.T, mutate func(*config.Config)) *testEnv {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Executor.AckWait = 2 * time.Second
	cfg.Dev.DataDir = t.TempDir()
	if mutate != nil {
		mutate(&cfg)
	}
	deps := testenv.Deps(t, cfg)
	return &testEnv{t: t, nats: n, cfg: cfg, deps: deps, pub: bus.NewPublisher(deps.JS, "airlock/test")}
}

// startExecutor runs one executor replica with its own connection.
func (e *testEnv) startExecutor(f executor.RegistryFile) *executor.Service {
	e.t.Helper()
	deps := testenv.Deps(e.t, e.cfg)
	reg, err := executor.NewRegistry(f, executor.RegistryOptions{Sandbox: e.cfg.SandboxDir(), Config: e.cfg.Executor})
	if err != nil {
		e.t.Fatal(err)
	}
	kv, err := deps.JS.KeyValue(context.Background(), e.cfg.Buckets.Executions)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := executor.New(deps, reg, executor.NewKVLiveness(kv))
	if err != nil {
		e.t.Fatal(err)
	}
	testenv.RunService(e.t, s)
	return s
}

func toolCall(t *testing.T, id, tool string, args map[string]any) *airlockv1.ToolCall {
	t.Helper()
	st, err := structpb.NewStruct(args)
	if err != nil {
		t.Fatal(err)
	}
	srv, name, _ := strings.Cut(tool, "__")
	return &airlockv1.ToolCall{CallId: id, AgentId: "bot", Server: srv, Tool: name, Arguments: st, Revision: 1}
}

func digestOf(t *testing.T, call *airlockv1.ToolCall) string {
	t.Helper()
	d, err := canon.Digest(call.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// allow publishes the policy's allowed event for call, decided about digest.
func (e *testEnv) allow(call *airlockv1.ToolCall, digest string) {
	e.t.Helper()
	e.publish(&airlockv1.Event{
		EventId: callref.Of(call).EventID("decision"), AgentId: call.AgentId, CallId: call.CallId, Revision: call.Revision,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
		Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call,
			Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, ArgumentsDigest: digest}}},
	})
}

// approve publishes an approved event for call; copy distinguishes
// deliberate duplicates so the stream stores each one.
func (e *testEnv) approve(call *airlockv1.ToolCall, digest string, copy int) {
	e.t.Helper()
	e.publish(&airlockv1.Event{
		EventId: fmt.Sprintf("%s.%d.approved.%d", call.CallId, call.Revision, copy), AgentId: call.AgentId, CallId: call.CallId, Revision: call.Revision,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"},
		Body:  &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digest}},
	})
}

// publish stores ev as the policy or approval service would: an allowed or
// approved event sealed with the decision key.
func (e *testEnv) publish(ev *airlockv1.Event) {
	e.t.Helper()
	dk, err := e.deps.DecisionKey()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := dk.SealDecision(ev); err != nil {
		e.t.Fatal(err)
	}
	ack, err := e.pub.Publish(context.Background(), ev, "")
	if err != nil {
		e.t.Fatal(err)
	}
	if ack.Duplicate {
		e.t.Fatalf("event %s was stored before", ev.EventId)
	}
}

// end waits for the call's completed or failed event and returns it.
func (e *testEnv) end(call string) *airlockv1.Event {
	e.t.Helper()
	var found *airlockv1.Event
	testenv.Eventually(e.t, 20*time.Second, "the end of call "+call, func() bool {
		for _, ev := range testenv.Events(e.t, e.deps.JS, subject.OfCall("bot", call)) {
			if ev.GetCompleted() != nil || ev.GetFailed() != nil {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// settled waits until the executor has acknowledged every message it was given.
func (e *testEnv) settled() {
	e.t.Helper()
	testenv.Settled(e.t, e.deps.JS, e.cfg.Stream.Name, executor.Durable, 30*time.Second)
}

func (e *testEnv) types(call string) []string {
	return testenv.SubjectTypes(e.t, e.deps.JS, subject.OfCall("bot", call))
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestAnAllowedCallRunsAndItsResultIsPublished(t *testing.T) {
	e := newTestEnv(t, nil)
	e.startExecutor(registryFor(nil, 0))
	call := toolCall(t, "echo1", "demo__echo", map[string]any{"text": "hello", "n": 3})
	e.allow(call, digestOf(t, call))

	end := e.end("echo1")
	c := end.GetCompleted()
	if c == nil {
		t.Fatalf("call ended %v, want completed", end)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(c.ResultJson), &got); err != nil || got["text"] != "hello" || got["n"] != 3.0 {
		t.Fatalf("result %s (%v), want the echoed arguments", c.ResultJson, err)
	}
	if end.EventId != "bot.echo1.1.result" || c.Attempt != 1 {
		t.Fatalf("completed event id %q attempt %d", end.EventId, c.Attempt)
	}
	e.settled()
	if got := e.types("echo1"); strings.Join(got, ",") != "allowed,started,completed" {
		t.Fatalf("events %v, want allowed, started, completed", got)
	}
}

func TestOneApprovalDeliveredThreeTimesToTwoReplicasRunsOnce(t *testing.T) {
	e := newTestEnv(t, nil)
	hook := newHookServer(t)
	hook.hold()
	e.startExecutor(registryFor(hook, 0))
	e.startExecutor(registryFor(hook, 0))

	call := toolCall(t, "pay1", "hook__pay", map[string]any{"amount": 10})
	call.IdempotencyKey = "pay1-key"
	for i := 0; i < 3; i++ {
		e.approve(call, digestOf(t, call), i)
	}
	first := <-hook.hit
	// Hold the tool until every copy has been handed to a replica, so the
	// duplicates meet a claim that is still running.
	testenv.Eventually(t, 20*time.Second, "all three copies delivered", func() bool {
		cons, err := e.deps.JS.Consumer(context.Background(), e.cfg.Stream.Name, executor.Durable)
		if err != nil {
			return false
		}
		info, err := cons.Info(context.Background())
		return err == nil && info.Delivered.Consumer >= 3
	})
	close(hook.release)
	if end := e.end("pay1"); end.GetCompleted() == nil {
		t.Fatalf("call ended %v, want completed", end)
	}
	e.settled()

	if hits := hook.Hits(); len(hits) != 1 {
		t.Fatalf("the webhook ran %d times, want once: %+v", len(hits), hits)
	}
	if first.IdempotencyKey != "bot/pay1-key" || first.Body["amount"] != 10.0 {
		t.Fatalf("webhook got key %q body %v", first.IdempotencyKey, first.Body)
	}
	types := e.types("pay1")
	if count(types, "approved") != 3 || count(types, "started") != 1 || count(types, "completed") != 1 || count(types, "failed") != 0 {
		t.Fatalf("events %v, want 3 approved, 1 started, 1 completed", types)
	}
}

func TestArgumentsThatWereNotApprovedAreRefused(t *testing.T) {
	e := newTestEnv(t, nil)
	hook := newHookServer(t)
	e.startExecutor(registryFor(hook, 0))

	tests := []struct {
		name   string
		digest func(call *airlockv1.ToolCall) string
	}{
		{"digest_of_other_arguments", func(*airlockv1.ToolCall) string {
			return digestOf(t, toolCall(t, "x", "hook__pay", map[string]any{"amount": 1}))
		}},
		{"no_digest_at_all", func(*airlockv1.ToolCall) string { return "" }},
		{"arguments_edited_after_the_digest", func(call *airlockv1.ToolCall) string {
			d := digestOf(t, call)
			call.Arguments.Fields["amount"] = structpb.NewNumberValue(1_000_000)
			return d
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("mm%d", i)
			call := toolCall(t, id, "hook__pay", map[string]any{"amount": 10})
			e.approve(call, tt.digest(call), 0)
			f := e.end(id).GetFailed()
			if f == nil || f.Reason != executor.ReasonArgumentsMismatch || f.Outcome != calls.FailureError || f.Message == "" {
				t.Fatalf("failed = %v, want reason arguments_mismatch with a message", f)
			}
			if got := e.types(id); strings.Join(got, ",") != "approved,failed" {
				t.Fatalf("events %v, want approved, failed (never started)", got)
			}
		})
	}
	// A correct approval arriving after a refusal of the same revision must not run it either.
	call := toolCall(t, "mm0", "hook__pay", map[string]any{"amount": 10})
	e.approve(call, digestOf(t, call), 1)
	e.settled()
	if hits := hook.Hits(); len(hits) != 0 {
		t.Fatalf("the webhook ran %d times for refused calls", len(hits))
	}
}

// TestFailuresCarryTheirReason: each failure has its reason, its outcome
// and a message that says why; a tool the registry lacks is said as
// executorapi says it everywhere (an agent, the console and the audit read
// the same sentence), without the registry's contents (agents may not read
// the registry).
func TestFailuresCarryTheirReason(t *testing.T) {
	e := newTestEnv(t, nil)
	hook := newHookServer(t)
	e.startExecutor(registryFor(hook, 300*time.Millisecond))

	tests := []struct {
		name, tool     string
		args           map[string]any
		reason, inText string
		outcome        string
		started        bool
	}{
		{"a_tool_past_its_timeout_fails_with_timeout", "hook__slow", map[string]any{}, executor.ReasonTimeout, "300ms", calls.FailureIndeterminate, true},
		{"an_unknown_tool_of_a_known_server", "demo__delete_everything", map[string]any{}, executor.ReasonUnknownTool, unknownToolText("demo", "delete_everything"), calls.FailureError, false},
		{"a_tool_of_an_unknown_server", "nowhere__run", map[string]any{}, executor.ReasonUnknownTool, unknownToolText("nowhere", "run"), calls.FailureError, false},
		{"a_tool_that_reports_an_error", "demo__read_file", map[string]any{"path": "missing.txt"}, executor.ReasonToolError, "no such file", calls.FailureError, true},
		{"a_path_that_leaves_the_sandbox", "demo__read_file", map[string]any{"path": "../../etc/passwd"}, executor.ReasonToolError, "leaves the sandbox", calls.FailureError, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("f%d", i)
			call := toolCall(t, id, tt.tool, tt.args)
			e.allow(call, digestOf(t, call))
			f := e.end(id).GetFailed()
			if f == nil || f.Reason != tt.reason || f.Outcome != tt.outcome || !strings.Contains(f.Message, tt.inText) || tt.reason == executor.ReasonUnknownTool && f.Message != tt.inText {
				t.Fatalf("failed = %v, want reason %s outcome %s mentioning %q", f, tt.reason, tt.outcome, tt.inText)
			}
			if got := count(e.types(id), "started"); got != map[bool]int{true: 1, false: 0}[tt.started] {
				t.Fatalf("%d started events, want started=%v", got, tt.started)
			}
		})
	}
}

// unknownToolText is executorapi's sentence of an ended call to a tool the
// registry lacks, told to those who may not read the registry.
func unknownToolText(server, tool string) string {
	return executorapi.Failure(&airlockv1.UnknownTool{Tool: server + "__" + tool, Server: server}, func(name string) string { return name })
}

func TestLargeResultsAreTruncatedWithAMarker(t *testing.T) {
	e := newTestEnv(t, func(c *config.Config) { c.Executor.MaxResultBytes = 300 })
	e.startExecutor(registryFor(nil, 0))
	call := toolCall(t, "big", "demo__echo", map[string]any{"text": strings.Repeat("é", 2000)})
	e.allow(call, digestOf(t, call))
	c := e.end("big").GetCompleted()
	if c == nil || !c.Truncated || len(c.ResultJson) > 300 {
		t.Fatalf("completed = %v, want a truncated result of at most 300 bytes", c)
	}
	var marker executor.TruncatedResult
	if err := json.Unmarshal([]byte(c.ResultJson), &marker); err != nil || !marker.Truncated || marker.OriginalBytes < 4000 || !strings.HasPrefix(marker.Prefix, `{"text":"éé`) {
		t.Fatalf("truncated result %s (%v) is not the marker", c.ResultJson, err)
	}
}

// TestAClaimWhoseExecutorDiedIsSettled plants the claim a dead executor
// leaves behind (a `started` with no end and no heartbeat) and checks what a
// live replica makes of the approval. The SIGKILL test in tests/ does the
// same with a real process.
func TestAClaimWhoseExecutorDiedIsSettled(t *testing.T) {
	e := newTestEnv(t, nil)
	hook := newHookServer(t)
	plant := func(call *airlockv1.ToolCall) {
		ref := callref.Of(call)
		ev := &airlockv1.Event{AgentId: call.AgentId, CallId: call.CallId, Revision: 1,
			Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "dead-1", Attempt: 1,
				IdempotencyKey: ref.IdempotencyKey(call.IdempotencyKey), Claim: "dead-claim"}}}
		if _, err := e.pub.PublishAfter(context.Background(), ev, "", subject.OfExecution(ref.Agent, ref.Call), 0); err != nil {
			t.Fatal(err)
		}
	}
	e.startExecutor(registryFor(hook, 0))

	t.Run("a_non_idempotent_tool_ends_indeterminate_without_running_again", func(t *testing.T) {
		call := toolCall(t, "orph1", "hook__pay", map[string]any{"amount": 5})
		plant(call)
		e.approve(call, digestOf(t, call), 0)
		f := e.end("orph1").GetFailed()
		if f == nil || f.Reason != executor.ReasonIndeterminate || f.Outcome != calls.FailureIndeterminate || !strings.Contains(f.Message, "dead-1") {
			t.Fatalf("failed = %v, want indeterminate naming the dead executor", f)
		}
		if n := len(hook.Hits()); n != 0 {
			t.Fatalf("the webhook ran %d times", n)
		}
	})
	t.Run("an_idempotent_tool_runs_again_with_the_same_key", func(t *testing.T) {
		call := toolCall(t, "orph2", "hook__sync", map[string]any{"id": "a"})
		call.IdempotencyKey = "orph2-key"
		plant(call)
		e.approve(call, digestOf(t, call), 0)
		c := e.end("orph2").GetCompleted()
		if c == nil || c.Attempt != 2 {
			t.Fatalf("completed = %v, want attempt 2", c)
		}
		hits := hook.Hits()
		if len(hits) != 1 || hits[0].IdempotencyKey != "bot/orph2-key" || hits[0].Attempt != "2" {
			t.Fatalf("webhook hits %+v, want one with the recorded key at attempt 2", hits)
		}
	})
	e.settled()
}

func TestMCPFilesystemServerWritesAndReadsThroughTheExecutor(t *testing.T) {
	e := newTestEnv(t, nil)
	dir := t.TempDir()
	bin := nodeBin(t, "mcp-server-filesystem")
	tools := filepath.Join(t.TempDir(), "tools.yaml")
	yaml := fmt.Sprintf("servers:\n  fs:\n    mcp:\n      command: %q\n      args: [%q]\n    tools:\n      read_text_file: {idempotent: true}\n", bin, dir)
	if err := os.WriteFile(tools, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := executor.LoadRegistry(tools, executor.RegistryOptions{Sandbox: t.TempDir(), Config: config.Default().Executor})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := e.deps.JS.KeyValue(context.Background(), e.cfg.Buckets.Executions)
	if err != nil {
		t.Fatal(err)
	}
	s, err := executor.New(e.deps, reg, executor.NewKVLiveness(kv))
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, s)

	file := filepath.Join(dir, "notes", "plan.txt")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	write := toolCall(t, "fsw", "fs__write_file", map[string]any{"path": file, "content": "ship it"})
	e.approve(write, digestOf(t, write), 0)
	if c := e.end("fsw").GetCompleted(); c == nil {
		t.Fatalf("write_file did not complete: %v", e.end("fsw"))
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "ship it" {
		t.Fatalf("file holds %q (%v)", b, err)
	}
	read := toolCall(t, "fsr", "fs__read_text_file", map[string]any{"path": file})
	e.allow(read, digestOf(t, read))
	c := e.end("fsr").GetCompleted()
	if c == nil || !strings.Contains(c.ResultJson, "ship it") {
		t.Fatalf("read_text_file ended %v", e.end("fsr"))
	}
	outside := toolCall(t, "fso", "fs__read_text_file", map[string]any{"path": "/etc/hostname"})
	e.allow(outside, digestOf(t, outside))
	if f := e.end("fso").GetFailed(); f == nil || f.Reason != executor.ReasonToolError {
		t.Fatalf("reading outside the allowed directory ended %v, want tool_error", e.end("fso"))
	}
}

// TestADecisionNobodySealedRunsNothing publishes allowed and approved events
// the way something other than the policy and approval services might (no
// seal, another key's seal, a seal over other arguments): none runs, the call
// is left as it was, and each is recorded as an unauthorized attempt.
func TestADecisionNobodySealedRunsNothing(t *testing.T) {
	e := newTestEnv(t, nil)
	hook := newHookServer(t)
	e.startExecutor(registryFor(hook, 0))
	forge := func(id string, mangle func(ev *airlockv1.Event)) {
		call := toolCall(t, id, "hook__pay", map[string]any{"amount": 1000})
		ev := &airlockv1.Event{EventId: "forged." + id, AgentId: "bot", CallId: id, Revision: 1,
			Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digestOf(t, call)}}}
		mangle(ev)
		if _, err := e.pub.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	forge("unsealed", func(*airlockv1.Event) {})
	forge("other-key", func(ev *airlockv1.Event) { _ = seal.NewKey().SealDecision(ev) })
	forge("other-args", func(ev *airlockv1.Event) {
		dk, _ := e.deps.DecisionKey()
		_ = dk.SealDecision(ev)
		ev.GetApproved().Call.Arguments.Fields["amount"] = structpb.NewNumberValue(1)
		ev.GetApproved().ArgumentsDigest = digestOf(t, ev.GetApproved().Call)
	})
	for _, id := range []string{"unsealed", "other-key", "other-args"} {
		testenv.WaitForEvent(t, e.deps.JS, subject.OfCall("bot", id), subject.UnauthorizedAttempt, 10*time.Second)
	}
	e.settled()
	for _, id := range []string{"unsealed", "other-key", "other-args"} {
		if got := e.types(id); strings.Join(got, ",") != "approved,unauthorized_attempt" {
			t.Errorf("%s: events %v, want the forged approval and its refusal only", id, got)
		}
	}
	if n := len(hook.Hits()); n != 0 {
		t.Fatalf("forged decisions ran the tool %d times", n)
	}
}
