package tests

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestApprovalsCLIDecidesCallsEndToEnd runs `airlock approvals` against
// `airlock dev` with the admin token dev wrote: list, show, approve (the
// tool runs), reject (the agent gets the reason), cancel (the call never
// runs; the agent reads the cancel), and a clear error for an unknown call.
func TestApprovalsCLIDecidesCallsEndToEnd(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	token := adminToken(t, dev)
	cli := func(args ...string) (string, error) {
		t.Helper()
		args = append(args, "--api", dev.HTTPURL, "--token-file", filepath.Join(dev.DataDir, "admin.token"))
		out, err := exec.Command(airlockBinary(t), append([]string{"approvals"}, args...)...).CombinedOutput()
		return string(out), err
	}

	agent := dev.Agent(t, "cli-bot")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	id, err := agent.Submit(ctx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "cli.txt", "content": "from the cli test"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id)

	out, err := cli("list")
	if err != nil || !strings.Contains(out, "cli-bot/"+id) || !strings.Contains(out, "demo__write_file") {
		t.Fatalf("approvals list: %v\n%s", err, out)
	}
	out, err = cli("show", "cli-bot/"+id)
	if err != nil || !strings.Contains(out, `"content": "from the cli test"`) || !strings.Contains(out, "state     pending") || !strings.Contains(out, "approval_requested") {
		t.Fatalf("approvals show: %v\n%s", err, out)
	}
	out, err = cli("approve", "cli-bot/"+id, "--comment", "fine")
	if err != nil || !strings.Contains(out, "approved") {
		t.Fatalf("approvals approve: %v\n%s", err, out)
	}
	res, err := agent.Await(ctx, id)
	if err != nil || res.Status != airlock.StatusCompleted {
		t.Fatalf("the approved call did not complete: %+v %v", res, err)
	}
	out, err = cli("approve", "cli-bot/"+id)
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(out, "nothing changed") {
		t.Fatalf("a second approval must say nothing changed and exit 1: %v\n%s", err, out)
	}

	// The host pаypal.com (a Cyrillic а) reads as paypal.com on a terminal,
	// the path g൦൦gle/no.txt (Malayalam zeros) as google/no.txt: show and
	// list say which letter passes for which.
	id2, err := agent.Submit(ctx, airlock.Call{Tool: "demo__write_file", Reason: "mirror pаypal.com", Args: map[string]any{"path": "g൦൦gle/no.txt", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id2)
	lookAlike := "Look-alike letters: the host pаypal.com mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is xn--pypal-4ve.com"
	digits := "Look-alike letters: the path g൦൦gle/no.txt mixes Latin letters and Malayalam digits: ൦ (U+0D66 MALAYALAM DIGIT ZERO) looks like o"
	if out, err := cli("show", "cli-bot/"+id2); err != nil || !strings.Contains(out, "\n(!)       "+lookAlike+"\n") || !strings.Contains(out, "\n(!)       "+digits+"\n") {
		t.Fatalf("approvals show of a call with look-alike letters: %v\n%s", err, out)
	}
	if out, err := cli("list"); err != nil || !strings.Contains(out, "\n(!) cli-bot/"+id2+": "+lookAlike+"\n") {
		t.Fatalf("approvals list of a call with look-alike letters: %v\n%s", err, out)
	}
	if out, err := cli("reject", "cli-bot/"+id2); err == nil || !strings.Contains(out, "--reason is required") {
		t.Fatalf("reject without a reason: %v\n%s", err, out)
	}
	if out, err := cli("reject", "cli-bot/"+id2, "--reason", "not from the CLI test"); err != nil {
		t.Fatalf("approvals reject: %v\n%s", err, out)
	}
	res, err = agent.Await(ctx, id2)
	if err != nil || res.Status != airlock.StatusRejected || res.Reason != "not from the CLI test" {
		t.Fatalf("the agent did not get the rejection: %+v %v", res, err)
	}

	// Cancel over the CLI: the reason is required, the call never runs,
	// the agent reads the cancel; a second cancel changes nothing.
	id3, err := agent.Submit(ctx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "withdrawn.txt", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id3)
	if out, err := cli("cancel", "cli-bot/"+id3); err == nil || !strings.Contains(out, "--reason is required") {
		t.Fatalf("cancel without a reason: %v\n%s", err, out)
	}
	if out, err := cli("cancel", "cli-bot/"+id3, "--reason", "not needed \x1b[2J any more"); err != nil || !strings.Contains(out, "cli-bot/"+id3+": canceled") {
		t.Fatalf("approvals cancel: %v\n%s", err, out)
	}
	res, err = agent.Await(ctx, id3)
	if err != nil || res.Status != airlock.StatusCanceled || res.Reason != "not needed \x1b[2J any more" {
		t.Fatalf("the agent did not read the cancel: %+v %v", res, err)
	}
	out, err = cli("cancel", "cli-bot/"+id3, "--reason", "again")
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(out, "already canceled; nothing changed") {
		t.Fatalf("a second cancel must say nothing changed and exit 1: %v\n%s", err, out)
	}
	if out, err := cli("show", "cli-bot/"+id3); err != nil || !strings.Contains(out, "decided   by admin (cli): not needed") || strings.Contains(out, "\x1b") {
		t.Fatalf("approvals show of the canceled call (the reason escaped for the terminal): %v\n%q", err, out)
	}
	_, js := dev.Admin(t)
	if started, completed := testenv.Runs(t, js, "cli-bot", id3); started != 0 || completed != 0 {
		t.Fatalf("the canceled call started %d and completed %d times", started, completed)
	}

	// An agent that cancels its own call is named as the agent, and its
	// reason stays on one line: it cannot pass for a person's decision.
	id4, err := agent.Submit(ctx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "superseded.txt", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id4)
	if err := agent.Cancel(ctx, id4, "superseded\ndecided   by admin (cli): approved"); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("show", "cli-bot/"+id4); err != nil || !strings.Contains(out, `decided   by cli-bot (agent): superseded\ndecided   by admin (cli): approved`) {
		t.Fatalf("approvals show of the call its agent canceled: %v\n%s", err, out)
	}

	out, err = cli("approve", "cli-bot/no_such_call")
	if err == nil || !strings.Contains(out, "(not_found)") {
		t.Fatalf("approving an unknown call: %v\n%s", err, out)
	}

	// The console's audit export (read from the events stream: no
	// ClickHouse here) names who approved over the CLI.
	req, _ := http.NewRequest(http.MethodGet, dev.HTTPURL+"/audit/export?format=csv&call="+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "approved") || !strings.Contains(string(body), "admin") || !strings.Contains(string(body), "cli") {
		t.Fatalf("audit export: %d\n%s", resp.StatusCode, body)
	}
}
