package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
)

// consoleRoutes are the paths a link or form of the console may point at.
var consoleRoutes = regexp.MustCompile(`^/(|login|logout|inbox/events|history|grants|grants/new|grants/scope|grants/[A-Za-z0-9_-]+/revoke|rules|rules/eval|rules/[A-Za-z0-9_-]+/delete|health|tokens|tokens/[A-Za-z0-9_-]+/revoke|audit|audit/export|audit/analytics|suggestions|suggestions/[A-Za-z0-9_-]+/(adopt|dismiss)|shadow|shadow/stop|in-doubt|threads/approve|calls/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+(/(approve|reject|changes|edit|cancel|in-doubt))?|static/[a-z.]+|devices|devices/[a-f0-9]+/revoke)$`)

// pageURLs are every link and form action of the open page, as the browser
// resolved them.
const pageURLs = `Array.from(document.querySelectorAll('a[href],form[action]')).map(e => e.href || e.action)`

// checkURLs fails when a link or form of the open page leaves the console's routes.
func checkURLs(t *testing.T, ctx context.Context, base, where string) {
	t.Helper()
	for _, raw := range value(t, ctx, chromedp.Evaluate[[]string](pageURLs)) {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme+"://"+u.Host != base || !consoleRoutes.MatchString(u.Path) {
			t.Errorf("%s: %q points outside the console's routes", where, raw)
		}
	}
}

func signIn(t *testing.T, ctx context.Context, dev *devProcess) {
	t.Helper()
	user, password := adminLogin(t, dev)
	do(t, ctx, "sign in",
		chromedp.Navigate(dev.HTTPURL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("user"), user),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)),
	)
}

// apiGet reads a REST endpoint with a bearer token.
func apiGet(t *testing.T, url, token string, out any) {
	t.Helper()
	status, body := bearerGet(t, url, token)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d", url, status)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestReviewerSurfacesResistHostileAgents attacks the console as an agent
// would, and checks that nothing it writes steers a reviewer's click:
// hostile thread ids and values never reach a URL, a record that cannot be
// shown breaks no list, an edit is decided again by the policy, and
// "always allow" grants exactly what it shows.
func TestReviewerSurfacesResistHostileAgents(t *testing.T) {
	ctx, problems := browserContext(t)
	sandbox := t.TempDir()
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+sandbox)
	token := adminToken(t, dev)
	bot := dev.Agent(t, "bot")
	raw := dialJSONAgent(t, dev.Creds("bot"), dev.NATSURL)
	sdkCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	signIn(t, ctx, dev)

	t.Run("a_thread_id_that_is_a_path_is_refused_at_ingress", func(t *testing.T) {
		ch := raw.follow("evil-1")
		raw.submit("evil-1", `{"requested":{"call":{"call_id":"evil-1","tool":"demo__write_file","thread_id":"ticket-42/../../grants?","arguments":{"path":"x"}}}}`)
		_, inv := until(t, ch, "invalid")
		if why, _ := obj(inv, "invalid", "reason").(string); !strings.Contains(why, "thread") {
			t.Fatalf("invalid %v", inv)
		}
	})

	hostile := `"><form method="post" action="/grants"><input name="uses" value="0"></form><a href="javascript:alert(1)">x</a>`
	var threadIDs []string
	t.Run("hostile_values_show_as_text_and_every_link_stays_on_the_console", func(t *testing.T) {
		for i := range 2 {
			id, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Thread: "ticket-42", Reason: hostile,
				Args: map[string]any{"path": fmt.Sprintf("t%d.txt", i), "content": hostile, "../../grants?": hostile}})
			if err != nil {
				t.Fatal(err)
			}
			waitPending(t, dev, token, id)
			threadIDs = append(threadIDs, id)
		}
		do(t, ctx, "open the first call of the thread",
			chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+threadIDs[0]),
			chromedp.WaitVisible(chromedp.ID("args")),
		)
		if n := value(t, ctx, chromedp.Evaluate[int](`document.forms.length`)); n != 7 {
			// sign out, approve, reject, changes, edit, cancel, approve thread, and no form of the agent's
			t.Errorf("%d forms on the call page", n)
		}
		checkURLs(t, ctx, dev.HTTPURL, "call page")
		if text := value(t, ctx, chromedp.Text(chromedp.ID("agent-reason"))); !strings.Contains(text, `<form method="post" action="/grants">`) {
			t.Errorf("the reason shows as %q", text)
		}
		for _, page := range []string{"/", "/history", "/grants/new?agent=bot&from=" + threadIDs[0]} {
			do(t, ctx, "open "+page, chromedp.Navigate(dev.HTTPURL+page), chromedp.WaitReady(chromedp.CSS("main")))
			checkURLs(t, ctx, dev.HTTPURL, page)
		}
	})

	t.Run("approve_all_of_the_thread_approves_exactly_those_calls_and_grants_nothing", func(t *testing.T) {
		do(t, ctx, "approve the thread",
			chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+threadIDs[0]),
			chromedp.Click(chromedp.ID("act-thread")),
			chromedp.WaitVisible(chromedp.ID("thread-calls")),
		)
		listed := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#thread-calls tr.thread-call').length`))
		if listed != 2 {
			t.Fatalf("the preview lists %d calls, want 2", listed)
		}
		do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm-thread")), chromedp.WaitVisible(chromedp.ID("flash")))
		if flash := value(t, ctx, chromedp.Text(chromedp.ID("flash"))); !strings.Contains(flash, "approved 2 call(s) of the thread") {
			t.Fatalf("after approving the thread: %q", flash)
		}
		for _, id := range threadIDs {
			if out, err := bot.Await(sdkCtx, id); err != nil || out.Status != airlock.StatusCompleted {
				t.Fatalf("%s: %+v %v", id, out, err)
			}
		}
		var grants struct{ Grants []json.RawMessage }
		apiGet(t, dev.HTTPURL+"/api/v1/grants?all=1", token, &grants)
		if len(grants.Grants) != 0 {
			t.Fatalf("approving a thread created grants: %s", grants.Grants)
		}
	})

	t.Run("a_record_that_cannot_be_shown_breaks_no_list", func(t *testing.T) {
		_, js := dev.Admin(t)
		kv, err := js.KeyValue(sdkCtx, "airlock_approvals")
		if err != nil {
			t.Fatal(err)
		}
		put := func(id string, state airlockv1.ApprovalState, n float64) {
			args, _ := structpb.NewStruct(map[string]any{"path": "n.txt"})
			args.Fields["size"] = structpb.NewNumberValue(n)
			rec := &airlockv1.ApprovalRecord{
				Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: id, Revision: 1, Server: "demo", Tool: "write_file", Arguments: args},
				Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "written before ingress refused NaN", Approvers: []string{"group:reviewers"}},
				State:    state, Deadline: timestamppb.New(time.Now().Add(time.Hour)), CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(),
			}
			data, _ := proto.Marshal(rec)
			if _, err := kv.Put(sdkCtx, "bot."+id+".1", data); err != nil {
				t.Fatal(err)
			}
		}
		put("nan-pending", airlockv1.ApprovalState_APPROVAL_STATE_PENDING, math.NaN())
		put("inf-decided", airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, math.Inf(1))
		ok, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "fine.txt", "content": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, ok)
		waitPending(t, dev, token, "nan-pending")
		do(t, ctx, "the inbox lists both",
			chromedp.Navigate(dev.HTTPURL+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)),
			chromedp.WaitVisible(chromedp.ID("call-3-bot-"+ok)),
			chromedp.WaitVisible(chromedp.CSS("#call-3-bot-nan-pending.flagged")),
		)
		screenshot(t, ctx, "hostile-inbox-with-a-flagged-record")
		do(t, ctx, "history lists the decided one",
			chromedp.Navigate(dev.HTTPURL+"/history"),
			chromedp.WaitVisible(chromedp.CSS("#call-3-bot-inf-decided.flagged")),
		)
		var list struct {
			Records  []json.RawMessage
			Problems []struct {
				CallID  string `json:"call_id"`
				Problem string `json:"problem"`
			} `json:"problems"`
		}
		apiGet(t, dev.HTTPURL+"/api/v1/approvals", token, &list)
		if len(list.Records) < 2 || len(list.Problems) != 1 || list.Problems[0].CallID != "nan-pending" {
			t.Fatalf("the REST list: %d records, problems %+v", len(list.Records), list.Problems)
		}
		out := cli(t, dev, "approvals", "list", "--token-file", filepath.Join(dev.DataDir, "admin.token"))
		if out.Code != 0 || !strings.Contains(out.Stdout, "bot/"+ok) || !strings.Contains(out.Stdout, "(!) bot/nan-pending revision 1: argument /size is NaN") {
			t.Fatalf("approvals list: %d\n%s%s", out.Code, out.Stdout, out.Stderr)
		}
		// Reject the fine call so later subtests start from an empty inbox.
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/approvals/bot/"+ok+"/reject", token, `{"reason":"done with it"}`); status != http.StatusOK {
			t.Fatalf("reject: %d %s", status, body)
		}
	})

	t.Run("an_edit_the_policy_denies_does_not_run", func(t *testing.T) {
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", token,
			`{"id":"no-secrets","priority":1,"server":"demo","tool":"write_file","args":{"/path":"secret/**"},"effect":"deny","reason":"secret/ is off limits"}`); status != http.StatusOK {
			t.Fatalf("add the deny rule: %d %s", status, body)
		}
		id, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "notes.txt", "content": "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
		do(t, ctx, "edit the path into secret/",
			chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+id),
			chromedp.Click(chromedp.ID("act-edit")),
			chromedp.WaitVisible(chromedp.ID("edit-arguments")),
			chromedp.SetValue(chromedp.ID("edit-arguments"), `{"path": "secret/keys.txt", "content": "hi"}`),
			chromedp.Click(chromedp.ID("confirm-edit")),
			chromedp.WaitVisible(chromedp.ID("error")),
		)
		if msg := value(t, ctx, chromedp.Text(chromedp.ID("error"))); !strings.Contains(msg, "the policy denies the call with the edited arguments (rule no-secrets") {
			t.Fatalf("the edit was answered %q", msg)
		}
		screenshot(t, ctx, "hostile-edit-denied")
		do(t, ctx, "back to the call", chromedp.Click(chromedp.CSS("a.back-link")), chromedp.WaitVisible(chromedp.ID("call-state")))
		if state := value(t, ctx, chromedp.Text(chromedp.ID("call-state"))); state != "pending" {
			t.Fatalf("the call is %q after a refused edit", state)
		}
		if _, err := os.Stat(filepath.Join(sandbox, "secret", "keys.txt")); !os.IsNotExist(err) {
			t.Fatalf("secret/keys.txt was written: %v", err)
		}
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/approvals/bot/"+id+"/reject", token, `{"reason":"no"}`); status != http.StatusOK {
			t.Fatalf("reject: %d %s", status, body)
		}
	})

	t.Run("always_allow_grants_exactly_what_it_shows", func(t *testing.T) {
		args := map[string]any{"path": "report.txt", "content": "line 1\nline 2", "mode": 420}
		id, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: args})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
		do(t, ctx, "open always allow",
			chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+id),
			chromedp.Click(chromedp.ID("act-always")),
			chromedp.WaitVisible(chromedp.ID("grant-form")),
		)
		scope := value(t, ctx, chromedp.Text(chromedp.ID("grant-scope")))
		for _, want := range []string{`/content is exactly "line 1\nline 2"`, "/mode is exactly 420", `/path is exactly "report.txt"`, "no other argument is given"} {
			if !strings.Contains(scope, want) {
				t.Fatalf("the scope reads %q, want %q", scope, want)
			}
		}
		screenshot(t, ctx, "hostile-always-allow-pinned")
		// Widen the content to any value: the words follow at once.
		do(t, ctx, "widen the content",
			chromedp.Click(chromedp.ID("any-0")),
			chromedp.Poll[chromedp.Void](`document.getElementById("grant-scope").textContent.includes("/content may be any value")`),
		)
		if scope := value(t, ctx, chromedp.Text(chromedp.ID("grant-scope"))); !strings.Contains(scope, "/mode is exactly 420") {
			t.Fatalf("after widening the scope reads %q", scope)
		}
		do(t, ctx, "create it", chromedp.Click(chromedp.ID("confirm-grant")), chromedp.WaitVisible(chromedp.ID("grants")))
		var grants struct {
			Grants []struct {
				ArgumentValues      map[string]any `json:"argument_values"`
				AnyArguments        []string       `json:"any_arguments"`
				OnlyListedArguments bool           `json:"only_listed_arguments"`
			}
		}
		apiGet(t, dev.HTTPURL+"/api/v1/grants", token, &grants)
		if len(grants.Grants) != 1 || len(grants.Grants[0].ArgumentValues) != 2 || len(grants.Grants[0].AnyArguments) != 1 || !grants.Grants[0].OnlyListedArguments {
			t.Fatalf("grants %+v", grants)
		}
		same, err := bot.Do(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "report.txt", "content": "other text", "mode": 420}})
		if err != nil || same.DecidedBy != "policy" {
			t.Fatalf("a call the grant allows: %+v %v", same, err)
		}
		other, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "report.txt", "content": "x", "mode": 511}})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, other) // another mode is not what was granted: a person decides
	})

	t.Run("always_allow_holds_a_number_within_the_range_typed", func(t *testing.T) {
		args := map[string]any{"path": "sizes.txt", "content": "x", "mode": 420}
		id, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: args})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
		// Typing an end chooses the range (its ends start at the call's 420).
		do(t, ctx, "type a range's upper end",
			chromedp.Navigate(dev.HTTPURL+"/grants/new?agent=bot&from="+id),
			chromedp.WaitVisible(chromedp.ID("grant-form")),
			chromedp.SendKeys(chromedp.ID("max-1"), kb.End+"0"), // 420 → 4200
			chromedp.Poll[chromedp.Void](`document.getElementById("grant-scope").textContent.includes("/mode is a number from 420 to 4200")`),
		)
		if !value(t, ctx, chromedp.Evaluate[bool](`document.getElementById("rangemode-1").checked`)) {
			t.Fatal("typing a range's end did not choose the range")
		}
		do(t, ctx, "create it", chromedp.Click(chromedp.ID("confirm-grant")), chromedp.WaitVisible(chromedp.ID("grants")))
		for _, mode := range []float64{420, 4200, 1000.5} {
			got, err := bot.Do(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "sizes.txt", "content": "x", "mode": mode}})
			if err != nil || got.DecidedBy != "policy" {
				t.Fatalf("mode %v within the range: %+v %v", mode, got, err)
			}
		}
		for _, mode := range []any{4201, 419, "1000"} {
			other, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "sizes.txt", "content": "x", "mode": mode}})
			if err != nil {
				t.Fatal(err)
			}
			waitPending(t, dev, token, other) // outside the range, or not a number: a person decides
		}
	})

	var unexpected []string
	for _, p := range problems() {
		// The refused edit answers 403 on purpose; the browser reports it.
		if !strings.Contains(p, "status of 403") {
			unexpected = append(unexpected, p)
		}
	}
	if len(unexpected) > 0 {
		t.Fatalf("the browser reported problems:\n%s", strings.Join(unexpected, "\n"))
	}
}

// TestReviewerSurfacesAtDesktopAndPhone: what a reviewer needs on a busy
// day, at a desktop and on a phone: the thread-approve preview, the audit
// page over 2,000 events, the analytics charts, and deciding a call on a
// 390 px screen. Screenshots land in tests/artifacts/.
func TestReviewerSurfacesAtDesktopAndPhone(t *testing.T) {
	ctx, problems := browserContext(t)
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	token := adminToken(t, dev)
	bot := dev.Agent(t, "bot")
	sdkCtx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// 2,000 events and more: 500 auto-allowed calls of four events each.
	echoCalls(t, sdkCtx, bot, 10, 50)
	// Decisions for the charts: approvals, a rejection, a request for changes.
	var pending []string
	for i, decide := range []string{"approve", "approve", "approve", "reject", "changes", "approve"} {
		id, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": fmt.Sprintf("d%d.txt", i), "content": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
		body := map[string]string{"approve": `{}`, "reject": `{"reason":"not this one"}`, "changes": `{"feedback":"smaller"}`}[decide]
		if status, out := apiPost(t, dev.HTTPURL+"/api/v1/approvals/bot/"+id+"/"+decide, token, body); status != http.StatusOK {
			t.Fatalf("%s: %d %s", decide, status, out)
		}
	}
	// What waits in the inbox: a thread of three calls, one of them high risk.
	for i, tool := range []string{"demo__write_file", "fs__delete_file", "demo__write_file"} {
		id, err := bot.Submit(sdkCtx, airlock.Call{Tool: tool, Thread: "deploy-7", Reason: "step " + fmt.Sprint(i+1) + " of the deploy",
			Args: map[string]any{"path": fmt.Sprintf("release/step-%d.txt", i+1), "content": "ok"}})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
		pending = append(pending, id)
	}

	desktop := chromedp.EmulateViewport(1400, 900)
	phone := chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))
	do(t, ctx, "a desktop window", desktop)
	signIn(t, ctx, dev)

	t.Run("the_thread_preview_lists_each_call_with_its_risk_before_confirming", func(t *testing.T) {
		do(t, ctx, "open the preview",
			chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+pending[0]),
			chromedp.Click(chromedp.ID("act-thread")),
			chromedp.WaitVisible(chromedp.ID("thread-calls")),
		)
		rows := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#thread-calls tr.thread-call')).map(r => r.innerText)`))
		if len(rows) != 3 {
			t.Fatalf("the preview lists %d calls: %q", len(rows), rows)
		}
		summary := value(t, ctx, chromedp.Text(chromedp.ID("act-thread")))
		if !strings.Contains(summary, "3 pending calls") || !regexp.MustCompile(`1 (high|critical)`).MatchString(summary) {
			t.Errorf("the preview's summary reads %q", summary)
		}
		if !value(t, ctx, chromedp.Evaluate[bool](`!!document.getElementById("thread-high-risk") && document.getElementById("thread-reviewed").required`)) {
			t.Error("a thread with a high-risk call is confirmed without saying so")
		}
		screenshot(t, ctx, "desktop-call-page-thread-preview")
	})

	t.Run("desktop_screens", func(t *testing.T) {
		do(t, ctx, "the inbox", chromedp.Navigate(dev.HTTPURL+"/"), chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)))
		noOverflow(t, ctx, "the inbox")
		screenshot(t, ctx, "desktop-inbox")
		do(t, ctx, "a call", chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+pending[1]), chromedp.WaitVisible(chromedp.ID("timeline")))
		noOverflow(t, ctx, "the call page")
		screenshot(t, ctx, "desktop-call-page")
	})

	t.Run("the_audit_page_pages_2000_events_in_a_layout_that_fits", func(t *testing.T) {
		do(t, ctx, "the audit page", chromedp.Navigate(dev.HTTPURL+"/audit"), chromedp.WaitVisible(chromedp.ID("audit-rows")))
		rows := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#audit-rows tbody tr').length`))
		height := value(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
		if rows != 100 || height > 8000 {
			t.Errorf("the first page has %d rows and is %d px tall", rows, height)
		}
		noOverflow(t, ctx, "the audit page")
		screenshot(t, ctx, "desktop-audit")
		first := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('#audit-rows tbody tr:last-child td').innerText`))
		do(t, ctx, "the next page", chromedp.Click(chromedp.ID("audit-next")), chromedp.WaitVisible(chromedp.ID("audit-first")))
		next := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('#audit-rows tbody tr td').innerText`))
		var a, b int
		fmt.Sscan(first, &a)
		fmt.Sscan(next, &b)
		if b <= a {
			t.Errorf("the next page starts at event %d, after %d", b, a)
		}
		// Follow the next links to the end (by address: a click would race
		// the page it replaces).
		pages := 2
		for pages < 40 {
			next := value(t, ctx, chromedp.Evaluate[string](`(document.getElementById("audit-next") || {}).href || ""`))
			if next == "" {
				break
			}
			do(t, ctx, "page on", chromedp.Navigate(next), chromedp.WaitVisible(chromedp.ID("audit-rows")))
			pages++
		}
		if pages < 20 {
			t.Errorf("the trail spans %d pages of 100, want at least 20 (2,000 events)", pages)
		}
	})

	t.Run("analytics_is_in_the_top_navigation_and_draws_its_charts", func(t *testing.T) {
		do(t, ctx, "analytics", chromedp.Navigate(dev.HTTPURL+"/"), chromedp.Click(chromedp.ID("nav-analytics")), chromedp.WaitVisible(chromedp.ID("chart-decisions")))
		charts := value(t, ctx, chromedp.Evaluate[[]int](`Array.from(document.querySelectorAll('svg.chart')).map(s => s.querySelectorAll('rect, circle, path').length)`))
		if len(charts) != 4 {
			t.Fatalf("%d charts", len(charts))
		}
		for i, marks := range charts {
			if marks == 0 {
				t.Errorf("chart %d draws nothing", i+1)
			}
		}
		noOverflow(t, ctx, "analytics")
		screenshot(t, ctx, "desktop-analytics")
	})

	t.Run("a_reviewer_decides_a_call_on_a_phone", func(t *testing.T) {
		do(t, ctx, "a phone", phone)
		for _, p := range []struct{ name, path, ready string }{
			{"phone-inbox", "/", `#inbox[data-synced="true"]`}, {"phone-audit", "/audit", "#audit-rows"}, {"phone-analytics", "/audit/analytics", "#chart-rate"},
		} {
			do(t, ctx, p.name, chromedp.Navigate(dev.HTTPURL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			noOverflow(t, ctx, p.name)
			screenshot(t, ctx, p.name)
		}
		do(t, ctx, "open a call", chromedp.Navigate(dev.HTTPURL+"/calls/bot/"+pending[2]), chromedp.WaitVisible(chromedp.ID("act-approve")))
		noOverflow(t, ctx, "the call page on a phone")
		screenshot(t, ctx, "phone-call-page")
		box := value(t, ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.getElementById("act-approve").getBoundingClientRect(); return [r.left, r.right, r.height]; })()`))
		if box[0] < 0 || box[1] > 390 || box[2] < 24 {
			t.Errorf("the approve control sits at %v on a 390 px screen", box)
		}
		do(t, ctx, "approve it",
			chromedp.Click(chromedp.ID("act-approve")),
			chromedp.WaitVisible(chromedp.ID("confirm-approve")),
		)
		if width := value(t, ctx, chromedp.Evaluate[float64](`document.getElementById("confirm-approve").getBoundingClientRect().width`)); width < 300 {
			t.Errorf("the confirm button is %.0f px wide on a phone", width)
		}
		screenshot(t, ctx, "phone-call-page-approve")
		do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm-approve")), chromedp.WaitVisible(chromedp.ID("flash")))
		if flash := value(t, ctx, chromedp.Text(chromedp.ID("flash"))); !strings.Contains(flash, "approved by admin") {
			t.Fatalf("after approving on a phone: %q", flash)
		}
		if out, err := bot.Await(sdkCtx, pending[2]); err != nil || out.Status != airlock.StatusCompleted {
			t.Fatalf("the call approved on a phone: %+v %v", out, err)
		}
	})

	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported problems:\n%s", strings.Join(p, "\n"))
	}
}
