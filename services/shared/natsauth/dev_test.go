package natsauth_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// airlock dev points the agents' credentials at where its NATS listens
// (a start on another port left them dialing the old one), but only those
// its own starts wrote: a credential naming another host was set by hand,
// a link is the operator's, and a file keeps its mode and every field
// (helper-183's review).
func TestDevPointsOnlyItsOwnAgentCredentialsAtItsNATS(t *testing.T) {
	d := natsauth.Dev{DataDir: t.TempDir()}
	const now = "nats://127.0.0.1:4555"
	write := func(agent, url string, mode os.FileMode, extra map[string]any) string {
		t.Helper()
		file := d.CredentialFile(agent)
		c, err := natsauth.NewCredential(file, agent, url)
		if err != nil {
			t.Fatal(err)
		}
		fields := map[string]any{"agent": c.Agent, "url": c.URL, "seed": c.Seed}
		for k, v := range extra {
			fields[k] = v
		}
		data, _ := json.Marshal(fields)
		if err := os.WriteFile(file, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
		return file
	}
	moved := write("moved", "nats://127.0.0.1:4222", 0o640, map[string]any{"note": "kept"})
	local := write("local", "nats://localhost:4333", 0o600, nil)
	elsewhere := write("elsewhere", "nats://host.docker.internal:4222", 0o600, nil)
	current := write("current", now, 0o600, nil)
	target := filepath.Join(t.TempDir(), "linked.creds.json")
	if err := os.Rename(write("linked", "nats://127.0.0.1:4222", 0o600, nil), target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, d.CredentialFile("linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d.CredentialFile("a-directory"), 0o700); err != nil {
		t.Fatal(err)
	}

	got, skipped := d.PointAgentsAt(now)
	slices.Sort(got)
	if !slices.Equal(got, []string{"local", "moved"}) || len(skipped) != 0 {
		t.Fatalf("pointed %v, skipped %v; want local and moved, nothing skipped", got, skipped)
	}
	url := func(file string) string {
		t.Helper()
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		return f["url"].(string)
	}
	for file, want := range map[string]string{moved: now, local: now, elsewhere: "nats://host.docker.internal:4222", current: now, target: "nats://127.0.0.1:4222"} {
		if got := url(file); got != want {
			t.Errorf("%s names %s, want %s", filepath.Base(file), got, want)
		}
	}
	if fi, err := os.Stat(moved); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the rewritten credential's mode: %v, %v; want 0640 as before", fi.Mode().Perm(), err)
	}
	if raw, _ := os.ReadFile(moved); !json.Valid(raw) || !containsField(raw, "note") {
		t.Errorf("the rewritten credential lost a field: %s", raw)
	}
	if fi, err := os.Lstat(d.CredentialFile("linked")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the linked credential is no longer a link: %v", err)
	}
	if _, err := natsauth.ReadCredential(moved); err != nil {
		t.Errorf("the rewritten credential does not read: %v", err)
	}
}

func containsField(raw []byte, name string) bool {
	var f map[string]any
	return json.Unmarshal(raw, &f) == nil && f[name] != nil
}
