package executor_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/preview"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func demoRegistry(t *testing.T, sandbox string, f executor.RegistryFile) *executor.Registry {
	t.Helper()
	reg, err := executor.NewRegistry(f, executor.RegistryOptions{Sandbox: sandbox, Config: config.Default().Executor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

func TestTheDemoWriteFilePreviewsItsDiffAgainstTheFileAsItIsNow(t *testing.T) {
	sandbox := t.TempDir()
	reg := demoRegistry(t, sandbox, executor.RegistryFile{})
	if err := os.WriteFile(filepath.Join(sandbox, "plan.txt"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 2<<20)
	if err := os.WriteFile(filepath.Join(sandbox, "huge.txt"), []byte(huge), 0o600); err != nil {
		t.Fatal(err)
	}
	hostile := "\x1b]0;pwned\x07\x1b[2J<script>alert(1)</script>\u202e\n"
	for _, tc := range []struct {
		name, path, content string
		kind, pre           string
		text                []string
		truncated           bool
	}{
		{"a_new_file_is_all_added_against_absent", "new/a.txt", "hello\n", preview.KindDiff, preview.Absent,
			[]string{"--- /dev/null", "+++ b/new/a.txt", "+hello"}, false},
		{"an_existing_file_shows_the_lines_it_changes", "plan.txt", "one\n2\nthree\n", preview.KindDiff,
			preview.FileState([]byte("one\ntwo\nthree\n"), true), []string{"-two", "+2", " one"}, false},
		{"a_hostile_content_is_kept_as_data_for_the_surfaces_to_escape", "h.txt", hostile, preview.KindDiff, preview.Absent,
			[]string{"+" + strings.TrimSuffix(hostile, "\n")}, false},
		{"a_huge_file_is_described_not_diffed", "huge.txt", "small", preview.KindText, preview.FileState([]byte(huge), true),
			[]string{"too large to diff"}, false},
		{"a_huge_content_is_cut_at_the_bound", "big.txt", strings.Repeat("line\n", 100_000), preview.KindDiff, preview.Absent,
			[]string{"+line"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := config.Default().Executor.MaxPreviewBytes
			p, err := reg.Preview(context.Background(), executor.Request{Server: "demo", Tool: "write_file",
				Arguments: map[string]any{"path": tc.path, "content": tc.content}}, max)
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tc.kind || p.Precondition != tc.pre || p.Truncated != tc.truncated || len(p.Text) > max || p.Digest != preview.Digest(p) {
				t.Fatalf("kind %q precondition %q truncated %v, %d bytes, digest ok %v", p.Kind, p.Precondition, p.Truncated, len(p.Text), p.Digest == preview.Digest(p))
			}
			for _, want := range tc.text {
				if !strings.Contains(p.Text, want) {
					t.Fatalf("preview\n%s\nlacks %q", p.Text, want)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(sandbox, "new")); !os.IsNotExist(err) {
		t.Fatalf("a preview changed the sandbox: %v", err)
	}
}

func TestThePreviewEndpointNeverFailsACall(t *testing.T) {
	slow := make(chan struct{})
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pay/preview":
			if r.Header.Get(executor.HeaderPreview) != "1" {
				t.Errorf("preview request without %s", executor.HeaderPreview)
			}
			fmt.Fprint(w, `{"preview":"charge 12 EUR to card 4242","precondition":"balance-v7"}`)
		case "/slow/preview":
			<-slow
		default:
			http.Error(w, "the preview endpoint is broken", http.StatusInternalServerError)
		}
	}))
	defer hooks.Close()
	defer close(slow)
	e := newTestEnv(t, func(c *config.Config) { c.Executor.PreviewTimeout = 300 * time.Millisecond })
	e.startExecutor(executor.RegistryFile{Servers: map[string]executor.ServerEntry{"hook": {
		Webhook: &executor.WebhookConfig{URL: hooks.URL, Secret: testSecret},
		Tools: map[string]executor.ToolEntry{
			"pay":    {PreviewURL: hooks.URL + "/pay/preview"},
			"slow":   {PreviewURL: hooks.URL + "/slow/preview"},
			"broken": {PreviewURL: hooks.URL + "/broken/preview"},
			"plain":  {},
		},
	}}})
	api := executorapi.New(e.deps.NC)
	for _, tc := range []struct {
		name, tool, text, pre, unavailable string
	}{
		{"a_webhook_preview_endpoint_gives_its_text_and_precondition", "hook__pay", "charge 12 EUR to card 4242", "balance-v7", ""},
		{"a_slow_preview_answers_no_preview_within_the_deadline", "hook__slow", "", "", "did not finish within 300ms"},
		{"a_failing_preview_answers_no_preview_and_why", "hook__broken", "", "", "the preview endpoint is broken"},
		{"a_tool_without_a_preview_says_so", "hook__plain", "", "", "declares no preview"},
		{"an_unknown_server_says_so", "nope__x", "", "", "no server nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := api.Preview(ctx, toolCall(t, "p1", tc.tool, map[string]any{"amount": 12}), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if p.GetText() != tc.text || p.GetPrecondition() != tc.pre || !strings.Contains(p.GetUnavailable(), tc.unavailable) || (tc.unavailable == "") != (p.GetUnavailable() == "") {
				t.Fatalf("preview %v", p)
			}
		})
	}
}

// approveAgainst publishes an approved event that names the preview its
// reviewers saw and the precondition it was made against.
func (e *testEnv) approveAgainst(call *airlockv1.ToolCall, p *airlockv1.Preview) {
	e.t.Helper()
	e.publish(&airlockv1.Event{
		EventId: call.CallId + ".approved", AgentId: call.AgentId, CallId: call.CallId, Revision: call.Revision,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"},
		Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digestOf(e.t, call),
			PreviewDigest: p.GetDigest(), Precondition: p.GetPrecondition()}},
	})
}

func TestAnApprovedCallRunsOnlyAgainstTheWorldItsReviewersSaw(t *testing.T) {
	e := newTestEnv(t, nil)
	e.startExecutor(executor.RegistryFile{})
	sandbox := e.cfg.SandboxDir()
	file := filepath.Join(sandbox, "notes.txt")
	api := executorapi.New(e.deps.NC)
	previewOf := func(t *testing.T, call *airlockv1.ToolCall) *airlockv1.Preview {
		var p *airlockv1.Preview
		testenv.Eventually(t, 10*time.Second, "the executor's preview of "+call.CallId, func() bool {
			var err error
			p, err = api.Preview(context.Background(), call, 5*time.Second)
			return err == nil && preview.Has(p)
		})
		return p
	}
	if err := os.WriteFile(file, []byte("as the reviewer saw it\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("unchanged_it_runs", func(t *testing.T) {
		call := toolCall(t, "same", "demo__write_file", map[string]any{"path": "notes.txt", "content": "approved text\n"})
		e.approveAgainst(call, previewOf(t, call))
		if c := e.end("same").GetCompleted(); c == nil {
			t.Fatalf("call ended %v, want completed", e.end("same"))
		}
		if b, _ := os.ReadFile(file); string(b) != "approved text\n" {
			t.Fatalf("file holds %q", b)
		}
	})
	t.Run("changed_after_the_preview_it_fails_unrun_and_says_why", func(t *testing.T) {
		call := toolCall(t, "changed", "demo__write_file", map[string]any{"path": "notes.txt", "content": "nobody saw this diff\n"})
		p := previewOf(t, call)
		if err := os.WriteFile(file, []byte("someone else's edit\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		e.approveAgainst(call, p)
		f := e.end("changed").GetFailed()
		if f == nil || f.Reason != executor.ReasonPrecondition || f.Outcome != calls.FailureError ||
			!strings.Contains(f.Message, "the world changed since the reviewer looked") || !strings.Contains(f.Message, "approve it on the new preview") {
			t.Fatalf("call ended %v, want failed %s saying the world changed", e.end("changed"), executor.ReasonPrecondition)
		}
		if b, _ := os.ReadFile(file); string(b) != "someone else's edit\n" {
			t.Fatalf("the call ran against a world nobody saw: file holds %q", b)
		}
		e.settled()
		if got := e.types("changed"); strings.Join(got, ",") != "approved,started,failed" {
			t.Fatalf("events %v, want approved, started, failed (one end in the ledger)", got)
		}
	})
	t.Run("a_file_created_after_an_absent_preview_fails_unrun", func(t *testing.T) {
		call := toolCall(t, "absent", "demo__write_file", map[string]any{"path": "fresh.txt", "content": "mine"})
		p := previewOf(t, call)
		if p.Precondition != preview.Absent {
			t.Fatalf("precondition %q, want absent", p.Precondition)
		}
		if err := os.WriteFile(filepath.Join(sandbox, "fresh.txt"), []byte("theirs"), 0o600); err != nil {
			t.Fatal(err)
		}
		e.approveAgainst(call, p)
		if f := e.end("absent").GetFailed(); f == nil || !strings.Contains(f.Message, "which is now a file with sha256") {
			t.Fatalf("call ended %v", e.end("absent"))
		}
	})
	t.Run("a_stripped_precondition_breaks_the_seal", func(t *testing.T) {
		call := toolCall(t, "stripped", "demo__write_file", map[string]any{"path": "notes.txt", "content": "x"})
		p := previewOf(t, call)
		ev := &airlockv1.Event{EventId: "stripped.approved", AgentId: "bot", CallId: "stripped", Revision: 1,
			Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, ArgumentsDigest: digestOf(t, call),
				PreviewDigest: p.GetDigest(), Precondition: p.GetPrecondition()}}}
		dk, _ := e.deps.DecisionKey()
		if err := dk.SealDecision(ev); err != nil {
			t.Fatal(err)
		}
		ev.GetApproved().Precondition = ""
		if _, err := dk.VerifyDecision(ev); err == nil {
			t.Fatal("an approval whose precondition was removed still verifies")
		}
	})
}

// TestAnMCPToolPreviewsThroughItsDryRunTool: the real filesystem server's
// get_file_info stands in as write_file's companion dry run; its text is
// the preview, and a change to the file between the preview and the run
// fails the approved call unrun.
func TestAnMCPToolPreviewsThroughItsDryRunTool(t *testing.T) {
	e := newTestEnv(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "plan.txt")
	writeTestFile(t, file, "first")
	e.startExecutor(executor.RegistryFile{Servers: map[string]executor.ServerEntry{"fs": {
		MCP:   &executor.MCPConfig{Command: nodeBin(t, "mcp-server-filesystem"), Args: []string{dir}},
		Tools: map[string]executor.ToolEntry{"write_file": {PreviewTool: "get_file_info"}},
	}}})
	api := executorapi.New(e.deps.NC)
	call := toolCall(t, "mcpw", "fs__write_file", map[string]any{"path": file, "content": "second, longer"})
	var p *airlockv1.Preview
	testenv.Eventually(t, 30*time.Second, "the dry run's preview", func() bool {
		var err error
		p, err = api.Preview(context.Background(), call, 20*time.Second)
		return err == nil && preview.Has(p)
	})
	if p.Kind != preview.KindText || !strings.Contains(p.Text, "size") || p.Precondition != preview.OfText(p.Text) {
		t.Fatalf("preview %v", p)
	}
	writeTestFile(t, file, "changed meanwhile, so its size differs")
	e.approveAgainst(call, p)
	if f := e.end("mcpw").GetFailed(); f == nil || f.Reason != executor.ReasonPrecondition || !strings.Contains(f.Message, "a dry run answering") {
		t.Fatalf("call ended %v, want %s", e.end("mcpw"), executor.ReasonPrecondition)
	}
	if b, _ := os.ReadFile(file); string(b) != "changed meanwhile, so its size differs" {
		t.Fatalf("the call ran: file holds %q", b)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDemoWritePreview measures the demo write_file's preview (read,
// hash, diff) of a file with one changed line, at two sizes.
func BenchmarkDemoWritePreview(b *testing.B) {
	for _, lines := range []int{1_000, 20_000} {
		b.Run(fmt.Sprintf("%d_lines", lines), func(b *testing.B) {
			reg, req := demoWriteOneLine(b, lines)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Preview(context.Background(), req, 32<<10); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTheRunTimeWorldCheck measures what the executor computes before
// an approved demo write runs, to compare with the approval's
// precondition: the whole preview (read, hash, diff, digest: what the
// check made until it asked for the precondition alone) against the
// precondition alone (read, hash).
func BenchmarkTheRunTimeWorldCheck(b *testing.B) {
	max := config.Default().Executor.MaxPreviewBytes
	for _, lines := range []int{1_000, 20_000} {
		reg, req := demoWriteOneLine(b, lines)
		b.Run(fmt.Sprintf("%d_lines/whole_preview", lines), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Preview(context.Background(), req, max); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%d_lines/precondition", lines), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Precondition(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// demoWriteOneLine is a demo registry whose sandbox holds a file of lines
// lines and a write_file request that changes one line in its middle.
func demoWriteOneLine(b *testing.B, lines int) (*executor.Registry, executor.Request) {
	b.Helper()
	sandbox := b.TempDir()
	reg, err := executor.NewRegistry(executor.RegistryFile{}, executor.RegistryOptions{Sandbox: sandbox, Config: config.Default().Executor})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { reg.Close() })
	var old strings.Builder
	for i := range lines {
		fmt.Fprintf(&old, "line %d of the file, long enough to be a typical line of code\n", i)
	}
	if err := os.WriteFile(filepath.Join(sandbox, "f.txt"), []byte(old.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	content := strings.Replace(old.String(), fmt.Sprintf("line %d of", lines/2), "changed line of", 1)
	return reg, executor.Request{Server: "demo", Tool: "write_file", Arguments: map[string]any{"path": "f.txt", "content": content}}
}

// TestAFileThatIsNoPlainFileNeverHoldsAPreviewOrARun attacks the demo
// write_file's preview and its run-time check through the executor's
// endpoint and the bus: a FIFO in the sandbox (whose open waits for a
// writer forever) and a huge sparse file (whose hash takes minutes) each
// get an answer within executor.preview_timeout saying why there is no
// preview, and an approved write whose file became a FIFO ends failed,
// unrun, instead of holding an executor worker forever.
func TestAFileThatIsNoPlainFileNeverHoldsAPreviewOrARun(t *testing.T) {
	e := newTestEnv(t, func(c *config.Config) { c.Executor.PreviewTimeout = 300 * time.Millisecond })
	e.startExecutor(executor.RegistryFile{})
	sandbox := e.cfg.SandboxDir()
	if err := os.MkdirAll(sandbox, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(sandbox, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(sandbox, "sparse.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(64 << 30); err != nil {
		t.Fatalf("this file system cannot hold a 64 GiB sparse file (%v): run the tests with TMPDIR on one that can (ext4, xfs, tmpfs)", err)
	}
	sparse.Close()
	api := executorapi.New(e.deps.NC)
	for _, tc := range []struct{ name, path, why string }{
		{"a_fifo_is_refused_at_once", "pipe", "not a regular file"},
		{"a_huge_file_is_given_up_at_the_deadline", "sparse.img", "did not finish within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := api.Preview(context.Background(), toolCall(t, "p1", "demo__write_file", map[string]any{"path": tc.path, "content": "x"}), 5*time.Second)
			if err != nil || !strings.Contains(p.GetUnavailable(), tc.why) {
				t.Fatalf("preview %v, %v: want no preview because %q", p, err, tc.why)
			}
		})
	}
	t.Run("an_approved_write_whose_file_became_a_fifo_fails_unrun", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(sandbox, "swap.txt"), []byte("seen\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		call := toolCall(t, "swap", "demo__write_file", map[string]any{"path": "swap.txt", "content": "approved\n"})
		p, err := api.Preview(context.Background(), call, 5*time.Second)
		if err != nil || !preview.Has(p) {
			t.Fatalf("preview %v, %v", p, err)
		}
		if err := os.Remove(filepath.Join(sandbox, "swap.txt")); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(sandbox, "swap.txt"), 0o600); err != nil {
			t.Fatal(err)
		}
		e.approveAgainst(call, p)
		if f := e.end("swap").GetFailed(); f == nil || f.Reason != executor.ReasonPrecondition || !strings.Contains(f.Message, "not a regular file") {
			t.Fatalf("call ended %v, want failed %s because the file is not a regular file", e.end("swap"), executor.ReasonPrecondition)
		}
	})
}

// TestOneAgentsSlowPreviewsLeaveOtherAgentsTheirs attacks the executor's
// preview slots (maxPreviews at once): agent bot asks for more previews
// than there are slots from a tool whose preview endpoint hangs; agent
// other's preview of a demo write is still answered at once, with its
// diff, while bot's hang.
func TestOneAgentsSlowPreviewsLeaveOtherAgentsTheirs(t *testing.T) {
	hang := make(chan struct{})
	asked := make(chan struct{}, 64)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hooks.Close()
	defer close(hang)
	e := newTestEnv(t, func(c *config.Config) { c.Executor.PreviewTimeout = 20 * time.Second })
	e.startExecutor(executor.RegistryFile{Servers: map[string]executor.ServerEntry{"hook": {
		Webhook: &executor.WebhookConfig{URL: hooks.URL, Secret: testSecret},
		Tools:   map[string]executor.ToolEntry{"slow": {PreviewURL: hooks.URL + "/slow/preview"}},
	}}})
	api := executorapi.New(e.deps.NC)
	answered := make(chan *airlockv1.Preview, 40)
	for i := range 40 {
		go func() {
			p, _ := api.Preview(context.Background(), toolCall(t, fmt.Sprint("slow", i), "hook__slow", map[string]any{"n": i}), 30*time.Second)
			answered <- p
		}()
	}
	// Wait until bot holds what it can: every slot it may have hangs and
	// the rest of its previews are answered (or, without a share per
	// agent, every slot hangs).
	hanging, refused := 0, 0
	for hanging < 16 && hanging+refused < 40 {
		select {
		case <-asked:
			hanging++
		case <-answered:
			refused++
		case <-time.After(10 * time.Second):
			t.Fatalf("bot's previews: %d hanging, %d answered", hanging, refused)
		}
	}
	call := toolCall(t, "mine", "demo__write_file", map[string]any{"path": "mine.txt", "content": "hello\n"})
	call.AgentId = "other"
	p, err := api.Preview(context.Background(), call, 5*time.Second)
	if err != nil || !strings.Contains(p.GetText(), "+hello") {
		t.Fatalf("other's preview while bot's hang: %v, %v", p, err)
	}
}

// worldHook is a webhook tool whose preview endpoint answers the state it
// is set to, and which records the calls it ran.
type worldHook struct {
	*httptest.Server
	mu     sync.Mutex
	answer string // the preview endpoint's body; "" answers 500
	ran    map[string]bool
}

func newWorldHook(t *testing.T) *worldHook {
	h := &worldHook{ran: map[string]bool{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.Header.Get(executor.HeaderPreview) != "1" {
			h.ran[r.Header.Get(executor.HeaderCallID)] = true
			fmt.Fprint(w, `{"ok":true}`)
			return
		}
		if h.answer == "" {
			http.Error(w, "the preview endpoint is down", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, h.answer)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *worldHook) set(answer string) {
	h.mu.Lock()
	h.answer = answer
	h.mu.Unlock()
}

func (h *worldHook) hasRun(call string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ran[call]
}

// TestTheRunTimeCheckRefusesEveryChangeToTheWorldItsReviewersSaw takes a
// preview through the executor's endpoint, changes the world (or not) in
// each way a tool's precondition can see, approves the call against the
// preview and reads how it ended: an unchanged world runs the tool, every
// change ends the call failed, precondition_failed, unrun, saying what
// changed.
func TestTheRunTimeCheckRefusesEveryChangeToTheWorldItsReviewersSaw(t *testing.T) {
	hook := newWorldHook(t)
	e := newTestEnv(t, nil)
	e.startExecutor(executor.RegistryFile{Servers: map[string]executor.ServerEntry{"hook": {
		Webhook: &executor.WebhookConfig{URL: hook.URL, Secret: testSecret},
		Tools:   map[string]executor.ToolEntry{"pay": {PreviewURL: hook.URL + "/pay/preview"}},
	}}})
	sandbox := e.cfg.SandboxDir()
	if err := os.MkdirAll(sandbox, 0o700); err != nil {
		t.Fatal(err)
	}
	api := executorapi.New(e.deps.NC)
	// sha names a file state as the refusal does: the start of its digest.
	sha := func(content string) string {
		return "a file with sha256 " + strings.TrimPrefix(preview.FileState([]byte(content), true), "sha256:")[:12] + "…"
	}
	large := strings.Repeat("a line of a large file, past the part a preview diffs\n", 40_000) // > 1 MiB
	largeEdited := large[:len(large)-2] + "!\n"
	const refusedChanged = "the world changed since the reviewer looked: the preview they approved was made against "
	const refusedUncheckable = "the executor could not check that the world is still as the reviewer saw it in the preview ("
	for _, tc := range []struct {
		name    string
		webhook bool
		// before sets the world the preview is made against; change
		// alters it between the preview and the approval.
		before, change func(t *testing.T, file string)
		// why is what the refusal says, "" for a call that runs.
		why string
	}{
		{name: "an_unchanged_file_runs",
			before: func(t *testing.T, f string) { writeTestFile(t, f, "seen\n") }},
		{name: "a_file_written_again_with_the_same_content_runs",
			before: func(t *testing.T, f string) { writeTestFile(t, f, "seen\n") },
			change: func(t *testing.T, f string) {
				writeTestFile(t, f, "seen\n")
				if err := os.Chtimes(f, time.Now().Add(time.Hour), time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a_file_still_absent_runs"},
		{name: "an_edited_file_is_refused",
			before: func(t *testing.T, f string) { writeTestFile(t, f, "seen\n") },
			change: func(t *testing.T, f string) { writeTestFile(t, f, "edited\n") },
			why:    refusedChanged + sha("seen\n") + ", which is now " + sha("edited\n")},
		{name: "a_removed_file_is_refused",
			before: func(t *testing.T, f string) { writeTestFile(t, f, "seen\n") },
			change: func(t *testing.T, f string) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			},
			why: refusedChanged + sha("seen\n") + ", which is now no file"},
		{name: "a_file_created_where_there_was_none_is_refused",
			change: func(t *testing.T, f string) { writeTestFile(t, f, "theirs\n") },
			why:    refusedChanged + "no file, which is now " + sha("theirs\n")},
		{name: "an_edit_past_the_part_of_a_large_file_a_preview_reads_is_refused",
			before: func(t *testing.T, f string) { writeTestFile(t, f, large) },
			change: func(t *testing.T, f string) { writeTestFile(t, f, largeEdited) },
			why:    refusedChanged + sha(large) + ", which is now " + sha(largeEdited)},
		{name: "a_file_replaced_by_a_directory_is_refused",
			before: func(t *testing.T, f string) { writeTestFile(t, f, "seen\n") },
			change: func(t *testing.T, f string) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(f, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			why: refusedUncheckable},
		{name: "an_endpoint_answering_the_same_token_runs", webhook: true,
			before: func(*testing.T, string) { hook.set(`{"preview":"charge 12 EUR","precondition":"balance-v7"}`) }},
		{name: "an_endpoint_answering_another_token_is_refused", webhook: true,
			before: func(*testing.T, string) { hook.set(`{"preview":"charge 12 EUR","precondition":"balance-v7"}`) },
			change: func(*testing.T, string) { hook.set(`{"preview":"charge 12 EUR","precondition":"balance-v8"}`) },
			why:    refusedChanged + `"balance-v7", which is now "balance-v8"`},
		{name: "an_endpoint_answering_another_text_without_a_token_is_refused", webhook: true,
			before: func(*testing.T, string) { hook.set(`"charge 12 EUR"`) },
			change: func(*testing.T, string) { hook.set(`"charge 13 EUR"`) },
			why:    refusedChanged + "a dry run answering " + strings.TrimPrefix(preview.OfText("charge 12 EUR"), "preview:")[:12]},
		{name: "an_endpoint_that_fails_is_refused", webhook: true,
			before: func(*testing.T, string) { hook.set(`"charge 12 EUR"`) },
			change: func(*testing.T, string) { hook.set("") },
			why:    refusedUncheckable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, "_", "-")
			file := filepath.Join(sandbox, id+".txt")
			call := toolCall(t, id, "demo__write_file", map[string]any{"path": id + ".txt", "content": "approved\n"})
			if tc.webhook {
				call = toolCall(t, id, "hook__pay", map[string]any{"amount": 12})
			}
			if tc.before != nil {
				tc.before(t, file)
			}
			p, err := api.Preview(context.Background(), call, 10*time.Second)
			if err != nil || !preview.Has(p) {
				t.Fatalf("preview %v, %v", p, err)
			}
			if tc.change != nil {
				tc.change(t, file)
			}
			e.approveAgainst(call, p)
			end := e.end(id)
			// The end is stored after the tool returned, so whether the
			// tool ran is known by now.
			ran := hook.hasRun(id)
			if !tc.webhook {
				b, _ := os.ReadFile(file)
				ran = string(b) == "approved\n"
			}
			if tc.why == "" {
				if end.GetCompleted() == nil || !ran {
					t.Fatalf("call ended %v, tool ran %v: want it completed", end, ran)
				}
				return
			}
			f := end.GetFailed()
			if f == nil || f.Reason != executor.ReasonPrecondition || f.Outcome != calls.FailureError || !strings.Contains(f.Message, tc.why) ||
				!strings.Contains(f.Message, "so the call was not run") || ran {
				t.Fatalf("call ended %v, tool ran %v: want it failed %s, unrun, saying %q", end, ran, executor.ReasonPrecondition, tc.why)
			}
		})
	}
}

// dryRunWorld is an MCP server of the go-sdk over streamable HTTP with one
// tool, pay, and its companion dry run, pay_dry_run, which answers the
// world as it is set: text parts, structured content alone, an error, or
// nothing until its call ends. It counts the times pay ran and keeps the
// arguments of each dry run.
type dryRunWorld struct {
	*httptest.Server
	mcp   *mcp.Server
	stop  chan struct{} // closed at cleanup: a hanging dry run returns
	mu    sync.Mutex
	parts []string // the dry run's text
	// structured, when set, is the dry run's answer: structured content
	// without content, which a preview shows as the result's JSON.
	structured map[string]any
	failing    string   // when set, the dry run answers isError with it
	hang       bool     // the dry run answers nothing until its call ends
	down       bool     // the server answers every request 503
	dryRuns    []string // each dry run's arguments, as JSON
	ran        int
}

func newDryRunWorld(t testing.TB) *dryRunWorld {
	t.Helper()
	w := &dryRunWorld{stop: make(chan struct{})}
	w.mcp = mcp.NewServer(&mcp.Implementation{Name: "world", Version: "1"}, nil)
	object := map[string]any{"type": "object"}
	w.mcp.AddTool(&mcp.Tool{Name: "pay", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w.mu.Lock()
		w.ran++
		w.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
	})
	w.mcp.AddTool(&mcp.Tool{Name: "pay_dry_run", InputSchema: object}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w.mu.Lock()
		w.dryRuns = append(w.dryRuns, string(req.Params.Arguments))
		parts, structured, failing, hang := w.parts, w.structured, w.failing, w.hang
		w.mu.Unlock()
		if hang {
			select {
			case <-ctx.Done():
			case <-w.stop:
			}
			return nil, errors.New("the dry run gave up")
		}
		res := &mcp.CallToolResult{IsError: failing != "", StructuredContent: structured}
		if failing != "" {
			parts = []string{failing}
		}
		for _, p := range parts {
			res.Content = append(res.Content, &mcp.TextContent{Text: p})
		}
		return res, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return w.mcp }, nil)
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		down := w.down
		w.mu.Unlock()
		if down {
			http.Error(rw, "the world's server is down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(func() {
		close(w.stop)
		w.CloseClientConnections() // the session's stream of server messages stays open otherwise
		w.Close()
	})
	return w
}

// with changes the world under its lock.
func (w *dryRunWorld) with(change func(*dryRunWorld)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(w)
}

// TestTheRunTimeCheckAsksAnMCPDryRunToolAgain drives the run-time world
// check through a real MCP server's dry-run tool: a preview through the
// executor's endpoint, the world changed (or not) in each way the check
// must catch, the call approved against the preview. An unchanged answer
// runs the tool, once the dry run was asked again with the call's
// arguments; every change, and every dry run that cannot answer, ends the
// call failed, precondition_failed, unrun, saying why.
func TestTheRunTimeCheckAsksAnMCPDryRunToolAgain(t *testing.T) {
	e := newTestEnv(t, nil)
	seen := []string{"charge 12 EUR to card 4242", "balance before: 100 EUR"}
	long := strings.Repeat("a line of a long dry run, past the part a preview shows\n", e.cfg.Executor.MaxPreviewBytes/50)
	// answering names a dry run's answer as the refusal does.
	answering := func(parts ...string) string {
		return "a dry run answering " + strings.TrimPrefix(preview.OfText(strings.Join(parts, "\n")), "preview:")[:12] + "…"
	}
	const refusedChanged = "the world changed since the reviewer looked: the preview they approved was made against "
	const refusedUncheckable = "the executor could not check that the world is still as the reviewer saw it in the preview (dry-run tool pay_dry_run: "
	cases := []struct {
		name string
		// seen is the dry run's answer when the preview is made (the
		// test's seen when nil and there is no structured answer);
		// change alters the world before the approval.
		seen       []string
		structured map[string]any
		change     func(*dryRunWorld)
		// why is what the refusal says, "" for a call that runs.
		why string
	}{
		{name: "an_unchanged_answer_runs"},
		{name: "the_same_answer_given_again_runs",
			change: func(w *dryRunWorld) { w.parts = slices.Clone(seen) }},
		{name: "another_answer_is_refused",
			change: func(w *dryRunWorld) { w.parts = []string{seen[0], "balance before: 88 EUR"} },
			why:    refusedChanged + answering(seen...) + ", which is now " + answering(seen[0], "balance before: 88 EUR")},
		{name: "an_answer_with_a_text_part_more_is_refused",
			change: func(w *dryRunWorld) { w.parts = append(slices.Clone(seen), "and a fee of 1 EUR") },
			why:    refusedChanged + answering(seen...) + ", which is now " + answering(append(slices.Clone(seen), "and a fee of 1 EUR")...)},
		{name: "a_change_past_the_part_of_a_long_answer_the_preview_shows_is_refused",
			seen:   []string{long},
			change: func(w *dryRunWorld) { w.parts = []string{long + "one line more"} },
			why:    refusedChanged + answering(long) + ", which is now " + answering(long+"one line more")},
		{name: "a_change_in_an_answer_of_structured_content_alone_is_refused",
			structured: map[string]any{"balance": 100},
			change:     func(w *dryRunWorld) { w.structured = map[string]any{"balance": 88} },
			why:        refusedChanged + "a dry run answering "},
		{name: "a_dry_run_answering_an_error_is_refused",
			change: func(w *dryRunWorld) { w.failing = "the ledger is locked" },
			why:    refusedUncheckable + "the ledger is locked)"},
		{name: "a_dry_run_tool_the_server_no_longer_has_is_refused",
			change: func(w *dryRunWorld) { w.mcp.RemoveTools("pay_dry_run") },
			why:    refusedUncheckable},
		{name: "a_server_that_no_longer_answers_is_refused",
			change: func(w *dryRunWorld) { w.down = true },
			why:    refusedUncheckable},
		{name: "a_dry_run_that_does_not_answer_in_time_is_refused",
			change: func(w *dryRunWorld) { w.hang = true },
			why:    "pay_dry_run: context deadline exceeded), so the call was not run"},
	}
	// Each case has a server of its own, so that one taken down or
	// left without its dry run changes no other case's world.
	worlds := make([]*dryRunWorld, len(cases))
	servers := map[string]executor.ServerEntry{}
	for i := range cases {
		worlds[i] = newDryRunWorld(t)
		servers[fmt.Sprintf("world%d", i)] = executor.ServerEntry{MCP: &executor.MCPConfig{URL: worlds[i].URL},
			Tools: map[string]executor.ToolEntry{"pay": {PreviewTool: "pay_dry_run"}}}
	}
	e.startExecutor(executor.RegistryFile{Servers: servers})
	api := executorapi.New(e.deps.NC)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, id := worlds[i], fmt.Sprintf("dry-run-%d", i)
			answer := seen
			if tc.seen != nil || tc.structured != nil {
				answer = tc.seen
			}
			w.with(func(w *dryRunWorld) { w.parts, w.structured = answer, tc.structured })
			call := toolCall(t, id, fmt.Sprintf("world%d__pay", i), map[string]any{"amount": 12, "card": "4242"})
			p, err := api.Preview(context.Background(), call, 10*time.Second)
			if err != nil || !preview.Has(p) {
				t.Fatalf("preview %v, %v", p, err)
			}
			whole := strings.Join(answer, "\n")
			if tc.structured != nil {
				if whole = p.Text; !strings.Contains(whole, `"structuredContent":{"balance":100}`) {
					t.Fatalf("preview %q: want the dry run's result as JSON", whole)
				}
			}
			if p.Precondition != preview.OfText(whole) || p.Truncated != (len(whole) > e.cfg.Executor.MaxPreviewBytes) {
				t.Fatalf("preview %.80q… (cut %v), precondition %s: want the dry run's answer and its digest", p.Text, p.Truncated, p.Precondition)
			}
			if tc.change != nil {
				w.with(tc.change)
			}
			e.approveAgainst(call, p)
			end := e.end(id)
			e.settled()
			w.mu.Lock()
			ran, dryRuns := w.ran, slices.Clone(w.dryRuns)
			w.mu.Unlock()
			if tc.why == "" {
				if end.GetCompleted() == nil || ran != 1 {
					t.Fatalf("call ended %v, tool ran %d times: want it completed, run once", end, ran)
				}
				if want := `{"amount":12,"card":"4242"}`; len(dryRuns) != 2 || dryRuns[0] != want || dryRuns[1] != want {
					t.Fatalf("dry runs with %q: want the preview's and the run-time check's, each with %s", dryRuns, want)
				}
				if got := e.types(id); strings.Join(got, ",") != "approved,started,completed" {
					t.Fatalf("events %v", got)
				}
				return
			}
			f := end.GetFailed()
			if f == nil || f.Reason != executor.ReasonPrecondition || f.Outcome != calls.FailureError || !strings.Contains(f.Message, tc.why) ||
				!strings.Contains(f.Message, "so the call was not run") || ran != 0 {
				t.Fatalf("call ended %v, tool ran %d times: want it failed %s, unrun, saying %q", end, ran, executor.ReasonPrecondition, tc.why)
			}
			if got := e.types(id); strings.Join(got, ",") != "approved,started,failed" {
				t.Fatalf("events %v, want approved, started, failed (one end in the ledger)", got)
			}
		})
	}
}

// BenchmarkAnMCPDryRunsPrecondition measures the run-time world check of a
// tool whose preview is an MCP dry run (a go-sdk server over streamable
// HTTP, in this process: its CPU counts too), for a short answer and for
// one past what a preview shows.
func BenchmarkAnMCPDryRunsPrecondition(b *testing.B) {
	for _, size := range []int{100, 40 << 10} {
		b.Run(fmt.Sprintf("%d_bytes", size), func(b *testing.B) {
			w := newDryRunWorld(b)
			w.parts = []string{strings.Repeat("x", size)}
			reg, err := executor.NewRegistry(executor.RegistryFile{Servers: map[string]executor.ServerEntry{"world": {
				MCP: &executor.MCPConfig{URL: w.URL}, Tools: map[string]executor.ToolEntry{"pay": {PreviewTool: "pay_dry_run"}}}}},
				executor.RegistryOptions{Sandbox: b.TempDir(), Config: config.Default().Executor})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { reg.Close() })
			req := executor.Request{Server: "world", Tool: "pay", Arguments: map[string]any{"amount": 12}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Precondition(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
