package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestWhatTheConsoleWitnessesIsRecorded(t *testing.T) {
	e := newEnv(t)
	e.approval.put(pending("call_1", "bot", "fs__write_file", map[string]any{"path": "/tmp/a"}, airlockv1.Risk_RISK_MEDIUM))
	cases := []struct {
		name string
		act  func(t *testing.T)
		want string // the event recorded, as "<type> <actor> <detail>"
	}{
		{"a refused sign-in names who tried", func(t *testing.T) {
			b := e.browser()
			tok := b.csrf("/login")
			if p := b.post("/login", url.Values{"_csrf": {tok}, "user": {"alice"}, "password": {"wrong"}}); p.Status != http.StatusUnauthorized {
				t.Fatalf("wrong password: %d", p.Status)
			}
		}, "sign_in alice ok=false"},
		{"a sign-in", func(t *testing.T) { e.browser().signIn("bob") }, "sign_in bob ok=true"},
		{"a refused sign-in with a name that is not UTF-8", func(t *testing.T) {
			b := e.browser()
			tok := b.csrf("/login")
			if p := b.post("/login", url.Values{"_csrf": {tok}, "user": {"mallory\xff"}, "password": {"x"}}); p.Status != http.StatusUnauthorized {
				t.Fatalf("status %d", p.Status)
			}
		}, "sign_in mallory\uFFFD ok=false"},
		{"an auditor trying to approve", func(t *testing.T) {
			b := e.browser()
			b.signIn("audrey")
			if p := b.submit("/calls/bot/call_1/approve", url.Values{}); p.Status != http.StatusForbidden {
				t.Fatalf("status %d", p.Status)
			}
		}, "unauthorized_attempt audrey POST /calls/:agent/:id/approve"},
		{"a reviewer trying to create an agent token", func(t *testing.T) {
			b := e.browser()
			b.signIn("alice")
			if p := b.submit("/tokens", url.Values{"name": {"x"}, "kind": {"agent"}, "agent": {"bot"}}); p.Status != http.StatusForbidden {
				t.Fatalf("status %d", p.Status)
			}
		}, "unauthorized_attempt alice POST /tokens"},
		{"a token created and revoked", func(t *testing.T) {
			b := e.browser()
			b.signIn("root")
			p := b.submit("/tokens", url.Values{"name": {"laptop"}})
			m := regexp.MustCompile(`id="token-secret">alk_([a-z0-9]+)_`).FindStringSubmatch(p.Body)
			if m == nil {
				t.Fatalf("no token shown:\n%s", p.Body)
			}
			if p := b.submit("/tokens/"+m[1]+"/revoke", nil); p.Status != http.StatusSeeOther {
				t.Fatalf("revoke: %d", p.Status)
			}
		}, "token_created root personal laptop|token_revoked root of root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(recorded(t, e))
			c.act(t)
			want := strings.Split(c.want, "|")
			var got []string
			testenv.Eventually(t, 10*time.Second, "the console's events", func() bool {
				all := recorded(t, e)
				got = all[before:]
				return len(got) >= len(want)
			})
			// Sign-ins made to set up a case come first; the case's own events end the list.
			got = got[len(got)-len(want):]
			if strings.Join(got, "|") != c.want {
				t.Fatalf("recorded %q, want %q", got, c.want)
			}
		})
	}
}

// recorded lists the console's system events as "<type> <actor> <detail>".
func recorded(t *testing.T, e *env) []string {
	var out []string
	for _, ev := range testenv.Events(t, e.deps.JS, "airlock.evt._system.>") {
		typ, d := "", ""
		switch b := ev.Body.(type) {
		case *airlockv1.Event_SignIn:
			typ, d = "sign_in", fmt.Sprintf("ok=%v", b.SignIn.GetOk())
		case *airlockv1.Event_TokenCreated:
			typ, d = "token_created", b.TokenCreated.GetKind()+" "+b.TokenCreated.GetName()
		case *airlockv1.Event_TokenRevoked:
			typ, d = "token_revoked", "of "+b.TokenRevoked.GetOwner()
		case *airlockv1.Event_UnauthorizedAttempt:
			typ, d = "unauthorized_attempt", b.UnauthorizedAttempt.GetAction()
		default:
			continue
		}
		out = append(out, typ+" "+ev.GetActor().GetId()+" "+d)
	}
	return out
}
