package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/preview"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAWriteIsApprovedAgainstItsPreview runs `airlock dev` with the demo
// tools and a webhook tool whose preview endpoint never answers: a
// demo__write_file waits with the diff against the file as it is now
// (shown by `airlock approvals show`), is approved and runs; one whose
// file changes between the preview and the approval ends failed, unrun,
// saying the world changed; the webhook call waits with "no preview" after
// approval.preview_timeout and is still decided and run.
func TestAWriteIsApprovedAgainstItsPreview(t *testing.T) {
	hung := make(chan struct{})
	published := make(chan struct{}, 1)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Airlock-Preview") == "1" {
			select { // a preview that never comes
			case <-hung:
			case <-r.Context().Done():
			}
			return
		}
		published <- struct{}{}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer hooks.Close()
	defer close(hung)

	dataDir, dir := t.TempDir(), t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf("servers:\n  blog:\n    webhook: {url: %q, secret: s3cret}\n    tools:\n      publish_post: {preview_url: %q}\n", hooks.URL, hooks.URL+"/publish_post/preview"))
	cfg := filepath.Join(dir, "airlock.yaml")
	writeFile(t, cfg, fmt.Sprintf("approval:\n  groups: {reviewers: [alice, bob]}\n  preview_timeout: 700ms\nexecutor:\n  tools_file: %s\n", tools))
	sandbox := filepath.Join(dataDir, "sandbox")
	if err := os.MkdirAll(sandbox, 0o700); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(sandbox, "plan.txt")
	writeFile(t, plan, "step one\nstep two\n")

	dev := startDev(t, dataDir, 0, "", "AIRLOCK_CONFIG="+cfg)
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	_, js := dev.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	approve := func(t *testing.T, id string) {
		t.Helper()
		if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Kind: approveKind, Principal: apprReviewer("bob")}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the_diff_is_shown_and_the_approved_call_runs", func(t *testing.T) {
		if _, err := agent.Submit(ctx, airlock.Call{ID: "w1", Tool: writeTool, Args: map[string]any{"path": "plan.txt", "content": "step one\nstep 2\n"}}); err != nil {
			t.Fatal(err)
		}
		rec := apprWaitPending(t, api, "w1")
		p := rec.GetPreview()
		if !preview.Has(p) || p.GetKind() != preview.KindDiff || !strings.Contains(p.GetText(), "-step two\n+step 2\n") ||
			p.GetPrecondition() != preview.FileState([]byte("step one\nstep two\n"), true) {
			t.Fatalf("the pending call's preview is %v", p)
		}
		out, err := exec.Command(airlockBinary(t), "approvals", "show", "bot/w1", "--api", dev.HTTPURL,
			"--token-file", filepath.Join(dev.DataDir, "admin.token")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "preview   diff +1 −1 lines, digest "+p.GetDigest()[:12]) || !strings.Contains(string(out), "+step 2") {
			t.Fatalf("approvals show: %v\n%s", err, out)
		}
		approve(t, "w1")
		res, err := agent.Await(ctx, "w1")
		if err != nil || res.Status != airlock.StatusCompleted {
			t.Fatalf("the approved write ended %+v %v", res, err)
		}
		if got := readFileString(t, plan); got != "step one\nstep 2\n" {
			t.Fatalf("plan.txt holds %q", got)
		}
		ev := testenv.WaitForEvent(t, js, "airlock.evt.bot.w1.>", "approved", 10*time.Second)
		if a := ev.GetApproved(); a.GetPreviewDigest() != p.GetDigest() || a.GetPrecondition() != p.GetPrecondition() {
			t.Fatalf("the approval records preview %q against %q, want %q against %q", a.GetPreviewDigest(), a.GetPrecondition(), p.GetDigest(), p.GetPrecondition())
		}
	})

	t.Run("a_file_changed_after_the_preview_fails_the_call_unrun", func(t *testing.T) {
		if _, err := agent.Submit(ctx, airlock.Call{ID: "w2", Tool: writeTool, Args: map[string]any{"path": "plan.txt", "content": "nobody saw this\n"}}); err != nil {
			t.Fatal(err)
		}
		apprWaitPending(t, api, "w2")
		writeFile(t, plan, "edited by a person meanwhile\n")
		approve(t, "w2")
		res, err := agent.Await(ctx, "w2")
		if err != nil || res.Status != airlock.StatusFailed || !strings.Contains(res.Reason, "the world changed since the reviewer looked") ||
			!strings.Contains(res.Reason, "approve it on the new preview") {
			t.Fatalf("the call ended %+v %v, want failed because the world changed", res, err)
		}
		if got := readFileString(t, plan); got != "edited by a person meanwhile\n" {
			t.Fatalf("the call ran against a file nobody saw: plan.txt holds %q", got)
		}
	})

	t.Run("a_preview_that_never_comes_says_no_preview_and_the_call_is_still_decided", func(t *testing.T) {
		start := time.Now()
		if _, err := agent.Submit(ctx, airlock.Call{ID: "post1", Tool: "blog__publish_post", Args: map[string]any{"title": "hello"}}); err != nil {
			t.Fatal(err)
		}
		rec := apprWaitPending(t, api, "post1")
		if preview.Has(rec.GetPreview()) || !strings.Contains(preview.Summary(rec.GetPreview()), "no preview") {
			t.Fatalf("the call's preview is %v, want none", rec.GetPreview())
		}
		t.Logf("pending with no preview %s after submitting", time.Since(start).Round(time.Millisecond))
		approve(t, "post1")
		res, err := agent.Await(ctx, "post1")
		if err != nil || res.Status != airlock.StatusCompleted {
			t.Fatalf("the call without a preview ended %+v %v", res, err)
		}
		select {
		case <-published:
		default:
			t.Fatal("the webhook tool was not called")
		}
	})
	dev.Interrupt(20 * time.Second)
}

// TestOnlyTheExecutorAnswersPreviewsAndOnlyTheApprovalServiceAsks attacks
// the preview subject under the shipped permissions: an agent, the MCP
// gateway's user and the console's user can neither serve
// airlock.api.executor.preview (and so forge what reviewers see) nor ask
// it (and so read sandbox files through a diff); the preview stored with a
// pending call is the executor's.
func TestOnlyTheExecutorAnswersPreviewsAndOnlyTheApprovalServiceAsks(t *testing.T) {
	p := startProdLayout(t, "bot", "evil")
	url := p.nats.Server.URL()
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	const subj = "airlock.api.executor.preview"
	forged := []byte(`{"preview":{"kind":"text","text":"harmless, approve me","digest":"00"}}`)

	t.Run("an_agent_can_neither_serve_nor_ask_for_a_preview", func(t *testing.T) {
		if _, err := evil.nc.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(forged) }); err == nil {
			_ = evil.nc.Flush()
			evil.refused(subj)
		}
		if err := evil.request(subj, []byte(`{"call":{"agentId":"bot","callId":"x","server":"demo","tool":"write_file","arguments":{"path":"secret.txt","content":""}}}`)); err == nil {
			t.Fatal("an agent's preview request was answered")
		}
		evil.refused(subj)
	})
	for _, role := range []string{natsauth.RoleGateway, natsauth.RoleConsole} {
		t.Run("the_"+role+"_user_can_neither_serve_nor_ask_for_a_preview", func(t *testing.T) {
			nc, _ := p.nats.Connect(role)
			errs := make(chan error, 10)
			nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
			if _, err := nc.QueueSubscribe(subj, "executor", func(m *nats.Msg) { _ = m.Respond(forged) }); err != nil {
				t.Fatal(err)
			}
			_ = nc.Publish(subj, []byte(`{}`))
			_ = nc.Flush()
			seen := map[string]bool{}
			deadline := time.After(5 * time.Second)
			for !(seen["subscription"] && seen["publish"]) {
				select {
				case err := <-errs:
					if s := err.Error(); strings.Contains(s, "Permissions Violation") && strings.Contains(s, subj) {
						seen[map[bool]string{true: "subscription", false: "publish"}[strings.Contains(s, "Subscription")]] = true
					}
				case <-deadline:
					t.Fatalf("the %s user was not refused both serving and asking %s (refused: %v)", role, subj, seen)
				}
			}
		})
	}
	t.Run("the_stored_preview_is_the_executors", func(t *testing.T) {
		id := bot.mustSubmit(airlock.Call{ID: "pv", Tool: writeTool, Args: map[string]any{"path": "pv.txt", "content": "the real change\n"}})
		rec := waitApproval(t, p.frontend(t), "bot", id, 1, pendingState)
		pv := rec.GetPreview()
		if !preview.Has(pv) || pv.GetKind() != preview.KindDiff || !strings.Contains(pv.GetText(), "+the real change") || pv.GetPrecondition() != preview.Absent {
			t.Fatalf("the stored preview is %v, want the executor's diff", pv)
		}
	})
}
