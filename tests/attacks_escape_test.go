package tests

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Agent text never steers a terminal or a page (SPEC §10: every string an
// agent chose goes through one escaping function per medium wherever it is
// shown). An agent's reason holding ESC 8, ESC[J, ESC[H ESC[2J and a copy of
// the `airlock approvals show` screen redrew the reviewer's terminal: the
// reviewer saw harmless arguments and approved a write elsewhere. The CLI
// printed the reason and the timeline raw, and the console's timeline showed
// ESC, CR and U+202E as they were. What must hold: each string of the
// hostile corpus (escapetest.Corpus), as an agent's reason and argument and
// as a reviewer's reason, reaches no surface as itself — the CLI's record,
// list, timeline, outcome and audit table, the console's call page and
// inbox, and the CSV export — and draws no line of its own.
func TestAgentTextNeverSteersATerminalOrAPage(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	bot := dev.Agent(t, "bot")
	token := adminToken(t, dev)
	tokenFile := filepath.Join(dev.DataDir, "admin.token")

	type attack struct {
		escapetest.Hostile
		id string
	}
	var attacks []attack
	for i, h := range escapetest.Corpus {
		if !utf8.ValidString(h.Text) {
			continue // a protobuf string is UTF-8: the SDK cannot send it (the escape package's tests cover it)
		}
		id := mustSubmit(t, bot, airlock.Call{ID: fmt.Sprintf("hostile-%02d", i), Tool: writeTool, Reason: h.Text,
			Args: map[string]any{"path": "notes/todo.txt", "content": h.Text, "options": map[string]any{"note": h.Text}}})
		attacks = append(attacks, attack{h, id})
	}
	for _, a := range attacks {
		waitPending(t, dev, token, a.id)
	}
	// noRaw fails the test when out shows anything of the corpus as itself.
	noRaw := func(t *testing.T, where, out string) {
		t.Helper()
		if found := escapetest.Raw(out); len(found) > 0 {
			t.Errorf("%s shows raw %v:\n%q", where, found[:min(len(found), 5)], cutText(out, 600))
		}
	}
	page := func(t *testing.T, path string) string {
		t.Helper()
		status, body := bearerGet(t, dev.HTTPURL+path, token)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		return body
	}
	lineStart := regexp.MustCompile(`(?m)^(call|state|agent's reason|arguments) +`)

	t.Run("the reviewer's list", func(t *testing.T) {
		r := cli(t, dev, "approvals", "list", "--token-file", tokenFile)
		noRaw(t, "approvals list", r.Stdout+r.Stderr)
	})
	t.Run("the inbox", func(t *testing.T) {
		body := page(t, "/")
		noRaw(t, "the inbox page", body)
		if strings.Contains(body, `<script>alert("airlock")`) {
			t.Errorf("the inbox holds the agent's script as markup")
		}
	})
	for _, a := range attacks {
		t.Run(a.Name, func(t *testing.T) {
			r := cli(t, dev, "approvals", "show", "bot/"+a.id, "--token-file", tokenFile)
			if r.Code != 0 {
				t.Fatalf("approvals show: %+v", r)
			}
			noRaw(t, "approvals show", r.Stdout)
			// The record's own lines appear once each: the agent's text drew none.
			for _, m := range []string{"call", "state", "agent's reason", "arguments"} {
				n := 0
				for _, l := range lineStart.FindAllStringSubmatch(r.Stdout, -1) {
					if l[1] == m {
						n++
					}
				}
				if n != 1 {
					t.Errorf("approvals show prints %d lines starting %q, want 1:\n%s", n, m, cutText(r.Stdout, 1500))
				}
			}
			body := page(t, "/calls/bot/"+a.id)
			noRaw(t, "the console's call page", body)
			if strings.Contains(body, `<script>alert("airlock")`) || strings.Contains(body, `" onmouseover="alert(1)"`) {
				t.Errorf("the call page holds the agent's markup unescaped")
			}
		})
	}

	// A reviewer's words are treated the same: reject one call with each
	// string the command line can carry, then read the outcome as the agent's
	// developer does, the audit trail and the export.
	for _, a := range attacks {
		if strings.ContainsRune(a.Text, 0) {
			continue // no argv holds a NUL
		}
		if r := cli(t, dev, "approvals", "reject", "bot/"+a.id, "--reason", a.Text, "--token-file", tokenFile); r.Code != 0 {
			t.Fatalf("reject %s: %+v", a.id, r)
		}
	}
	t.Run("the coding agent's hook", func(t *testing.T) {
		dev.Agent(t, "hookbot")
		ch := startHook(t, hooks.Claude, shell(t, hooks.Claude, "make deploy", "toolu_hostile"),
			"--creds", dev.Creds("hookbot"), "--nats", dev.NATSURL, "--state-dir", t.TempDir(), "--wait", "60s")
		rec := pendingOf(t, dev.API(t), "hookbot", "claude__Bash", "make deploy")
		reason := escapetest.Corpus[0].Text + " " + "invoice\u202efdp.sh"
		if r := cli(t, dev, "approvals", "reject", "hookbot/"+rec.GetCall().GetCallId(), "--reason", reason, "--token-file", tokenFile); r.Code != 0 {
			t.Fatalf("reject the hook's call: %+v", r)
		}
		r := waitHook(t, ch)
		said, _ := r.field(t, "hookSpecificOutput.permissionDecisionReason").(string)
		if !strings.Contains(said, "tidying notes") {
			t.Fatalf("the hook's answer does not carry the reviewer's reason: %+v", r)
		}
		// Claude Code prints the reason it decodes from the JSON, and stderr.
		if found := escapetest.RawLine(said); len(found) > 0 {
			t.Errorf("the hook's reason shows raw %v: %q", found, said)
		}
		noRaw(t, "the hook's stderr", r.stderr)
	})
	t.Run("the agent's outcome", func(t *testing.T) {
		for _, a := range attacks[:3] {
			r := cli(t, dev, "await", "bot/"+a.id, "--wait", "20s")
			noRaw(t, "await "+a.id, r.Stdout+r.Stderr)
		}
	})
	t.Run("the timeline", func(t *testing.T) {
		for _, a := range attacks {
			r := cli(t, dev, "approvals", "show", "bot/"+a.id, "--token-file", tokenFile)
			noRaw(t, "approvals show of the decided "+a.id, r.Stdout)
			noRaw(t, "the console's page of the decided "+a.id, page(t, "/calls/bot/"+a.id))
		}
	})
	t.Run("the audit trail", func(t *testing.T) {
		var out string
		testenv.Eventually(t, 20*time.Second, "every rejection in the audit trail", func() bool {
			r := cli(t, dev, "audit", "query", "--agent", "bot", "--limit", "0")
			out = r.Stdout
			return strings.Count(out, "rejected") >= len(attacks)-1
		})
		noRaw(t, "audit query", out)
		rows := 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if regexp.MustCompile(`^\d+ +\d{4}-`).MatchString(l) {
				rows++
			}
		}
		if lines := strings.Count(strings.TrimSpace(out), "\n"); lines != rows+1 {
			t.Errorf("audit query prints %d lines for %d rows and its header: agent text drew lines of its own", lines, rows)
		}
	})
	t.Run("the CSV export", func(t *testing.T) {
		body := page(t, "/audit/export?format=csv&agent=bot")
		noRaw(t, "the CSV export", body)
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatalf("the export is not CSV: %v", err)
		}
		for _, row := range rows {
			for _, cell := range row {
				if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
					t.Errorf("the CSV export holds a cell a spreadsheet evaluates: %q", cutText(cell, 80))
				}
			}
		}
	})
}

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// The same corpus on a Slack card: as the agent's reason, an argument and
// the person it acts for, nothing an agent wrote is shown as itself (no
// control, bidi or zero-width character), and none of it is a mention, a
// link or mrkdwn formatting: outside code, the card holds no text of the
// agent's.
func TestAgentTextOnASlackCardIsInert(t *testing.T) {
	f, _, bot := slackAskLayout(t)
	code := regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	for i, h := range escapetest.Corpus {
		if !utf8.ValidString(h.Text) {
			continue
		}
		t.Run(h.Name, func(t *testing.T) {
			id := bot.mustSubmit(airlock.Call{ID: fmt.Sprintf("slack-hostile-%02d", i), Tool: writeTool, Reason: h.Text,
				OnBehalfOf: "dana " + strings.Map(func(r rune) rune {
					if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
						return -1 // on_behalf_of refuses controls at intake
					}
					return r
				}, cutText(h.Text, 100)),
				Args: map[string]any{"path": "notes/todo.txt", "content": h.Text}})
			card := f.posted(t, id)
			var blocks any
			if err := json.Unmarshal([]byte(card.Get("blocks")), &blocks); err != nil {
				t.Fatal(err)
			}
			for _, s := range slackTexts(blocks) {
				if found := escapetest.Raw(s); len(found) > 0 {
					t.Errorf("the card shows raw %v in %q", found, cutText(s, 300))
				}
				outside := code.ReplaceAllString(s, "")
				for _, m := range []string{"<!channel>", "<@U0ALICE>", "<!here>", "<http://evil", "*Approved*", "_alice_", "<script>", "~nobody~"} {
					if strings.Contains(outside, m) {
						t.Errorf("the card draws the agent's %q outside code: %q", m, cutText(s, 300))
					}
				}
			}
			if found := escapetest.Raw(card.Get("text")); len(found) > 0 {
				t.Errorf("the card's notification text shows raw %v", found)
			}
		})
	}
}

// slackTexts is every text of a card's blocks, mrkdwn and plain.
func slackTexts(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["text"].(string); ok && (x["type"] == "mrkdwn" || x["type"] == "plain_text") {
			out = append(out, s)
		}
		for _, e := range x {
			out = append(out, slackTexts(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, slackTexts(e)...)
		}
	}
	return out
}

// The gateway's elicitation is a prompt an MCP client may print on a
// terminal (Claude Code does): the corpus as a model's arguments reaches
// it with nothing shown as itself, each argument on its own line.
func TestAModelsArgumentsNeverSteerTheElicitationPrompt(t *testing.T) {
	g := startGatewayEnv(t)
	var mu sync.Mutex
	var asked []string
	cs := g.connect(t, "bot", clientOpts{version: "2025-11-25", elicit: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, r.Params.Message)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "decline"}, nil
	}})
	for i, h := range escapetest.Corpus {
		if !utf8.ValidString(h.Text) || len(h.Text) > 150 {
			continue // JSON-RPC carries UTF-8; a value a form cannot show whole is confirmed on the console page
		}
		t.Run(h.Name, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			callTool(t, cs, "fs__write_file", map[string]any{"path": filepath.Join(g.files, fmt.Sprintf("hostile-%02d.txt", i)), "content": h.Text, "note": h.Text})
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 {
				t.Fatalf("the person was asked %d times, want once", len(asked))
			}
			if found := escapetest.Raw(asked[0]); len(found) > 0 {
				t.Errorf("the prompt shows raw %v: %q", found, cutText(asked[0], 400))
			}
			if n := strings.Count(asked[0], "\n"); n > 8 {
				t.Errorf("the prompt has %d lines for 3 arguments: the model's text drew lines of its own:\n%s", n, asked[0])
			}
		})
	}
}
