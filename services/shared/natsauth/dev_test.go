package natsauth_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// A credential is written whole or not at all: `airlock agents add` writes
// one while a running dev renders its accounts from every credential in the
// directory (each start, each change it sees), and a file read between its
// creation and its write was empty ("not JSON like {\"agent\",\"url\",
// \"seed\"}"), which stopped the render. Readers here list the directory
// without pause while agents are added; none may see a credential that is
// not whole, and nothing but the credentials is left behind.
func TestACredentialIsNeverSeenHalfWritten(t *testing.T) {
	dir := t.TempDir()
	const agents = 1000
	done := make(chan struct{})
	var bad []string
	var mu sync.Mutex
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := natsauth.AgentCredentials(dir); err != nil {
					mu.Lock()
					bad = append(bad, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	for i := range agents {
		if _, err := natsauth.NewCredential(filepath.Join(dir, fmt.Sprintf("a%d", i)+natsauth.CredentialSuffix), fmt.Sprintf("a%d", i), "nats://127.0.0.1:4222"); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	readers.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads saw a credential not whole, the first: %s", len(bad), bad[0])
	}
	if _, err := natsauth.NewCredential(filepath.Join(dir, "a0"+natsauth.CredentialSuffix), "a0", ""); err == nil || !strings.Contains(err.Error(), "already has a credential") {
		t.Fatalf("a second credential for a0: %v, want it refused", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != agents {
		t.Fatalf("%d files in the directory, want the %d credentials alone", len(entries), agents)
	}
}
