package tests

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A one-tap link followed in a real browser, as an approver does from a
// mail: signed out it leads to the sign-in form and, signed in, back to the
// link's page — which shows what the agent wrote as text, runs nothing the
// page did not ship (its Content-Security-Policy reports nothing), and has
// one button; the button decides once, as that approver, through email;
// the same link and the other one, opened again afterwards, say the links
// were used and change nothing.
func TestOneTapLinkInABrowser(t *testing.T) {
	dev, mails := startOneTapDev(t, t.TempDir())
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	hostile := `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`
	call := airlock.Call{ID: "onetapbrowser", Server: "demo", Tool: "write_file", OnBehalfOf: "alice", Reason: hostile,
		Args: map[string]any{"path": "notes.txt", "content": hostile}}
	if _, err := agent.Submit(ctx, call); err != nil {
		t.Fatal(err)
	}
	apprWaitPending(t, api, call.ID)
	links := oneTapLinks(t, mails, fmt.Sprintf("<airlock.bot.%s.1.request@example.com>", call.ID), "bob@example.com")
	approve, deny := oneTapPath(t, links["Approve"]), oneTapPath(t, links["Deny"])

	bctx, problems := browserContext(t)
	do(t, bctx, "open bob's approve link signed out",
		chromedp.Navigate(links["Approve"]),
		chromedp.WaitVisible(chromedp.ID("login-form")),
	)
	location := value(t, bctx, chromedp.Location())
	if u, err := url.Parse(location); err != nil || u.Path != "/login" || u.Query().Get("next") != approve {
		t.Fatalf("a signed-out browser following the link is at %s; want the sign-in form, back to %s after", location, approve)
	}
	do(t, bctx, "sign in as bob",
		chromedp.SendKeys(chromedp.ID("user"), "bob"),
		chromedp.SendKeys(chromedp.ID("password"), consolePassword("bob")),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("onetap-confirm")),
	)
	location = value(t, bctx, chromedp.Location())
	if u, err := url.Parse(location); err != nil || u.Path != approve {
		t.Fatalf("after signing in the browser is at %s; want back at the link's page %s", location, approve)
	}
	if got := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("#onetap-form button[type=submit]").length`)); got != 1 {
		t.Errorf("the link's form has %d buttons; want one", got)
	}
	if label := value(t, bctx, chromedp.Evaluate[string](`document.getElementById("onetap-confirm").textContent`)); label != "Confirm: approve and run this call" {
		t.Errorf("the link's button says %q", label)
	}
	// What the agent wrote is on the page as text, never as markup.
	if body := value(t, bctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`)); !strings.Contains(body, `<img src=x onerror="window.__pwned=1">`) {
		t.Errorf("the link's page does not show the agent's text as written:\n%s", body)
	}
	if n := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("main img, main script").length`)); n != 0 {
		t.Errorf("the agent's text became %d elements on the link's page", n)
	}
	if pwned := value(t, bctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`)); pwned {
		t.Error("the agent's script ran on the link's page")
	}
	screenshot(t, bctx, "onetap-1280")
	if got := apprWaitPending(t, api, call.ID); len(got.GetVotes()) != 0 {
		t.Fatalf("opening the link and signing in decided: votes %v", got.GetVotes())
	}

	do(t, bctx, "confirm",
		chromedp.Click(chromedp.ID("onetap-confirm")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	location = value(t, bctx, chromedp.Location())
	if u, err := url.Parse(location); err != nil || !strings.HasPrefix(u.Path, "/calls/bot/"+call.ID) {
		t.Errorf("after the button the browser is at %s; want the call's page", location)
	}
	decided := func(after string) {
		t.Helper()
		got, err := api.Get(ctx, "bot", call.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		votes := got.GetVotes()
		switch got.GetState() {
		case airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING, airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED:
		default:
			t.Fatalf("after %s the call is %s; want it approved (then run)", after, got.GetState())
		}
		if len(votes) != 1 || votes[0].GetBy().GetId() != "bob" || votes[0].GetBy().GetChannel() != "email" {
			t.Fatalf("after %s the call is %s with votes %v; want one approval, bob's, through email", after, got.GetState(), votes)
		}
	}
	testenv.Eventually(t, 10*time.Second, "bob's approval to be recorded", func() bool {
		got, err := api.Get(ctx, "bot", call.ID, 1)
		return err == nil && got.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING
	})
	decided("the button")

	// The mail again: either link now says it was used and offers the
	// call's page, with nothing to press.
	for name, path := range map[string]string{"the approve link again": approve, "the deny link": deny} {
		do(t, bctx, "open "+name,
			chromedp.Navigate(dev.HTTPURL+path),
			chromedp.WaitVisible(chromedp.ID("onetap-refused")),
		)
		if text := value(t, bctx, chromedp.Text(chromedp.ID("onetap-refused"))); !strings.Contains(text, "already") {
			t.Errorf("%s says %q; want that the link was used or the call decided", name, text)
		}
		if n := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("#onetap-confirm").length`)); n != 0 {
			t.Errorf("%s still offers its button", name)
		}
		decided(name)
	}
	// The used link's page is answered 409, which the browser reports as a
	// resource that failed to load; anything else is a problem.
	var others []string
	for _, p := range problems() {
		if !strings.Contains(p, "status of 409") {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		t.Errorf("the browser reported errors (a Content-Security-Policy violation shows here): %v", others)
	}
}
