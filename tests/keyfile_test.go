package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A seal key is what makes a decision runnable or a request a front-end's:
// an agent on the host that could read the decision key would seal its own
// approvals. `airlock keys generate` writes keys only their owner may read,
// and a service given a key file that its group or others may read refuses
// to start, saying how to fix it, instead of sealing with a key others hold.
func TestServicesRefuseSealKeysOthersCanRead(t *testing.T) {
	n := testenv.StartNATS(t)
	testenv.Deps(t, testenv.Config(n.URL())) // streams and buckets provisioned, as by `airlock provision`
	dir := t.TempDir()
	keys := map[string]string{}
	for _, name := range []string{"decision", "frontend"} {
		keys[name] = filepath.Join(dir, name+".key")
		if out, err := runAirlock(t, "keys", "generate", keys[name]); err != nil {
			t.Fatalf("airlock keys generate: %v\n%s", err, out)
		}
		if st, err := os.Stat(keys[name]); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("airlock keys generate wrote mode %v (%v), want 0600", st.Mode().Perm(), err)
		}
	}
	for _, tt := range []struct {
		name, key string
		mode      os.FileMode
	}{
		{"decision key anyone may read", "decision", 0o644},
		{"front-end key its group may read", "frontend", 0o640},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Chmod(keys[tt.key], tt.mode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(keys[tt.key], 0o600) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, airlockBinary(t), "serve", "policy", "--nats", n.URL(), "--http", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
			cmd.Env = append(os.Environ(), "AIRLOCK_SECURITY_DECISION_KEY_FILE="+keys["decision"], "AIRLOCK_SECURITY_FRONTEND_KEY_FILE="+keys["frontend"])
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the policy service ran with a %s key of mode %04o:\n%s", tt.key, tt.mode, out)
			}
			if err == nil || !strings.Contains(string(out), "can be read by others") || !strings.Contains(string(out), "chmod 600 "+keys[tt.key]) {
				t.Fatalf("exit %v, output:\n%s\nwant a refusal that says to chmod 600 %s", err, out, keys[tt.key])
			}
		})
	}
}
