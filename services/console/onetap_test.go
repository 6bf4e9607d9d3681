package console_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/onetap"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// A link past its expiry (the call's deadline) is refused, opened or
// posted, with the way to the call's page, and decides nothing; with
// email.one_tap off a link only says so. (The whole flow, through the real
// approval service and a real SMTP server, is tests'
// TestOneTapMailLinksDecideOnceOnlyForTheirApproverAndRevision.)
func TestAnExpiredOneTapLinkIsRefusedWithTheWayToTheCall(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "onetap.key")
	sk, err := seal.Ensure(keyFile)
	if err != nil {
		t.Fatal(err)
	}
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
