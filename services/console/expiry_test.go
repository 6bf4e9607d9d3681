package console_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// clock is a time source a test moves forward.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSessionsAndTokensExpire(t *testing.T) {
	e := newEnv(t)
	clk := &clock{t: time.Now()}
	_, e.srv = e.startConsoleWith(console.Options{Now: clk.Now, SweepEvery: 20 * time.Millisecond})

	b := e.browser()
	b.signIn("alice")
	tok := newToken(t, e, "alice", `{"name":"short","days":1}`)

	clk.Add(11 * time.Hour)
	if p := b.get("/"); p.Status != http.StatusOK {
		t.Fatalf("a session used within its idle time ended: %d", p.Status)
	}
	if p := apiCall(t, e.srv.URL, tok, http.MethodGet, "/api/v1/whoami", ""); p.Status != http.StatusOK {
		t.Fatalf("a one-day token failed after 11h: %d", p.Status)
	}
	clk.Add(14 * time.Hour)
	if p := b.get("/"); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/login") {
		t.Fatalf("an idle session still works: %d", p.Status)
	}
	assertAPIError(t, apiCall(t, e.srv.URL, tok, http.MethodGet, "/api/v1/whoami", ""), http.StatusUnauthorized, "unauthenticated")

	// The sweeper removes sessions nobody signed out of.
	other := e.browser()
	other.signIn("bob")
	clk.Add(13 * time.Hour)
	kv, err := e.deps.JS.KeyValue(context.Background(), e.deps.Config.Buckets.Console)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "expired sessions swept from the bucket", func() bool {
		keys, err := bus.Keys(context.Background(), kv, "sessions.*")
		return err == nil && len(keys) == 0
	})
}

func TestConfigurationIsCheckedAtStart(t *testing.T) {
	n := testenv.StartNATS(t)
	for name, users := range map[string][]config.User{
		"a password that is not a bcrypt hash": {{Name: "eve", PasswordHash: "hunter2", Roles: []string{"admin"}}},
		"an unknown role":                      {{Name: "eve", PasswordHash: hash(t), Roles: []string{"superuser"}}},
		"a user without a name":                {{PasswordHash: hash(t), Roles: []string{"admin"}}},
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			cfg := testenv.Config(n.URL())
			cfg.Console.Users = users
			if _, err := console.New(context.Background(), testenv.Deps(t, cfg), console.Options{}); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}
