package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// authLog is a console stand-in that records the Authorization header of
// every request it receives and answers each with an empty JSON object.
type authLog struct {
	mu   sync.Mutex
	seen []string
	srv  *httptest.Server
}

func newAuthLog(t *testing.T) *authLog {
	t.Helper()
	a := &authLog{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authLog) headers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// TestAPITokenGoesOnlyToItsConsole: a reviewer command sends a data dir's
// admin token to the console that data dir's `airlock dev` wrote into
// console.url, never to a default address (where another person's airlock,
// or anyone, may listen); with no console.url it refuses and says to pass
// --api. An explicit --api or AIRLOCK_API still wins.
func TestAPITokenGoesOnlyToItsConsole(t *testing.T) {
	devConsole, stranger := newAuthLog(t), newAuthLog(t)
	withURL := t.TempDir() // a data dir whose dev runs: it holds the lock
	unlock, err := lockDataDir(natsauth.Dev{DataDir: withURL}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := os.WriteFile(filepath.Join(withURL, "admin.token"), []byte("dev-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withURL, "console.url"), []byte(devConsole.srv.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stopped := t.TempDir() // a data dir whose dev is not running
	if err := os.WriteFile(filepath.Join(stopped, "admin.token"), []byte("stopped-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	personal := filepath.Join(t.TempDir(), "personal.token")
	if err := os.WriteFile(personal, []byte("personal-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		dataDir    string
		envAPI     string
		args       []string
		wantDev    []string // Authorization headers the dev's console receives
		wantStrang []string // ... the stranger receives
		wantErr    string
	}{
		{name: "approvals_go_to_the_data_dirs_console", dataDir: withURL, args: []string{"approvals", "list"},
			wantDev: []string{"Bearer dev-admin-token"}},
		{name: "policy_rules_go_to_the_data_dirs_console", dataDir: withURL, args: []string{"policy", "rules", "rm", "r1"},
			wantDev: []string{"Bearer dev-admin-token"}},
		{name: "shadow_goes_to_the_data_dirs_console", dataDir: withURL, args: []string{"policy", "shadow", "status"},
			wantDev: []string{"Bearer dev-admin-token"}},
		{name: "no_console_url_is_refused_unsent", dataDir: stopped, args: []string{"approvals", "list"},
			wantErr: "no console address: " + filepath.Join(stopped, "console.url") + " is not there"},
		{name: "no_console_url_is_refused_unsent_for_policy", dataDir: stopped, args: []string{"policy", "rules", "rm", "r1"},
			wantErr: "or pass --api URL (or set AIRLOCK_API)"},
		{name: "an_explicit_api_wins", dataDir: withURL, args: []string{"approvals", "list", "--api", stranger.srv.URL},
			wantStrang: []string{"Bearer dev-admin-token"}},
		{name: "AIRLOCK_API_wins", dataDir: withURL, envAPI: stranger.srv.URL, args: []string{"policy", "shadow", "status"},
			wantStrang: []string{"Bearer dev-admin-token"}},
		{name: "a_token_file_goes_to_the_data_dirs_console", dataDir: withURL, args: []string{"approvals", "list", "--token-file", personal},
			wantDev: []string{"Bearer personal-token"}},
		{name: "a_token_file_without_a_console_is_refused", dataDir: stopped, args: []string{"approvals", "list", "--token-file", personal},
			wantErr: "or pass --api URL (or set AIRLOCK_API)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AIRLOCK_DEV_DATA_DIR", tc.dataDir)
			t.Setenv("AIRLOCK_API", tc.envAPI)
			devBefore, strangBefore := len(devConsole.headers()), len(stranger.headers())
			_, err := runCLI(context.Background(), t, tc.args...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("airlock %s: %v", strings.Join(tc.args, " "), err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("airlock %s: err = %v, want it to say %q", strings.Join(tc.args, " "), err, tc.wantErr)
			}
			if got := devConsole.headers()[devBefore:]; strings.Join(got, ",") != strings.Join(tc.wantDev, ",") {
				t.Errorf("the dev's console received %q, want %q", got, tc.wantDev)
			}
			if got := stranger.headers()[strangBefore:]; strings.Join(got, ",") != strings.Join(tc.wantStrang, ",") {
				t.Errorf("the other server received %q, want %q", got, tc.wantStrang)
			}
		})
	}
}
