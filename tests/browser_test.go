package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

const chromiumPath = "/usr/bin/chromium"

// browserContext starts headless Debian Chromium with a fresh profile and
// collects console errors (a Content-Security-Policy violation shows there).
// browserTmp is a short temporary directory removed when t ends.
func browserTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func browserContext(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium not found at %s: run `go tool task test:deps`", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium makes a directory for its singleton socket under TMPDIR
		// and removes it only when it exits cleanly: one killed browser left
		// one in /tmp for good. A short dir of the test's own (a socket's
		// path must fit in 108 bytes, which a t.TempDir under a long test
		// name does not), removed after the browser has exited.
		chromedp.Env("TMPDIR=" + browserTmp(t)),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	// The allocator's cancel waits for the browser to exit (and removes its
	// profile) before the test's directories are removed.
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })

	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// screenshot keeps a full-page PNG under tests/artifacts/.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 means PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	saveArtifact(t, name, buf)
}

// saveArtifact writes a PNG under tests/artifacts/.
func saveArtifact(t *testing.T, name string, buf []byte) {
	t.Helper()
	dir := "artifacts"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	// Each step gets its own deadline, derived from the context that
	// started the browser (a deadline on that first context would bound the
	// browser's whole life).
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		screenshot(t, ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// TestConsoleInBrowser drives the real console in headless Chromium against
// `airlock dev` (policy, approval, executor and console all real): a
// reviewer signs in, sees calls arrive live, edits and approves one (the
// agent gets the result of the edited call), rejects another (the agent
// gets the reason), cancels a third (it never runs; the agent reads the
// cancel and its reason), and watches a call decided elsewhere disappear.
func TestConsoleInBrowser(t *testing.T) {
	ctx, problems := browserContext(t)
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	user, password := adminLogin(t, dev)
	token := adminToken(t, dev)

	agent := dev.Agent(t, "browser-bot")
	sdkCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Sign in.
	do(t, ctx, "sign in",
		chromedp.Navigate(dev.HTTPURL+"/"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("user"), user),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)),
	)
	screenshot(t, ctx, "01-inbox-empty")

	// A call submitted through the SDK appears in the open inbox without reload.
	evil := "<script>alert('pwned')</script>"
	submitted := time.Now()
	id1, err := agent.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Reason: "save the user's notes " + evil,
		Args: map[string]any{"path": "notes.txt", "content": evil}})
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "see the call arrive live", chromedp.WaitVisible(chromedp.ID("call-11-browser-bot-"+id1)))
	t.Logf("submit → row visible in the open inbox: %s", time.Since(submitted).Round(time.Millisecond))
	if title := value(t, ctx, chromedp.Title()); !strings.HasPrefix(title, "(1) Inbox") {
		t.Fatalf("page title %q does not count the pending call", title)
	}
	screenshot(t, ctx, "02-inbox-live-call")

	// Open it: the agent's text shows as text, no script element was added.
	do(t, ctx, "open the call",
		chromedp.Click(chromedp.CSS("#call-11-browser-bot-"+id1+" a.call-link")),
		chromedp.WaitVisible(chromedp.ID("args")),
	)
	argsText := value(t, ctx, chromedp.Text(chromedp.ID("args")))
	scripts := value(t, ctx, chromedp.Evaluate[int](`document.scripts.length`))
	if !strings.Contains(argsText, evil) || scripts != 1 {
		t.Fatalf("arguments shown as %q with %d script elements", argsText, scripts)
	}
	if reason := value(t, ctx, chromedp.Text(chromedp.ID("agent-reason"))); !strings.Contains(reason, evil) {
		t.Fatalf("the agent's reason shows as %q", reason)
	}
	screenshot(t, ctx, "03-call-page")

	// Edit an argument and approve.
	edited := `{"path": "notes.txt", "content": "edited by the reviewer"}`
	do(t, ctx, "edit and approve",
		chromedp.Click(chromedp.ID("act-edit")),
		chromedp.WaitVisible(chromedp.ID("edit-arguments")),
		chromedp.SetValue(chromedp.ID("edit-arguments"), edited),
		chromedp.Click(chromedp.ID("confirm-edit")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if flash := value(t, ctx, chromedp.Text(chromedp.ID("flash"))); !strings.Contains(flash, "approved") {
		t.Fatalf("after approving, the page says %q", flash)
	}
	screenshot(t, ctx, "04-approved-with-edit")

	// The SDK's Await returns the completed result of the edited call.
	out, err := agent.Await(sdkCtx, id1)
	if err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("await %s: %+v %v", id1, out, err)
	}
	var result struct {
		Bytes int    `json:"bytes"`
		Path  string `json:"path"`
	}
	if err := json.Unmarshal(out.Result, &result); err != nil || result.Bytes != len("edited by the reviewer") {
		t.Fatalf("the tool did not run the edited arguments: result %s (%v)", out.Result, err)
	}

	// Reject another with a reason; the agent receives it.
	id2, err := agent.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "../etc/passwd", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "reject with a reason",
		chromedp.Navigate(dev.HTTPURL+"/"),
		chromedp.WaitVisible(chromedp.ID("call-11-browser-bot-"+id2)),
		chromedp.Click(chromedp.CSS("#call-11-browser-bot-"+id2+" a.call-link")),
		chromedp.WaitVisible(chromedp.ID("act-reject")),
		chromedp.Click(chromedp.ID("act-reject")),
		chromedp.WaitVisible(chromedp.ID("reject-reason")),
		chromedp.SendKeys(chromedp.ID("reject-reason"), "writing outside the sandbox is not allowed"),
		chromedp.Click(chromedp.ID("confirm-reject")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	screenshot(t, ctx, "05-rejected")
	out2, err := agent.Await(sdkCtx, id2)
	if err != nil || out2.Status != airlock.StatusRejected || out2.Reason != "writing outside the sandbox is not allowed" {
		t.Fatalf("await %s: %+v %v", id2, out2, err)
	}

	// Cancel another: the call never runs, the agent reads the cancel and
	// the reason, which the page shows as the text typed.
	id5, err := agent.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "withdrawn.txt", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id5)
	why := `<b id="typed">not needed</b> & "done"`
	do(t, ctx, "cancel with a reason",
		chromedp.Navigate(dev.HTTPURL+"/calls/browser-bot/"+id5),
		chromedp.WaitVisible(chromedp.ID("act-cancel")),
		chromedp.Click(chromedp.ID("act-cancel")),
		chromedp.WaitVisible(chromedp.ID("cancel-reason")),
		chromedp.SendKeys(chromedp.ID("cancel-reason"), why),
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if flash := value(t, ctx, chromedp.Text(chromedp.ID("flash"))); !strings.Contains(flash, "canceled") {
		t.Fatalf("after canceling, the page says %q", flash)
	}
	if shown, injected := value(t, ctx, chromedp.Text(chromedp.ID("decided-by"))), value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#typed").length`)); !strings.Contains(shown, why) || injected != 0 {
		t.Fatalf("the page shows the cancel as %q with %d element(s) made from the reason", shown, injected)
	}
	if present := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#act-cancel").length`)); present != 0 {
		t.Fatalf("the canceled call's page still offers a cancel")
	}
	screenshot(t, ctx, "05b-canceled")
	out5, err := agent.Await(sdkCtx, id5)
	if err != nil || out5.Status != airlock.StatusCanceled || out5.Reason != why {
		t.Fatalf("await %s: %+v %v", id5, out5, err)
	}
	_, js := dev.Admin(t)
	if started, completed := testenv.Runs(t, js, "browser-bot", id5); started != 0 || completed != 0 {
		t.Fatalf("the canceled call started %d and completed %d times", started, completed)
	}

	// A call decided elsewhere (here: the REST API, as the CLI does) leaves
	// the open inbox without a reload.
	do(t, ctx, "open the inbox",
		chromedp.Navigate(dev.HTTPURL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)),
	)
	id3, err := agent.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "other.txt", "content": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "see the third call arrive", chromedp.WaitVisible(chromedp.ID("call-11-browser-bot-"+id3)))
	waitPending(t, dev, token, id3)
	if status, body := apiPost(t, dev.HTTPURL+"/api/v1/approvals/browser-bot/"+id3+"/approve", token, `{}`); status != 200 {
		t.Fatalf("approve over the API: %d %s", status, body)
	}
	do(t, ctx, "see the call leave", chromedp.WaitNotPresent(chromedp.ID("call-11-browser-bot-"+id3)))
	if title := value(t, ctx, chromedp.Title()); !strings.HasPrefix(title, "(0) Inbox") {
		t.Fatalf("page title %q after the last call left", title)
	}
	screenshot(t, ctx, "06-decided-elsewhere")

	// "Always allow" from a pending call: the grant form comes pre-filled
	// with the agent, the tool and the call's arguments; once created, the
	// next identical call runs without asking anyone.
	args := map[string]any{"path": "daily.txt", "content": "report"}
	id4, err := agent.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id4)
	do(t, ctx, "open the always-allow form",
		chromedp.Navigate(dev.HTTPURL+"/calls/browser-bot/"+id4),
		chromedp.Click(chromedp.ID("act-always")),
		chromedp.WaitVisible(chromedp.ID("grant-form")),
	)
	if scope := value(t, ctx, chromedp.Text(chromedp.ID("grant-scope"))); !strings.Contains(scope, `/content is exactly "report" and /path is exactly "daily.txt" and no other argument is given`) {
		t.Fatalf("the grant form's scope reads %q", scope)
	}
	screenshot(t, ctx, "07-always-allow-form")
	do(t, ctx, "create the grant",
		chromedp.Click(chromedp.ID("confirm-grant")),
		chromedp.WaitVisible(chromedp.ID("grants")),
	)
	if grants := value(t, ctx, chromedp.Text(chromedp.ID("grants"))); !strings.Contains(grants, "demo__write_file") || !strings.Contains(grants, `/path is exactly "daily.txt"`) {
		t.Fatalf("the grants page shows %q", grants)
	}
	screenshot(t, ctx, "08-grants")
	again, err := agent.Do(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: args})
	if err != nil || again.Status != airlock.StatusCompleted {
		t.Fatalf("the identical call after the grant: %+v %v", again, err)
	}

	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// echoCalls makes workers × each auto-allowed demo__echo calls of bot,
// four events each in the audit trail, and waits for them all.
func echoCalls(t *testing.T, ctx context.Context, bot *airlock.Client, workers, each int) {
	t.Helper()
	w, err := bot.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := w.DoFast(ctx, airlock.Call{Tool: "demo__echo", Args: map[string]any{"n": g*each + i}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// noOverflow fails the test when the open page is wider than the window.
func noOverflow(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	if over := value(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); over > 0 {
		t.Errorf("%s is %d px wider than the window", where, over)
	}
}
