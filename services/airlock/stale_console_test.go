package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAConsoleURLNoDevHoldsSendsTheTokenNowhere: console.url says where a
// running dev's console listens, but it outlives a dev that ended without
// its deferred clean-up (terminal closed: SIGHUP; a second Ctrl-C; SIGKILL;
// the OOM killer). Nothing then holds the data dir's lock (dev.lock), and
// the address is anyone's to listen on: the reviewer commands must not send
// the admin token there. (The lock is free here as after such an end; the
// recorder stands for whoever listens on the address now.)
func TestAConsoleURLNoDevHoldsSendsTheTokenNowhere(t *testing.T) {
	squatter := newAuthLog(t)
	dir := t.TempDir() // a data dir whose dev was killed
	for name, body := range map[string]string{
		"admin.token": "dev-admin-token\n",
		"console.url": squatter.srv.URL + "\n",
		"dev.lock":    "12345\n", // the dead dev's pid; no one holds the lock
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AIRLOCK_DEV_DATA_DIR", dir)
	t.Setenv("AIRLOCK_API", "")
	for _, args := range [][]string{{"approvals", "list"}, {"policy", "rules", "rm", "r1"}, {"policy", "shadow", "status"}} {
		_, err := runCLI(context.Background(), t, args...)
		if got := squatter.headers(); len(got) > 0 {
			t.Fatalf("airlock %s sent %q to the address in console.url though no dev holds %s (err %v)",
				strings.Join(args, " "), got, filepath.Join(dir, "dev.lock"), err)
		}
	}
}
