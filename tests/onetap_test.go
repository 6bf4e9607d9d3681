package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

var oneTapLinkRE = regexp.MustCompile(`(?m)^(Approve|Deny): +(\S+)$`)

// oneTapLinks waits for the mail with Message-ID id to reach addr and
// returns its one-tap links by action ("Approve", "Deny").
func oneTapLinks(t *testing.T, mails *smtptest.Collector, id, addr string) map[string]string {
	t.Helper()
	var got []smtptest.Message
	testenv.Eventually(t, 20*time.Second, "mail "+id+" to "+addr, func() bool {
		got = mails.Find(func(m smtptest.Message) bool {
			msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
			return err == nil && msg.Header.Get("Message-ID") == id && len(m.To) == 1 && m.To[0] == addr
		})
		return len(got) > 0
	})
	body := mailText(t, got[0])
	links := map[string]string{}
	for _, m := range oneTapLinkRE.FindAllStringSubmatch(strings.ReplaceAll(body, "\r\n", "\n"), -1) {
		links[m[1]] = m[2]
	}
	if links["Approve"] == "" || links["Deny"] == "" {
		t.Fatalf("the mail to %s has no one-tap links:\n%s", addr, body)
	}
	return links
}

// oneTapPath is a link's path on the console (the link is to the dev's own address).
func oneTapPath(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.EscapedPath()
}

// oneTapForm opens a link's page as r and returns its anti-forgery token
// (the one-tap form's, or the page frame's when it refuses).
func (r *consoleSession) oneTapForm(path string) (int, string, string) {
	r.t.Helper()
	status, body := r.page(path)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		r.t.Fatalf("%s has no form token (status %d):\n%s", path, status, body)
	}
	return status, body, m[1]
}

// startOneTapDev starts `airlock dev` on dataDir with the console's users
// and every pending call mailed, one-tap links on, to a real SMTP server
// whose mails it returns.
func startOneTapDev(t *testing.T, dataDir string) (*devProcess, *smtptest.Collector) {
	t.Helper()
	smtp, mails := devMailServer(t)
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	yaml := consoleUsersYAML(t) + "approval:\n  default_notify: [console, email]\n" +
		devMailYAML(smtp, "{alice: alice@example.com, bob: bob@example.com, root: root@example.com}", "  one_tap: {enabled: true}\n")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDev(t, dataDir, 0, "", "AIRLOCK_CONFIG="+cfg), mails
}

// `airlock dev` with email.one_tap: each approver's mail carries their own
// approve and deny links. Opening one decides nothing (signed out: the
// sign-in page; signed in: the call and one button); its POST decides once,
// as that approver, through the approval service; a replay, the other link,
// another approver's session, a link of a revision the agent has since
// revised and an altered link are each refused with a sentence that points
// at the call's page, and none of them decides anything.
func TestOneTapMailLinksDecideOnceOnlyForTheirApproverAndRevision(t *testing.T) {
	dataDir := t.TempDir()
	dev, mails := startOneTapDev(t, dataDir)
	if st, err := os.Stat(filepath.Join(dataDir, "keys", "onetap.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("airlock dev made no one-tap key of mode 0600 in its data dir: %v", err)
	}
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// A quorum of two, so the call still waits after bob's approval: a
	// replay, or bob's deny link then, would still have something to change.
	admin := signInWithToken(t, dev.HTTPURL, "root")
	if status, body := admin.api(http.MethodPost, "/api/v1/rules", `{"id":"two-eyes","priority":1,"server":"fs","tool":"write_file","effect":"ask","quorum":2,"approvers":["group:reviewers"]}`); status != http.StatusOK {
		t.Fatalf("put rule: %d %s", status, body)
	}
	call := airlock.Call{Server: "fs", Tool: "write_file", OnBehalfOf: "alice", Reason: "<script>alert(1)</script>",
		Args: map[string]any{"path": "notes.txt", "content": "<b>first</b>"}}
	tries := 0
	testenv.Eventually(t, 20*time.Second, "the quorum rule to be in force", func() bool {
		tries++
		call.ID = fmt.Sprintf("onetap%d", tries) // a call asked before the rule was in force keeps its quorum of one
		if _, err := agent.Submit(ctx, call); err != nil {
			t.Fatal(err)
		}
		return apprWaitPending(t, api, call.ID).GetDecision().GetQuorum() == 2
	})
	state := func(rev uint32) *airlockv1.ApprovalRecord {
		t.Helper()
		rec, err := api.Get(ctx, "bot", call.ID, rev)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	stillPending := func(rev uint32, after string) {
		t.Helper()
		if rec := state(rev); rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(rec.GetVotes()) > 0 {
			t.Fatalf("after %s revision %d is %s with votes %v; want it pending, untouched", after, rev, rec.GetState(), rec.GetVotes())
		}
	}
	mailID := func(rev int) string { return fmt.Sprintf("<airlock.bot.%s.%d.request@example.com>", call.ID, rev) }
	bob1 := oneTapLinks(t, mails, mailID(1), "bob@example.com")
	root1 := oneTapLinks(t, mails, mailID(1), "root@example.com")

	// A mail scanner opens every link, signed out: the sign-in page.
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(bob1["Approve"])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next="+url.QueryEscape(oneTapPath(t, bob1["Approve"])) {
		t.Fatalf("a signed-out GET of a link answered %d %s; want the sign-in page, back to the link after", resp.StatusCode, resp.Header.Get("Location"))
	}
	stillPending(1, "a signed-out GET of the link")

	t.Run("another_approvers_session_is_refused", func(t *testing.T) {
		root := signInAt(t, dev.HTTPURL, "root", consolePassword("root"))
		status, body, csrf := root.oneTapForm(oneTapPath(t, bob1["Approve"]))
		if status != http.StatusForbidden || !strings.Contains(body, "This link was mailed to bob, and you are signed in as root") {
			t.Fatalf("root opening bob's link: %d\n%s", status, body)
		}
		status, body = root.post(oneTapPath(t, bob1["Approve"]), url.Values{"_csrf": {csrf}})
		if status != http.StatusForbidden || !strings.Contains(body, "Open the call&#39;s page to decide as yourself") {
			t.Fatalf("root posting bob's link: %d\n%s", status, body)
		}
		stillPending(1, "root used bob's link")
		// On the call's own timeline, not only the console's.
		_, js := dev.Admin(t)
		testenv.Eventually(t, 10*time.Second, "root's use of bob's link on the call's record", func() bool {
			return slices.Contains(testenv.SubjectTypes(t, js, subject.OfCall("bot", call.ID)), subject.UnauthorizedAttempt)
		})
	})

	t.Run("an_altered_link_is_refused", func(t *testing.T) {
		// root rewrites bob's link to name root, keeping bob's MAC.
		root := signInAt(t, dev.HTTPURL, "root", consolePassword("root"))
		path := oneTapPath(t, bob1["Approve"])
		payload, mac, _ := strings.Cut(strings.TrimPrefix(path, "/one-tap/"), ".")
		raw, err := base64.RawURLEncoding.DecodeString(payload)
		if err != nil {
			t.Fatal(err)
		}
		forged := "/one-tap/" + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"p":"bob"`, `"p":"root"`, 1))) + "." + mac
		_, _, csrf := root.oneTapForm("/")
		status, body := root.post(forged, url.Values{"_csrf": {csrf}})
		if status != http.StatusBadRequest || !strings.Contains(body, "This link is not one airlock made") {
			t.Fatalf("root posting an altered link: %d\n%s", status, body)
		}
		status, body = root.post(oneTapPath(t, root1["Approve"])+"x", url.Values{"_csrf": {csrf}})
		if status != http.StatusBadRequest {
			t.Fatalf("a link with a byte added: %d\n%s", status, body)
		}
		stillPending(1, "altered links")
	})

	bob := signInAt(t, dev.HTTPURL, "bob", consolePassword("bob"))
	t.Run("a_link_of_a_revision_the_agent_revised_is_refused", func(t *testing.T) {
		if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: call.ID, Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES,
			Reason: "write it elsewhere", Principal: apprReviewer("root")}); err != nil {
			t.Fatal(err)
		}
		call.Revision, call.Args = 2, map[string]any{"path": "notes.txt", "content": "<b>second</b>"}
		if _, err := agent.Submit(ctx, call); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 20*time.Second, "revision 2 to wait for approval", func() bool {
			rec, err := api.Get(ctx, "bot", call.ID, 2)
			return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING
		})
		status, body := bob.page(oneTapPath(t, bob1["Approve"]))
		if status != http.StatusConflict || !strings.Contains(body, "This link is for revision 1 of the call, which the agent has since revised (now revision 2)") ||
			!strings.Contains(body, `href="/calls/bot/`+call.ID+`"`) {
			t.Fatalf("bob opening his revision-1 link after revision 2 came: %d\n%s", status, body)
		}
		_, _, csrf := bob.oneTapForm("/")
		if status, body = bob.post(oneTapPath(t, bob1["Approve"]), url.Values{"_csrf": {csrf}}); status != http.StatusConflict {
			t.Fatalf("bob posting his revision-1 link: %d\n%s", status, body)
		}
		stillPending(2, "bob's revision-1 link")
	})

	bob2 := oneTapLinks(t, mails, mailID(2), "bob@example.com")
	approve := oneTapPath(t, bob2["Approve"])
	status, page, csrf := bob.oneTapForm(approve)
	if status != http.StatusOK || !strings.Contains(page, "Confirm: approve and run this call") || strings.Count(page, `type="submit"`) != 2 {
		t.Fatalf("bob opening his link: %d; want the call with one button (and sign-out)\n%s", status, page)
	}
	if strings.Contains(page, "<b>second</b>") || !strings.Contains(page, "&lt;b&gt;second&lt;/b&gt;") || strings.Contains(page, "<script>alert") {
		t.Fatalf("the link's page does not escape what the agent wrote:\n%s", page)
	}
	stillPending(2, "bob opened his link")

	t.Run("bobs_api_token_is_refused", func(t *testing.T) {
		// A link decides in a person's session; automation holding bob's
		// token decides over the REST API, where it sees what it decides.
		token := signInWithToken(t, dev.HTTPURL, "bob").token
		status, body := apiPost(t, dev.HTTPURL+approve, token, `{}`)
		if status != http.StatusForbidden || !strings.Contains(body, "not with an API token") {
			t.Fatalf("bob's API token posting his link: %d\n%s", status, body)
		}
		stillPending(2, "bob's API token on his link")
	})

	status, body := bob.post(approve, url.Values{"_csrf": {csrf}})
	if status != http.StatusSeeOther {
		t.Fatalf("bob confirming with his link: %d\n%s", status, body)
	}
	voted := func(after string) {
		t.Helper()
		rec := state(2)
		votes := rec.GetVotes()
		if rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(votes) != 1 || votes[0].GetBy().GetId() != "bob" || votes[0].GetBy().GetChannel() != "email" {
			t.Fatalf("after %s revision 2 is %s with votes %v; want it pending with bob's one approval, through email", after, rec.GetState(), votes)
		}
	}
	voted("bob's POST")

	for name, link := range map[string]string{"the_same_link_again": approve, "the_deny_link_after_the_approve_link": oneTapPath(t, bob2["Deny"])} {
		t.Run(name+"_is_refused", func(t *testing.T) {
			status, body := bob.post(link, url.Values{"_csrf": {csrf}})
			if status != http.StatusConflict || !strings.Contains(body, "This link was already used") {
				t.Fatalf("%s: %d\n%s", name, status, body)
			}
			voted(name)
		})
	}

	// The second approver completes the quorum: the call is approved once.
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: call.ID, Revision: 2, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE,
		ArgumentsDigest: state(2).GetArgumentsDigest(), Principal: apprReviewer("root")}); err != nil {
		t.Fatal(err)
	}
	if rec := state(2); rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING || rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_REJECTED || len(rec.GetVotes()) != 2 {
		t.Fatalf("after root's approval revision 2 is %s with votes %v; want approved by bob and root", rec.GetState(), rec.GetVotes())
	}
}
