package console_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/onetap"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// oneTapKey is a new one-tap key in a file of mode 0600.
func oneTapKey(t *testing.T) (string, seal.Key) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "onetap.key")
	k, err := seal.Ensure(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, k
}

// A link past its expiry (the call's deadline) is refused, opened or
// posted, with the way to the call's page, and decides nothing; with
// email.one_tap off a link only says so. (The whole flow, through the real
// approval service and a real SMTP server, is tests'
// TestOneTapMailLinksDecideOnceOnlyForTheirApproverAndRevision.)
func TestAnExpiredOneTapLinkIsRefusedWithTheWayToTheCall(t *testing.T) {
	keyFile, sk := oneTapKey(t)
	rec := pending("call_exp", "bot", "fs__write_file", map[string]any{"path": "/tmp/a"}, airlockv1.Risk_RISK_MEDIUM)
	mint := func(expires time.Time) string {
		tok, err := onetap.NewKey(sk).Mint(onetap.Token{Agent: "bot", Call: "call_exp", Revision: 1, Digest: rec.GetArgumentsDigest(),
			Approver: "alice", Action: onetap.Approve, Expires: expires})
		if err != nil {
			t.Fatal(err)
		}
		return onetap.PathPrefix + url.PathEscape(tok)
	}
	for _, on := range []bool{true, false} {
		e := newEnvWith(t, func(c *config.Config) { c.Email.OneTap = config.OneTap{Enabled: on, KeyFile: keyFile} })
		e.approval.put(rec)
		b := e.browser()
		b.signIn("alice")
		expired := mint(time.Now().Add(-time.Second))
		want := "This link has expired"
		if !on {
			want = "one-tap links are turned off here"
		}
		if p := b.get(expired); p.Status == http.StatusOK || !strings.Contains(p.Body, want) {
			t.Fatalf("one_tap %v: opening an expired link: %d\n%s", on, p.Status, p.Body)
		}
		if p := b.submit(expired, nil); p.Status == http.StatusSeeOther || !strings.Contains(p.Body, want) {
			t.Fatalf("one_tap %v: posting an expired link: %d\n%s", on, p.Status, p.Body)
		}
		if on {
			if p := b.get(expired); !strings.Contains(p.Body, `href="/calls/bot/call_exp"`) {
				t.Fatalf("the refusal does not link the call's page:\n%s", p.Body)
			}
			if p := b.get(mint(time.Now().Add(time.Minute))); p.Status != http.StatusOK || !strings.Contains(p.Body, "Confirm: approve and run this call") {
				t.Fatalf("a live link of the same call: %d\n%s", p.Status, p.Body)
			}
		}
		if d := e.approval.decided(); len(d) > 0 {
			t.Fatalf("one_tap %v: an expired link decided %v", on, d)
		}
	}
}

// A link's POST reads its call once, and its use is kept in the console
// bucket until the link expires, so a replay is refused on any replica,
// then swept.
func TestAUsedOneTapLinkIsRefusedAgainAndSweptOnceItExpires(t *testing.T) {
	keyFile, sk := oneTapKey(t)
	e := newEnvWith(t, func(c *config.Config) { c.Email.OneTap = config.OneTap{Enabled: true, KeyFile: keyFile} })
	other := e.srv
	clk := &clock{t: time.Now()}
	_, e.srv = e.startConsoleWith(console.Options{Now: clk.Now, SweepEvery: 20 * time.Millisecond})
	rec := pending("call_use", "bot", "fs__write_file", map[string]any{"path": "/tmp/a"}, airlockv1.Risk_RISK_MEDIUM)
	e.approval.put(rec)
	tok, err := onetap.NewKey(sk).Mint(onetap.Token{Agent: "bot", Call: "call_use", Revision: 1, Digest: rec.GetArgumentsDigest(),
		Approver: "alice", Action: onetap.Deny, Expires: clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	link := onetap.PathPrefix + url.PathEscape(tok)
	b := e.browser()
	b.signIn("alice")
	gets := e.approval.getsSoFar()
	if p := b.submit(link, nil); p.Status != http.StatusSeeOther {
		t.Fatalf("alice denying with her link: %d\n%s", p.Status, p.Body)
	}
	// The link's check read the call; the decision does not read it again
	// (the approval service checks it when it decides).
	if n := e.approval.getsSoFar() - gets; n != 1 {
		t.Fatalf("the POST read the call %d times, want once", n)
	}
	if d := e.approval.decided(); len(d) != 1 || d[0].GetKind() != airlockv1.DecisionKind_DECISION_KIND_REJECT || d[0].GetPrincipal().GetChannel() != "email" ||
		d[0].GetArgumentsDigest() != rec.GetArgumentsDigest() || d[0].GetReason() == "" {
		t.Fatalf("the link sent %v; want one rejection by alice through email, with the digest and a reason", d)
	}
	// The other replica shares the session and the bucket.
	b.base = other.URL
	if p := b.submit(link, nil); p.Status != http.StatusConflict || !strings.Contains(p.Body, "This link was already used") {
		t.Fatalf("the link again, on another replica: %d\n%s", p.Status, p.Body)
	}
	if d := e.approval.decided(); len(d) != 1 {
		t.Fatalf("a used link decided again: %v", d)
	}
	kv, err := e.deps.JS.KeyValue(context.Background(), e.deps.Config.Buckets.Console)
	if err != nil {
		t.Fatal(err)
	}
	used := func() int {
		keys, err := bus.Keys(context.Background(), kv, "onetap.>")
		if err != nil {
			return 0
		}
		return len(keys)
	}
	if n := used(); n != 1 {
		t.Fatalf("%d use records in the bucket, want 1", n)
	}
	clk.Add(2 * time.Minute)
	testenv.Eventually(t, 10*time.Second, "the use of the expired link swept from the bucket", func() bool { return used() == 0 })
}

// A live link whose call no longer matches it, or whose approver may not
// decide the call, is refused with the reason, opened or posted, and
// decides nothing.
func TestAOneTapLinkThatNoLongerMatchesItsCallIsRefused(t *testing.T) {
	keyFile, sk := oneTapKey(t)
	e := newEnvWith(t, func(c *config.Config) { c.Email.OneTap = config.OneTap{Enabled: true, KeyFile: keyFile} })
	b := e.browser()
	b.signIn("alice")
	for _, tc := range []struct {
		name   string
		change func(rec *airlockv1.ApprovalRecord, tok *onetap.Token)
		status int
		want   string
	}{
		{"a_link_for_other_arguments", func(_ *airlockv1.ApprovalRecord, tok *onetap.Token) { tok.Digest = strings.Repeat("ab", 32) },
			http.StatusConflict, "The call&#39;s arguments are no longer those the mail showed"},
		{"a_link_after_a_reviewer_edited_the_arguments", func(rec *airlockv1.ApprovalRecord, _ *onetap.Token) {
			rec.EditedArguments = rec.GetCall().GetArguments()
		}, http.StatusConflict, "A reviewer edited the arguments since the mail was sent"},
		{"a_link_of_a_decided_call", func(rec *airlockv1.ApprovalRecord, _ *onetap.Token) {
			rec.State = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
		}, http.StatusConflict, "The call is already rejected"},
		{"a_link_of_a_call_made_for_its_approver", func(rec *airlockv1.ApprovalRecord, _ *onetap.Token) {
			rec.Call.OnBehalfOf, rec.Call.OnBehalfOfVerified = "alice", true
		}, http.StatusForbidden, "You cannot decide a call made on your behalf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := pending("c_"+strings.ReplaceAll(tc.name, "_", ""), "bot", "fs__write_file", map[string]any{"path": "/tmp/a"}, airlockv1.Risk_RISK_MEDIUM)
			tok := onetap.Token{Agent: "bot", Call: rec.GetCall().GetCallId(), Revision: 1, Digest: rec.GetArgumentsDigest(),
				Approver: "alice", Action: onetap.Approve, Expires: time.Now().Add(time.Minute)}
			tc.change(rec, &tok)
			e.approval.put(rec)
			s, err := onetap.NewKey(sk).Mint(tok)
			if err != nil {
				t.Fatal(err)
			}
			link := onetap.PathPrefix + url.PathEscape(s)
			for _, p := range []page{b.get(link), b.submit(link, nil)} {
				if p.Status != tc.status || !strings.Contains(p.Body, tc.want) || !strings.Contains(p.Body, `href="/calls/bot/`+rec.GetCall().GetCallId()+`"`) {
					t.Fatalf("got %d, want %d saying %q with the call's page:\n%s", p.Status, tc.status, tc.want, p.Body)
				}
			}
			if d := e.approval.decided(); len(d) > 0 {
				t.Fatalf("a refused link decided %v", d)
			}
		})
	}
}
