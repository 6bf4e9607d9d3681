package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/subject"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// openIDProvider is a real OpenID provider (oidc-provider from npm, run by
// tests/node/oidc-provider.mjs) on a random loopback port.
type openIDProvider struct {
	Issuer    string
	accounts  string
	redirects chan string // each redirect back to the console, in order
}

// startOpenIDProvider starts oidc-provider with one client and the people
// in accounts (login → claims); setAccounts changes them later.
func startOpenIDProvider(t *testing.T, clientID, secret string, redirectURIs []string, accounts map[string]any) *openIDProvider {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("node", "oidc-provider.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "oidc-provider", "package.json")); err != nil {
		t.Fatalf("oidc-provider is not installed (%v): run `go tool task test:deps` (npm install --prefix tests/node)", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: install Node.js (apt-get install nodejs npm), then `go tool task test:deps`")
	}
	dir := t.TempDir()
	p := &openIDProvider{accounts: filepath.Join(dir, "accounts.json"), redirects: make(chan string, 16)}
	p.setAccounts(t, accounts)
	cfg, _ := json.Marshal(map[string]any{"client_id": clientID, "client_secret": secret, "redirect_uris": redirectURIs, "accounts": p.accounts})
	writeFile(t, filepath.Join(dir, "config.json"), string(cfg))
	cmd := exec.Command("node", script, filepath.Join(dir, "config.json"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start oidc-provider: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	issuer := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if to, ok := strings.CutPrefix(sc.Text(), "redirect "); ok {
				select {
				case p.redirects <- to:
				default:
				}
			} else if strings.HasPrefix(sc.Text(), "http://") {
				issuer <- sc.Text()
			}
		}
		close(issuer)
	}()
	select {
	case p.Issuer = <-issuer:
		if p.Issuer == "" {
			t.Fatal("oidc-provider exited before printing its issuer URL")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("oidc-provider printed no issuer URL within 30s")
	}
	return p
}

func (p *openIDProvider) setAccounts(t *testing.T, accounts map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(accounts)
	writeFile(t, p.accounts, string(raw))
}

// lastRedirect is the most recent redirect to the console the provider sent.
func (p *openIDProvider) lastRedirect(t *testing.T) string {
	t.Helper()
	var last string
	for {
		select {
		case to := <-p.redirects:
			last = to
		default:
			if last == "" {
				t.Fatal("the provider sent no redirect to the console")
			}
			return last
		}
	}
}

func account(email string, groups ...string) map[string]any {
	return map[string]any{"email": email, "email_verified": true, "name": email, "groups": groups}
}

// TestSingleSignOnInABrowser signs people in to the console through a real
// OpenID provider in real Chromium, on the production layout with two
// console replicas: the sign-in starts on one and the provider returns the
// browser to the other. A person's roles follow their groups at each
// sign-in; a person in no mapped group and a replayed callback are refused
// with a page that says so. Screenshots of the sign-in page and the inbox,
// at 1280 and 390 px, land in tests/artifacts/.
func TestSingleSignOnInABrowser(t *testing.T) {
	ctx, problems := browserContext(t)
	first, second := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	callback := "http://" + second + "/login/sso/callback"
	idp := startOpenIDProvider(t, "airlock-console", "the console's secret in tests", []string{callback}, map[string]any{
		"carol": account("carol@example.com", "eng-reviewers", "eng-admins"),
		"dave":  account("dave@example.com", "marketing"),
	})

	slack := startFakeSlack(t)
	n := testenv.StartSecureNATS(t, "bot")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "airlock.yaml")
	// carol is in no group of approval.groups: what she may decide, her
	// sign-in gives her. Slack's U0CAROL is the same principal.
	writeFile(t, cfgFile, fmt.Sprintf(`approval:
  groups: {reviewers: [alice, bob]}
slack:
  bot_token: xoxb-tests
  signing_secret: %q
  api_url: %s
  channel: "#airlock"
  users: {U0CAROL: carol@example.com, U0DAVE: dave@example.com}
`, slackSecret, slack.GetAPIURL())+consoleUsersYAML(t)+fmt.Sprintf(`  oidc:
    issuer: %s
    client_id: airlock-console
    client_secret: the console's secret in tests
    redirect_url: %s
    scopes: [email, profile, groups]
    display_name: Example SSO
    allowed_domains: [example.com]
    groups:
      eng-reviewers: {roles: [reviewer], groups: [reviewers]}
      eng-admins: {roles: [admin]}
`, idp.Issuer, callback))
	p := &prodLayout{nats: n, services: map[string]*serveProcess{}, cfgFile: cfgFile}
	for _, role := range []string{natsauth.RolePolicy, natsauth.RoleApproval} {
		p.services[role] = startServe(t, n.Server.URL(), p.env(role), role, "--config", cfgFile)
	}
	for _, addr := range []string{first, second} {
		testenv.StartAirlock(t, addr, p.env(natsauth.RoleConsole), "serve", "console", "--config", cfgFile, "--nats", n.Server.URL(), "--http", addr)
	}

	p.putRule(t, &airlockv1.PolicyRule{Id: "ask-in-slack", Priority: 1, Server: "demo", Tool: "write_file", Effect: "ask", Notify: []string{"slack"}})
	p.waitAction(t, &airlockv1.ToolCall{AgentId: "bot", CallId: "probe", Server: "demo", Tool: "write_file",
		Arguments: writeArgs("a.txt", "x")}, airlockv1.Action_ACTION_ASK, "ask-in-slack")
	bot := connectAgent(t, n.CredentialFile("bot"), n.Server.URL())
	api := p.frontend(t)

	desktop := chromedp.EmulateViewport(1280, 900)
	phone := chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))
	signIn := func(login string) {
		t.Helper()
		do(t, ctx, "start single sign-on as "+login,
			chromedp.Navigate("http://"+first+"/login"),
			chromedp.WaitVisible(chromedp.ID("sign-in-sso")),
			chromedp.Click(chromedp.ID("sign-in-sso")),
			// The provider's form, or straight back to the console when its own session still knows the person.
			chromedp.WaitVisible(chromedp.CSS(`input[name="login"], #inbox, #error`)),
		)
		if loc := value(t, ctx, chromedp.Location()); strings.HasPrefix(loc, idp.Issuer) {
			do(t, ctx, "sign in at the provider as "+login,
				chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)),
				chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), login),
				chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "any password: the provider's development pages take any"),
				chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
			)
		}
	}
	whoami := func() map[string]any {
		t.Helper()
		do(t, ctx, "read whoami", chromedp.Navigate("http://"+first+"/api/v1/whoami"))
		var who map[string]any
		if err := json.Unmarshal([]byte(value(t, ctx, chromedp.Text(chromedp.CSS("body")))), &who); err != nil {
			t.Fatalf("whoami: %v", err)
		}
		return who
	}
	signOut := func() {
		t.Helper()
		do(t, ctx, "sign out",
			chromedp.Navigate("http://"+first+"/"),
			chromedp.Click(chromedp.CSS(`form.signout button`)),
			chromedp.WaitVisible(chromedp.ID("sign-in-sso")),
		)
	}

	t.Run("the sign-in page offers single sign-on beside the password form", func(t *testing.T) {
		do(t, ctx, "open the sign-in page", desktop, chromedp.Navigate("http://"+first+"/login"),
			chromedp.WaitVisible(chromedp.ID("sign-in-sso")), chromedp.WaitVisible(chromedp.ID("password")))
		if text := value(t, ctx, chromedp.Text(chromedp.ID("sign-in-sso"))); text != "Sign in with Example SSO" {
			t.Fatalf("the button says %q", text)
		}
		screenshot(t, ctx, "sso-sign-in-1280")
		do(t, ctx, "phone width", phone, chromedp.Navigate("http://"+first+"/login"), chromedp.WaitVisible(chromedp.ID("sign-in-sso")))
		if over := value(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); over > 0 {
			t.Fatalf("the sign-in page is %d px wider than a phone", over)
		}
		screenshot(t, ctx, "sso-sign-in-390")
		do(t, ctx, "back to desktop width", desktop)
	})

	t.Run("a person signs in at the provider, starting on one replica and returning to the other, with the roles of their groups", func(t *testing.T) {
		signIn("carol")
		do(t, ctx, "arrive at the inbox on the second replica", chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)))
		if loc := value(t, ctx, chromedp.Location()); !strings.HasPrefix(loc, "http://"+second+"/") {
			t.Fatalf("the provider returned the browser to %s, not the second replica", loc)
		}
		if who := value(t, ctx, chromedp.Text(chromedp.CSS(".who"))); !strings.Contains(who, "carol@example.com") || !strings.Contains(who, "admin") {
			t.Fatalf("the header says %q", who)
		}
		screenshot(t, ctx, "sso-inbox-1280")
		do(t, ctx, "phone width", phone, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)))
		screenshot(t, ctx, "sso-inbox-390")
		do(t, ctx, "back to desktop width", desktop)
		// The session began on the second replica serves the first as well.
		who := whoami()
		if who["name"] != "carol@example.com" || fmt.Sprint(who["roles"]) != "[reviewer admin]" || fmt.Sprint(who["groups"]) != "[reviewers]" {
			t.Fatalf("whoami on the first replica: %v", who)
		}
	})

	t.Run("a replayed callback is refused with a page that says so", func(t *testing.T) {
		do(t, ctx, "open the callback again", chromedp.Navigate(idp.lastRedirect(t)), chromedp.WaitVisible(chromedp.ID("error")))
		if msg := value(t, ctx, chromedp.Text(chromedp.ID("error"))); !strings.Contains(msg, "already used or has expired") {
			t.Fatalf("the page says %q", msg)
		}
	})

	t.Run("the approver groups a sign-in gave decide in the console and from Slack", func(t *testing.T) {
		inConsole := bot.mustSubmit(airlock.Call{ID: "sso-console", Tool: writeTool, Args: map[string]any{"path": "a.txt", "content": "x"}})
		waitApproval(t, api, "bot", inConsole, 1, pendingState)
		do(t, ctx, "approve in the console",
			chromedp.Navigate("http://"+first+"/calls/bot/"+inConsole),
			chromedp.WaitVisible(chromedp.ID("act-approve")),
			chromedp.Click(chromedp.ID("act-approve")),
			chromedp.WaitVisible(chromedp.ID("confirm-approve")),
			chromedp.Click(chromedp.ID("confirm-approve")),
			chromedp.WaitVisible(chromedp.ID("flash")),
		)
		if flash := value(t, ctx, chromedp.Text(chromedp.ID("flash"))); !strings.Contains(flash, "approved by carol@example.com") {
			t.Fatalf("after approving: %q", flash)
		}
		waitApproval(t, api, "bot", inConsole, 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)

		fromSlack := bot.mustSubmit(airlock.Call{ID: "sso-slack", Tool: writeTool, Args: map[string]any{"path": "b.txt", "content": "y"}})
		card := approveValue(t, slack.posted(t, fromSlack))
		endpoint := "http://" + second + "/slack/interactions"
		// dave never signed in: his Slack account's principal is in no group.
		body, h := slackClick(t, "U0DAVE", card, time.Now())
		if code := postSlack(t, endpoint, body, h); code != http.StatusOK {
			t.Fatalf("dave's click was answered %d", code)
		}
		_, adminJS := n.Connect(natsauth.RoleAdmin)
		testenv.Eventually(t, 20*time.Second, "dave's click refused", func() bool {
			return slices.Contains(testenv.SubjectTypes(t, adminJS, subject.OfCall("bot", fromSlack)), subject.UnauthorizedAttempt)
		})
		body, h = slackClick(t, "U0CAROL", card, time.Now().Add(time.Second))
		if code := postSlack(t, endpoint, body, h); code != http.StatusOK {
			t.Fatalf("carol's click was answered %d", code)
		}
		rec := waitApproval(t, api, "bot", fromSlack, 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
		if by := rec.GetDecidedBy(); by.GetId() != "carol@example.com" || by.GetChannel() != "slack" {
			t.Fatalf("approved by %v", by)
		}
	})

	t.Run("a person removed from a group loses its role at their next sign-in", func(t *testing.T) {
		signOut()
		idp.setAccounts(t, map[string]any{"carol": account("carol@example.com", "eng-reviewers")})
		signIn("carol")
		do(t, ctx, "arrive at the inbox", chromedp.WaitVisible(chromedp.CSS(`#inbox[data-synced="true"]`)))
		if who := whoami(); fmt.Sprint(who["roles"]) != "[reviewer]" {
			t.Fatalf("whoami after leaving eng-admins: %v", who)
		}
	})

	t.Run("a person in no mapped group is refused with a page that says so", func(t *testing.T) {
		// Another browser: carol's session at the provider would sign carol in again.
		ctx, _ = browserContext(t)
		idp.setAccounts(t, map[string]any{"dave": account("dave@example.com", "marketing")})
		signIn("dave")
		do(t, ctx, "see the refusal", chromedp.WaitVisible(chromedp.ID("error")))
		if msg := value(t, ctx, chromedp.Text(chromedp.ID("error"))); !strings.Contains(msg, "none of your groups gives access to airlock") {
			t.Fatalf("the page says %q", msg)
		}
		screenshot(t, ctx, "sso-refused-1280")
		if who := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('.who').length`)); who != 0 {
			t.Fatal("a refused person is shown as signed in")
		}
	})

	// The provider's own pages load what they load (a font, a favicon);
	// the console's must keep to its content security policy.
	for _, p := range problems() {
		if strings.Contains(p, "Content Security Policy") {
			t.Fatalf("the browser refused something under the console's content security policy: %s", p)
		}
	}
}
