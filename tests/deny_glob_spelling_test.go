package tests

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
)

// An admin's deny rule on a path glob must hold however the agent spells
// the path. With a deny of fs__read_file on /etc/** and a broader allow of
// the tool (no argument condition) below it, an agent that writes
// /etc/passwd another way the file system reads alike — a "." or ".."
// segment, a doubled or backslash separator — must still be denied, not
// ride on the allow. The rules go in over the REST API with the admin
// token; the calls go over the real bus as an agent with its own
// credential.
func TestADenyGlobOnAPathCannotBeEvadedBySpellingThePathAnotherWay(t *testing.T) {
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "")
	admin := adminToken(t, dev)
	for _, rule := range []string{
		`{"id":"no-etc","priority":1,"server":"fs","tool":"read_file","args":{"/path":"/etc/**"},"effect":"deny","reason":"nothing under /etc is read"}`,
		`{"id":"reads-ok","priority":50,"server":"fs","tool":"read_file","effect":"allow","reason":"reading files is fine"}`,
	} {
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", admin, rule); status != http.StatusOK {
			t.Fatalf("add rule %s: %d %s", rule, status, body)
		}
	}
	bot := dev.Agent(t, "bot")
	decide := func(t *testing.T, path string) airlock.Outcome {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id, err := bot.Submit(ctx, airlock.Call{Server: "fs", Tool: "read_file", Args: map[string]any{"path": path}, AgentRuns: true})
		if err != nil {
			t.Fatalf("submit a read of %q: %v", path, err)
		}
		out, err := bot.AwaitDecision(ctx, id, 1)
		if err != nil {
			t.Fatalf("no decision about a read of %q: %v", path, err)
		}
		return out
	}
	// Setup: both rules are in force (the rules bucket reaches the policy
	// asynchronously), and each does what it says for a plain path.
	deadline := time.Now().Add(30 * time.Second)
	for {
		allowed, denied := decide(t, "/home/bot/notes.txt"), decide(t, "/etc/passwd")
		if allowed.Status == airlock.StatusAllowed && allowed.Reason == "reading files is fine" &&
			denied.Status == airlock.StatusDenied && denied.Reason == "nothing under /etc is read" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup: the rules are not in force after 30s: /home/bot/notes.txt %+v, /etc/passwd %+v", allowed, denied)
		}
	}

	for _, path := range []string{
		"/etc/./passwd", "/tmp/../etc/passwd", "//etc/passwd", "/etc//passwd", `\etc\passwd`, `/etc\passwd`,
		"/./etc/passwd", "/etc/ssh/../passwd", "/../etc/passwd", "/etc/", "/etc/.",
		// A relative path that climbs above where it starts may reach
		// /etc: the deny rule cannot tell, so it holds.
		"../../../../../../etc/passwd",
	} {
		t.Run(path, func(t *testing.T) {
			if out := decide(t, path); out.Status != airlock.StatusDenied || out.Reason != "nothing under /etc is read" {
				t.Errorf("a read of %q ended %s (%s), want denied by no-etc", path, out.Status, out.Reason)
			}
		})
	}
}
