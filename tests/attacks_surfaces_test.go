package tests

// Attacks on the tool arguments, the audit trail and Slack (SPEC §6's
// hostile agent and an unlucky operator), each through the public surfaces
// with real credentials; each failed before its fix.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

// An allow rule that limits a tool by an argument glob ("write only under
// scratch/**", SPEC §4 policy: "allow fs__delete_file only under /tmp/**")
// refuses "." and ".." segments, split at "/". The demo tools read "\" as a
// separator too (the executor replaces it with "/" before cleaning the
// path), so `scratch/x\..\..\victim.txt` is one harmless-looking segment
// under scratch/ for the policy and `victim.txt`, outside scratch/, for the
// tool: the agent writes wherever it likes in the sandbox without anyone
// being asked. What must hold: a call the rule allows writes only where the
// rule allows, so this one is not auto-allowed and nothing outside scratch/
// is written.
func TestAnArgumentGlobAllowsNoPathThatTheToolResolvesOutsideIt(t *testing.T) {
	p := startProdLayout(t, "bot")
	bot := connectAgent(t, p.nats.CredentialFile("bot"), p.nats.Server.URL())
	sandbox := filepath.Join(filepath.Dir(p.cfgFile), "sandbox")
	writeFile(t, filepath.Join(sandbox, "victim.txt"), "the operator's file")

	p.putRule(t, &airlockv1.PolicyRule{Id: "scratch-writes", Priority: 1, Server: "demo", Tool: "write_file",
		Args: map[string]string{"/path": "scratch/**"}, OtherArguments: "any", Effect: "allow", Reason: "scratch space is free to write"})
	p.waitAction(t, &airlockv1.ToolCall{AgentId: "bot", CallId: "probe", Server: "demo", Tool: "write_file",
		Arguments: writeArgs("scratch/notes.txt", "x")}, airlockv1.Action_ACTION_ALLOW, "scratch-writes")
	// Setup: the rule does what it says for a plain path.
	ok := bot.mustSubmit(airlock.Call{ID: "plain", Tool: writeTool, Args: map[string]any{"path": "scratch/notes.txt", "content": "fine"}})
	if out := bot.await(ok, 0); out.Status != airlock.StatusCompleted {
		t.Fatalf("setup: a write under scratch/ did not run: %+v", out)
	}

	id := bot.mustSubmit(airlock.Call{ID: "escape", Tool: writeTool,
		Args: map[string]any{"path": `scratch/x\..\..\victim.txt`, "content": "overwritten by the agent"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// No decision within the wait: then the call must wait for a person,
	// and a call that waits has not run.
	if out, err := bot.client.AwaitDecision(ctx, id, 1); err != nil {
		waitApproval(t, p.frontend(t), "bot", id, 1, pendingState)
	} else if out.Status == airlock.StatusAllowed || out.Status == airlock.StatusApproved {
		t.Fatalf("the rule for scratch/** allowed %q without asking anyone (%s)", `scratch/x\..\..\victim.txt`, out.Reason)
	} else if out.Status != airlock.StatusDenied {
		t.Fatalf("the call ended %+v, want it denied or waiting for a person", out)
	}
	if b, _ := os.ReadFile(filepath.Join(sandbox, "victim.txt")); string(b) != "the operator's file" {
		t.Errorf("victim.txt, outside scratch/, now holds %q", b)
	}
}

// Call ids are scoped by agent everywhere but in the audit trail's readers:
// `audit query --tool` selects "every event of the calls made to that tool"
// by call id alone, and the analytics (`audit stats`, the console's
// analytics page) key a call by (call id, revision) alone. A hostile agent
// that uses another agent's call id (ids are the agents' to choose: the
// REST API, `airlock call --call-id`, the JSON protocol) thereby (1) puts
// the other agent's events — a write it asked for, who approved it, that
// it completed — under its own harmless tool in the trail, and (2) by
// canceling its own call first, makes the other agent's call count as
// canceled and erases the reviewer's approval from the analytics (rubber-
// stamp detection, approval rates, time to decide). What must hold: one
// agent's events are never attributed to another's call, in queries and in
// analytics.
func TestOneAgentsCallIdsNeverMixItsCallsWithAnothersInTheAuditTrail(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	ci, evil := dev.Agent(t, "ci"), dev.Agent(t, "evil")
	token := adminToken(t, dev)
	tokenFile := filepath.Join(dev.DataDir, "admin.token")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The victim's write, approved by a person; the hostile agent's echo under the same id.
	if _, err := ci.Submit(ctx, airlock.Call{ID: "deploy-1", Tool: writeTool, Args: map[string]any{"path": "prod.txt", "content": "v2"}}); err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, "deploy-1")
	if r := cli(t, dev, "approvals", "approve", "ci/deploy-1", "--token-file", tokenFile); r.Code != 0 {
		t.Fatalf("setup: approve ci/deploy-1: %+v", r)
	}
	if out, err := ci.Await(ctx, "deploy-1"); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("setup: ci/deploy-1 did not complete: %+v %v", out, err)
	}
	if _, err := evil.Submit(ctx, airlock.Call{ID: "deploy-1", Tool: "demo__echo", Args: map[string]any{"hello": "world"}}); err != nil {
		t.Fatal(err)
	}

	// (2) The victim asks again; the hostile agent asks under the same id
	// and cancels its own call before the reviewer approves the victim's.
	if _, err := ci.Submit(ctx, airlock.Call{ID: "deploy-2", Tool: writeTool, Args: map[string]any{"path": "prod.txt", "content": "v3"}}); err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, "deploy-2")
	if _, err := evil.Submit(ctx, airlock.Call{ID: "deploy-2", Tool: writeTool, Args: map[string]any{"path": "x.txt", "content": "x"}}); err != nil {
		t.Fatal(err)
	}
	api := dev.API(t)
	waitApproval(t, api, "evil", "deploy-2", 1, pendingState)
	if err := evil.Cancel(ctx, "deploy-2", "never mind"); err != nil {
		t.Fatal(err)
	}
	waitApproval(t, api, "evil", "deploy-2", 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
	if r := cli(t, dev, "approvals", "approve", "ci/deploy-2", "--token-file", tokenFile); r.Code != 0 {
		t.Fatalf("setup: approve ci/deploy-2: %+v", r)
	}
	if out, err := ci.Await(ctx, "deploy-2"); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("setup: ci/deploy-2 did not complete: %+v %v", out, err)
	}

	// (1) Every event of the calls made to demo__echo: evil's call only.
	var r cliRun
	testenv.Eventually(t, 20*time.Second, "evil's echo call in the audit trail", func() bool {
		r = cli(t, dev, "audit", "query", "--tool", "demo__echo", "--limit", "0", "--json")
		return r.Code == 0 && strings.Contains(r.Stdout, `"agent_id":"evil"`)
	})
	for line := range strings.SplitSeq(strings.TrimSpace(r.Stdout), "\n") {
		var row struct {
			Agent string `json:"agent_id"`
			Call  string `json:"call_id"`
			Type  string `json:"type"`
			Tool  string `json:"tool"`
			Actor string `json:"actor_id"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("audit query --json printed %q: %v", line, err)
		}
		if row.Agent != "evil" {
			t.Errorf("audit query --tool demo__echo lists %s/%s's %s (tool %q, actor %q): another agent's call, shown as a call to demo__echo", row.Agent, row.Call, row.Type, row.Tool, row.Actor)
		}
	}

	// (2) The analytics count both asks of demo__write_file under deploy-2
	// and deploy-1's, and the reviewer's two approvals.
	r = cli(t, dev, "audit", "stats", "--since", "", "--json")
	if r.Code != 0 {
		t.Fatalf("audit stats: %+v", r)
	}
	var a struct {
		Tools []struct {
			Tool                      string
			Asked, Approved, Canceled int
		} `json:"tools"`
		Reviewers []struct {
			ID        string `json:"id"`
			Decisions int    `json:"decisions"`
		} `json:"reviewers"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &a); err != nil {
		t.Fatalf("audit stats --json: %v\n%s", err, r.Stdout)
	}
	for _, ts := range a.Tools {
		if ts.Tool == writeTool && (ts.Asked != 3 || ts.Approved != 2 || ts.Canceled != 1) {
			t.Errorf("audit stats for %s: asked %d, approved %d, canceled %d; want 3 asked (ci twice, evil once), 2 approved (ci's), 1 canceled (evil's)", writeTool, ts.Asked, ts.Approved, ts.Canceled)
		}
	}
	decisions := 0
	for _, rv := range a.Reviewers {
		decisions += rv.Decisions
	}
	if decisions != 2 {
		t.Errorf("audit stats counts %d reviewer decisions (%+v); the reviewer approved 2 calls", decisions, a.Reviewers)
	}
}

// fakeSlack is the shared Slack fake (slackfake).
type fakeSlack struct{ *slackfake.Server }

func startFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	f := &fakeSlack{slackfake.Start()}
	t.Cleanup(f.Stop)
	return f
}

// posted waits for the card chat.postMessage received for call.
func (f *fakeSlack) posted(t *testing.T, call string) url.Values {
	t.Helper()
	var form url.Values
	testenv.Eventually(t, 20*time.Second, "the Slack card of "+call, func() bool {
		return f.Saw("chat.postMessage", func(c slackfake.Call) bool {
			if strings.Contains(c.Blocks(), call) {
				form = c.Form
				return true
			}
			return false
		})
	})
	return form
}

const slackSecret = "the Slack signing secret in tests"

// slackYAML configures Slack for the production layout: cards posted to f,
// clicks verified with slackSecret, Slack user U0ALICE is alice.
func slackYAML(f *fakeSlack) string {
	return fmt.Sprintf("slack:\n  bot_token: xoxb-tests\n  signing_secret: %q\n  api_url: %s\n  channel: \"#airlock\"\n  users: {U0ALICE: alice}\n", slackSecret, f.GetAPIURL())
}

// slackClick is the signed block_actions post Slack sends when user clicks
// the card's approve button (value as the card carries it).
func slackClick(t *testing.T, user, value string, at time.Time) (body string, h http.Header) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "1337.42.abc", "api_app_id": "A1",
		"user":      map[string]any{"id": user, "name": strings.ToLower(user)},
		"team":      map[string]any{"id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0AIRLOCK", "message_ts": "1700000000.000100"},
		"channel":   map[string]any{"id": "C0AIRLOCK"},
		"actions": []any{map[string]any{"action_id": "airlock_approve", "block_id": "airlock_actions", "type": "button", "value": value,
			"action_ts": fmt.Sprintf("%d.000100", at.Unix())}},
	})
	body = "payload=" + url.QueryEscape(string(payload))
	h = http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("X-Slack-Signature", slackfake.Signature(slackSecret, at.Unix(), body))
	return body, h
}

func postSlack(t *testing.T, endpoint, body string, h http.Header) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// approveValue is the value of the approve button on a posted card.
func approveValue(t *testing.T, card url.Values) string {
	t.Helper()
	m := regexp.MustCompile(`"action_id":"airlock_approve","text":\{[^}]*\},"style":"primary","value":"((?:[^"\\]|\\.)*)"`).FindStringSubmatch(card.Get("blocks"))
	if m == nil {
		m = regexp.MustCompile(`"action_id":"airlock_approve"[^{}]*"value":"((?:[^"\\]|\\.)*)"`).FindStringSubmatch(card.Get("blocks"))
	}
	if m == nil {
		t.Fatalf("the card has no approve button: %s", card.Get("blocks"))
	}
	var v string
	if err := json.Unmarshal([]byte(`"`+m[1]+`"`), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The interactions endpoint refuses a replayed click by remembering its
// X-Slack-Signature header, as text. Slack's library decodes that header's
// hex case-insensitively, so the same signed click with the signature in
// upper case (or any mix: one variant per letter) verifies again and is a
// "first sight": whoever captured one signed post (a proxy log, a
// misrouted retry) replays it at will for 5 minutes — each replay of an
// unmapped user's click writes another unauthorized_attempt into the trail,
// each replay of a reviewer's click sends their decision again. What must
// hold: a click that was received is refused when it comes again, however
// its signature is spelt.
func TestASignedSlackClickIsAcceptedOnce(t *testing.T) {
	f, p, bot := slackAskLayout(t)
	id := bot.mustSubmit(airlock.Call{ID: "slackreplay", Tool: writeTool, Args: map[string]any{"path": "a.txt", "content": "x"}})
	value := approveValue(t, f.posted(t, id))
	endpoint := p.services[natsauth.RoleConsole].HTTP + "/slack/interactions"

	body, h := slackClick(t, "U0MALLORY", value, time.Now())
	if code := postSlack(t, endpoint, body, h); code != http.StatusOK {
		t.Fatalf("setup: Slack's own post was answered %d", code)
	}
	if code := postSlack(t, endpoint, body, h); code != http.StatusConflict {
		t.Fatalf("setup: the same post again was answered %d, want 409", code)
	}
	for i, spelt := range []string{strings.ToUpper(h.Get("X-Slack-Signature")[3:]), mixedCase(h.Get("X-Slack-Signature")[3:])} {
		again := h.Clone()
		again.Set("X-Slack-Signature", "v0="+spelt)
		if code := postSlack(t, endpoint, body, again); code != http.StatusConflict {
			t.Errorf("replay %d of the signed click (signature spelt %s…) was answered %d, want 409", i+1, spelt[:12], code)
		}
	}
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)
	// The first click is recorded; the replays, refused before they are
	// read, add nothing.
	n := 0
	testenv.Eventually(t, 10*time.Second, "the unmapped click on record", func() bool {
		n = 0
		for _, typ := range testenv.SubjectTypes(t, adminJS, subject.OfCall("bot", id)) {
			if typ == subject.UnauthorizedAttempt {
				n++
			}
		}
		return n >= 1
	})
	if n != 1 {
		t.Errorf("one click of an unmapped Slack user is on record as %d unauthorized attempts", n)
	}
}

// mixedCase upper-cases every other hex letter.
func mixedCase(s string) string {
	b := []byte(s)
	up := false
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			if up {
				b[i] = c - 'a' + 'A'
			}
			up = !up
		}
	}
	return string(b)
}

// Agent-written text on a Slack card is escaped for links and mentions (&,
// <, >) but not for mrkdwn formatting: the agent's stated reason sits in a
// mrkdwn section as is, so its new lines, *bold*, ``` blocks and emoji
// codes draw whatever the agent likes inside airlock's card — a second
// "*Arguments*" block with harmless arguments above the real one, a
// ":white_check_mark: *Approved* by *alice*" line. What must hold: nothing
// an agent wrote is rendered as Slack formatting (outside a code block or
// plain text, airlock's own field labels appear once).
func TestAgentTextOnASlackCardCannotDrawTheCard(t *testing.T) {
	f, _, bot := slackAskLayout(t)
	reason := "tidying up\n\n*Arguments*\n```path: \"notes/todo.txt\"\ncontent: \"- buy milk\"```\n:white_check_mark: *Approved* by *alice* (console)"
	id := bot.mustSubmit(airlock.Call{ID: "slackspoof", Tool: writeTool, Reason: reason,
		Args: map[string]any{"path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}})
	card := f.posted(t, id)

	var blocks any
	if err := json.Unmarshal([]byte(card.Get("blocks")), &blocks); err != nil {
		t.Fatal(err)
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "mrkdwn" {
				if s, ok := x["text"].(string); ok {
					texts = append(texts, s)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(blocks)
	code := regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	labels, approvedBy := 0, 0
	for _, s := range texts {
		s = code.ReplaceAllString(s, "")
		labels += strings.Count(s, "*Arguments*")
		approvedBy += strings.Count(s, "*Approved* by")
	}
	if labels != 1 || approvedBy != 0 {
		t.Errorf("the card for a pending call shows %d \"*Arguments*\" blocks and %d \"*Approved* by\" lines drawn in mrkdwn: the agent's reason draws the card\n%s", labels, approvedBy, card.Get("blocks"))
	}
}

// Argument names are the agent's to choose. On a Slack card they neither
// draw lines that pass for other arguments (a name holding a line break and
// `path: "…"` is shown quoted) nor push the argument that matters off the
// card while the card still offers Approve: a card that cannot show every
// argument has no Approve button, and an approve click on such a call (from
// an older card, say) changes nothing and tells the reviewer to approve in
// the console. Before, a card showed `path: "notes/todo.txt"` drawn by a
// name, hid the real path behind "… and 2 more", and alice's click ran the
// write to victim.txt.
func TestSlackCardsShowEveryArgumentOfWhatTheyLetAReviewerApprove(t *testing.T) {
	f, p, bot := slackAskLayout(t)
	api := p.frontend(t)
	forged := "\ncontent: \"- buy milk\"\npath"
	click := func(call string) {
		t.Helper()
		value, _ := json.Marshal(map[string]any{"call": call, "rev": 1, "agent": "bot"})
		body, h := slackClick(t, "U0ALICE", string(value), time.Now())
		if code := postSlack(t, p.services[natsauth.RoleConsole].HTTP+"/slack/interactions", body, h); code != http.StatusOK {
			t.Fatalf("the approve click was answered %d", code)
		}
	}

	t.Run("a name cannot draw another argument", func(t *testing.T) {
		id := bot.mustSubmit(airlock.Call{ID: "slackkeys1", Tool: writeTool, Args: map[string]any{"path": "victim1.txt", "content": "x", forged: "notes/todo.txt"}})
		text := argumentsBlock(t, f.posted(t, id).Get("blocks"))
		if regexp.MustCompile(`(?m)^path: "notes/todo.txt"`).MatchString(text) || !regexp.MustCompile(`(?m)^path: "victim1.txt"`).MatchString(text) {
			t.Errorf("the card's arguments read:\n%s\nwant the real path alone on a path line and the forged name quoted", text)
		}
	})

	// JSON keeps a bidi override or a zero-width space raw: in a nested
	// value "invoice\u202efdp.sh" read as invoicehs.pdf on the card, and
	// alice approved it. What would not show as itself is escaped on the
	// card and on the console page.
	t.Run("a value cannot reorder or hide itself", func(t *testing.T) {
		id := bot.mustSubmit(airlock.Call{ID: "slackbidi", Tool: writeTool, Args: map[string]any{
			"path": "notes.txt", "content": "x", "options": map[string]any{"also_copy_to": "invoice\u202efdp.sh", "z\u200bwsp": "ok"}}})
		text := argumentsBlock(t, f.posted(t, id).Get("blocks"))
		if strings.ContainsAny(text, "\u202e\u200b") || !strings.Contains(text, `invoice\u202efdp.sh`) {
			t.Errorf("the card shows the arguments as:\n%q\nwant the override and the zero-width space escaped", text)
		}
		waitApproval(t, api, "bot", id, 1, pendingState)
		status, page := p.signIn(t, "alice").page("/calls/bot/" + id)
		if status != http.StatusOK || strings.ContainsAny(page, "\u202e\u200b") || !strings.Contains(page, `invoice\u202efdp.sh`) {
			t.Errorf("the console page (%d) shows the raw override or zero-width space, or not the escaped value", status)
		}
	})

	t.Run("a value cut short on the card is not approved from Slack", func(t *testing.T) {
		content := strings.Repeat("# Team notes\n- standup moved to 10:00\n", 12) + "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI attacker@evil\n"
		id := bot.mustSubmit(airlock.Call{ID: "slackvalue", Tool: writeTool, Args: map[string]any{"path": "notes.txt", "content": content}})
		card := f.posted(t, id)
		if text := argumentsBlock(t, card.Get("blocks")); strings.Contains(text, "attacker@evil") || strings.Contains(card.Get("blocks"), `"airlock_approve"`) {
			t.Errorf("a card that cut a value short offers Approve, or showed the whole value:\n%s", text)
		}
		click(id)
		testenv.Eventually(t, 20*time.Second, "the reviewer told to approve in the console", func() bool {
			return f.Saw("chat.postEphemeral", func(c slackfake.Call) bool { return strings.Contains(c.Form.Get("text"), "approved in the console") })
		})
		rec, err := api.Get(context.Background(), "bot", id, 1)
		if err != nil || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
			t.Fatalf("after an approve click from Slack the call is %v (%v), want still pending", rec.GetState(), err)
		}
	})

	t.Run("arguments cut off the card are not approved from Slack", func(t *testing.T) {
		args := map[string]any{"path": "victim2.txt", "content": "ssh-ed25519 AAAA attacker", forged: "notes/todo.txt"}
		for i := range 14 {
			args[fmt.Sprintf("a%02d", i)] = "filler"
		}
		id := bot.mustSubmit(airlock.Call{ID: "slackkeys2", Tool: writeTool, Args: args})
		card := f.posted(t, id)
		if strings.Contains(card.Get("blocks"), `"airlock_approve"`) {
			t.Errorf("a card that cannot show every argument offers Approve:\n%s", argumentsBlock(t, card.Get("blocks")))
		}
		click(id)
		testenv.Eventually(t, 20*time.Second, "the reviewer told to approve in the console", func() bool {
			return f.Saw("chat.postEphemeral", func(c slackfake.Call) bool { return strings.Contains(c.Form.Get("text"), "approved in the console") })
		})
		rec, err := api.Get(context.Background(), "bot", id, 1)
		if err != nil || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
			t.Fatalf("after an approve click from Slack the call is %v (%v), want still pending", rec.GetState(), err)
		}
	})
}

// argumentsBlock returns the mrkdwn text of a card's arguments section.
func argumentsBlock(t *testing.T, blocks string) string {
	t.Helper()
	var bs []map[string]any
	if err := json.Unmarshal([]byte(blocks), &bs); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b["block_id"] == "airlock_arguments" {
			if tx, ok := b["text"].(map[string]any); ok {
				s, _ := tx["text"].(string)
				return s
			}
		}
	}
	t.Fatalf("the card has no arguments block: %s", blocks)
	return ""
}

// slackAskLayout is the production layout with Slack faked by f and a rule
// in force that asks about demo__write_file in Slack; bot is an agent.
func slackAskLayout(t *testing.T) (*fakeSlack, *prodLayout, *hostile) {
	t.Helper()
	f := startFakeSlack(t)
	// The tests post a card for each of a corpus of hostile texts, more
	// than approval.notify_burst lets one agent post at once.
	p := startProdLayoutWith(t, "dana", "  notify_burst: 100\n", slackYAML(f), "bot")
	bot := connectAgent(t, p.nats.CredentialFile("bot"), p.nats.Server.URL())
	p.putRule(t, &airlockv1.PolicyRule{Id: "ask-in-slack", Priority: 1, Server: "demo", Tool: "write_file", Effect: "ask", Notify: []string{"slack"}})
	p.waitAction(t, &airlockv1.ToolCall{AgentId: "bot", CallId: "probe", Server: "demo", Tool: "write_file",
		Arguments: writeArgs("a.txt", "x")}, airlockv1.Action_ACTION_ASK, "ask-in-slack")
	return f, p, bot
}
