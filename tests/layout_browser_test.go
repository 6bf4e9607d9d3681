package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	airlock "github.com/airlock-gate/airlock/sdk"
)

// columnBox is where the browser drew one header cell of a table.
type columnBox struct {
	Class                    string
	Left, Right, Width       float64
	ScrollWidth, ClientWidth float64
}

// auditColumns measures the audit table's header cells.
const auditColumns = `Array.from(document.querySelectorAll('#audit-rows thead th')).map(th => {
  const r = th.getBoundingClientRect();
  return {Class: th.className, Left: r.left, Right: r.right, Width: r.width, ScrollWidth: th.scrollWidth, ClientWidth: th.clientWidth};
})`

// TestConsoleLayoutAtLaptopAndPhone measures the console's layout in a
// real browser: every audit column is wide enough to read and no header is
// drawn over its neighbour at 1920, 1280 and 1024 px; on a 390 px phone
// every navigation item is on screen, a page of 100 audit events stays a
// reasonable height with each event's details a tap away, and chart labels
// are drawn at a readable size. The inbox counts only the calls the admin
// may decide. Screenshots of each land in tests/artifacts/layout-*.png.
func TestConsoleLayoutAtLaptopAndPhone(t *testing.T) {
	ctx, problems := browserContext(t)
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	user, _ := adminLogin(t, dev)
	token := adminToken(t, dev)
	bot := dev.Agent(t, "bot")
	sdkCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Over 100 events: 30 auto-allowed calls of four events each.
	echoCalls(t, sdkCtx, bot, 3, 10)
	// Decisions for the charts.
	for i, decide := range []string{"approve", "reject", "approve"} {
		id, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": fmt.Sprintf("d%d.txt", i), "content": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
		body := map[string]string{"approve": `{}`, "reject": `{"reason":"not this one"}`}[decide]
		if status, out := apiPost(t, dev.HTTPURL+"/api/v1/approvals/bot/"+id+"/"+decide, token, body); status != http.StatusOK {
			t.Fatalf("%s: %d %s", decide, status, out)
		}
	}
	// The inbox: one call the admin may decide, one made on their behalf.
	yours, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", Reason: "save the report", Args: map[string]any{"path": "report.txt", "content": "ok"}})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := bot.Submit(sdkCtx, airlock.Call{Tool: "demo__write_file", OnBehalfOf: user, Reason: "save the admin's notes",
		Args: map[string]any{"path": "notes.txt", "content": "mine"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, yours)
	waitPending(t, dev, token, theirs)

	do(t, ctx, "a laptop window", chromedp.EmulateViewport(1280, 900))
	signIn(t, ctx, dev)
	shot := func(name string) {
		t.Helper()
		saveArtifact(t, "layout-"+name, value(t, ctx, chromedp.CaptureScreenshot()))
	}

	t.Run("every_audit_column_is_readable_at_1920_1280_and_1024_px", func(t *testing.T) {
		for _, width := range []int64{1920, 1280, 1024} {
			do(t, ctx, "the audit page", chromedp.EmulateViewport(width, 900), chromedp.Navigate(dev.HTTPURL+"/audit"), chromedp.WaitVisible(chromedp.ID("audit-rows")))
			cols := value(t, ctx, chromedp.Evaluate[[]columnBox](auditColumns))
			if len(cols) != 10 {
				t.Fatalf("%d px: %d audit columns", width, len(cols))
			}
			for i, c := range cols {
				min := 48.0
				if strings.Contains(c.Class, "c-reason") {
					min = 120
				}
				if c.Width < min {
					t.Errorf("%d px: column %s is %.0f px wide, want at least %.0f", width, c.Class, c.Width, min)
				}
				if c.ScrollWidth > c.ClientWidth+1 {
					t.Errorf("%d px: the header of %s needs %.0f px and has %.0f: it spills onto its neighbour", width, c.Class, c.ScrollWidth, c.ClientWidth)
				}
				if i > 0 && cols[i-1].Right > c.Left+1 {
					t.Errorf("%d px: the header of %s (right %.0f) is drawn over %s (left %.0f)", width, cols[i-1].Class, cols[i-1].Right, c.Class, c.Left)
				}
			}
			// A reason shows as words, not as its first letter.
			if rw := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('#audit-rows tbody td.c-reason .two-lines').getBoundingClientRect().width`)); rw < 100 {
				t.Errorf("%d px: a reason is drawn %.0f px wide", width, rw)
			}
			noOverflow(t, ctx, fmt.Sprintf("the audit page at %d px", width))
			if width == 1280 {
				shot("desktop-audit")
			}
		}
	})

	t.Run("desktop_inbox_and_analytics", func(t *testing.T) {
		do(t, ctx, "the inbox", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(dev.HTTPURL+"/"), chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)))
		checkInboxCount(t, ctx, user, yours, theirs)
		noOverflow(t, ctx, "the inbox")
		screenshot(t, ctx, "layout-desktop-inbox")
		do(t, ctx, "analytics", chromedp.Navigate(dev.HTTPURL+"/audit/analytics"), chromedp.WaitVisible(chromedp.ID("chart-rate")))
		noOverflow(t, ctx, "analytics")
		shot("desktop-analytics")
	})

	t.Run("on_a_phone_the_nav_is_on_screen_chart_labels_are_readable_and_the_audit_page_is_compact", func(t *testing.T) {
		do(t, ctx, "a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		do(t, ctx, "the inbox", chromedp.Navigate(dev.HTTPURL+"/"), chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)))
		// Each nav link is inside the window and is what a tap at its centre hits.
		offscreen := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('header.top nav a')).filter(a => {
		  const r = a.getBoundingClientRect();
		  const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
		  return r.left < 0 || r.right > window.innerWidth || r.width === 0 || !(hit === a || a.contains(hit));
		}).map(a => a.textContent)`))
		if len(offscreen) > 0 {
			t.Errorf("nav items not on a 390 px screen: %q", offscreen)
		}
		checkInboxCount(t, ctx, user, yours, theirs)
		noOverflow(t, ctx, "the inbox on a phone")
		screenshot(t, ctx, "layout-phone-inbox")

		do(t, ctx, "analytics", chromedp.Navigate(dev.HTTPURL+"/audit/analytics"), chromedp.WaitVisible(chromedp.ID("chart-rate")))
		small := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('svg.chart text')).filter(t => t.getBoundingClientRect().height < 10).map(t => t.textContent)`))
		if len(small) > 0 {
			t.Errorf("%d chart labels are drawn under 10 px tall on a phone: %q", len(small), small)
		}
		noOverflow(t, ctx, "analytics on a phone")
		screenshot(t, ctx, "layout-phone-analytics")

		do(t, ctx, "the audit page", chromedp.Navigate(dev.HTTPURL+"/audit"), chromedp.WaitVisible(chromedp.ID("audit-rows")))
		rows := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#audit-rows tbody tr').length`))
		height := value(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
		t.Logf("the phone audit page: %d events, %d px tall", rows, height)
		if rows != 100 || height > 8000 {
			t.Errorf("the first page has %d rows and is %d px tall on a phone, want 100 rows in at most 8,000 px", rows, height)
		}
		noOverflow(t, ctx, "the audit page on a phone")
		shot("phone-audit")
		// A tap on an event's number shows every field of it.
		hidden := `getComputedStyle(document.querySelector('#audit-rows tbody tr:nth-child(3) td.c-reason')).display === 'none'`
		if !value(t, ctx, chromedp.Evaluate[bool](hidden)) {
			t.Error("an event's reason shows before it is opened: the cards are not compact")
		}
		do(t, ctx, "open an event", chromedp.Click(chromedp.CSS(`#audit-rows tbody tr:nth-child(3) td.c-seq a`)))
		if value(t, ctx, chromedp.Evaluate[bool](hidden)) {
			t.Error("tapping an event's number does not show its details")
		}
		noOverflow(t, ctx, "an opened audit event on a phone")
		shot("phone-audit-event-open")
	})

	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// checkInboxCount: the open inbox's badge and title count the call the
// admin may decide, and the call made on their behalf waits apart,
// saying so.
func checkInboxCount(t *testing.T, ctx context.Context, user, yours, theirs string) {
	t.Helper()
	badge := value(t, ctx, chromedp.Text(chromedp.ID("inbox-count")))
	title := value(t, ctx, chromedp.Title())
	if badge != "1" || !strings.HasPrefix(title, "(1) Inbox") {
		t.Errorf("the inbox counts %q (title %q), want the 1 call %s may decide", badge, title, user)
	}
	if !value(t, ctx, chromedp.Evaluate[bool](`!!document.querySelector('#inbox-rows #call-3-bot-`+yours+`')`)) {
		t.Errorf("call %s is not among the admin's", yours)
	}
	other := value(t, ctx, chromedp.Evaluate[string](`(document.querySelector('#inbox-others-rows #call-3-bot-`+theirs+`') || {}).innerText || ""`))
	// Verified or only claimed by the agent, a call made for the person is not theirs to decide.
	mine := strings.Contains(other, "You cannot decide a call made on your behalf") || strings.Contains(other, "the agent says it acts for you")
	if !mine || !strings.Contains(other, "Who can decide") && !strings.Contains(other, "Nobody") {
		t.Errorf("the call made on the admin's behalf reads %q", other)
	}
}
