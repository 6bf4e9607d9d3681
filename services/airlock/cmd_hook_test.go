package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHookInstallFindsTheCredentialFromTheUsersOwnProject: installing the
// hook into another directory than airlock's finds the agent's credential
// under --data and writes its absolute path; without it, the error names
// where it looked and how to say where the credential is.
func TestHookInstallFindsTheCredentialFromTheUsersOwnProject(t *testing.T) {
	data := t.TempDir()
	creds := filepath.Join(data, "agents", "laptop.creds.json")
	if err := os.MkdirAll(filepath.Dir(creds), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte(`{"agent":"laptop","url":"nats://127.0.0.1:1","seed":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The default data directory: .airlock beside the command, which holds no agents.
	t.Setenv("AIRLOCK_DEV_DATA_DIR", "")
	os.Unsetenv("AIRLOCK_DEV_DATA_DIR")
	for _, tc := range []struct {
		name      string
		extra     []string
		wantErr   []string
		wantInCfg string
	}{
		{"with_data_the_hook_runs_with_the_absolute_credential", []string{"--data", data}, nil, "--creds " + creds},
		{"record_results_is_written_into_the_hook_command", []string{"--data", data, "--record-results"}, nil, "--record-results"},
		{"without_data_the_error_says_where_it_looked_and_what_to_pass", nil,
			[]string{"no credential for agent laptop at /", filepath.Join(".airlock", "agents", "laptop.creds.json"), "--data DIR", "--creds FILE"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			project := t.TempDir()
			root := newRootCmd()
			root.SetArgs(append([]string{"hook", "install", "claude", "--agent", "laptop", "--project", "--dir", project,
				"--home", t.TempDir(), "--binary", "/usr/local/bin/airlock"}, tc.extra...))
			err := root.ExecuteContext(context.Background())
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("installed without finding the credential")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error lacks %q: %v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := os.ReadFile(filepath.Join(project, ".claude", "settings.local.json"))
			if err != nil || !strings.Contains(string(cfg), tc.wantInCfg) {
				t.Fatalf("the hook configuration lacks %q: %v\n%s", tc.wantInCfg, err, cfg)
			}
		})
	}
}

// TestTheHookBoundsItsSnapshotsAsConfigured: hooks.snapshots in the hook's
// --config sets what it keeps for undo (the 1 GiB in all had no setting:
// a large repository's snapshots were pruned to it whatever the machine).
func TestTheHookBoundsItsSnapshotsAsConfigured(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml   string
		bytes, total int64
		keep         time.Duration
	}{
		{"defaults", "", 64 << 20, 1 << 30, 7 * 24 * time.Hour},
		{"configured", "hooks:\n  snapshots:\n    max_bytes: 1048576\n    max_total_bytes: 8388608\n    keep: 24h\n", 1 << 20, 8 << 20, 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(cfg, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			o := hookOptions{configFile: cfg, stateDir: dir}
			store, err := o.snapshots()
			if err != nil {
				t.Fatal(err)
			}
			if l := store.Limits; l.MaxBytes != tc.bytes || l.MaxTotalBytes != tc.total || l.MaxAge != tc.keep {
				t.Fatalf("snapshot limits %+v, want max_bytes %d, max_total_bytes %d, keep %s", l, tc.bytes, tc.total, tc.keep)
			}
		})
	}
	o := hookOptions{configFile: filepath.Join(dir, "bad.yaml"), stateDir: dir}
	if err := os.WriteFile(o.configFile, []byte("hooks:\n  snapshots:\n    max_total_bytes: 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := o.snapshots(); err == nil || !strings.Contains(err.Error(), "hooks.snapshots") {
		t.Fatalf("a hooks.snapshots that cannot keep one snapshot: %v; want it refused naming the setting", err)
	}
}
