package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAddingAnAgentWhileDevRunsLogsNoRefusedConnection: `airlock agents
// add` waits until the running dev's server has loaded the new credential
// before it connects with it, so dev's log shows no authentication error —
// which reads like an attack — for an agent being added (it connected every
// 100 ms from the moment the credential was written, and the server, which
// loads new credentials once a second, refused the first tries).
func TestAddingAnAgentWhileDevRunsLogsNoRefusedConnection(t *testing.T) {
	t.Parallel() // it mostly waits for dev to load the agents
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "")
	for _, agent := range []string{"zed", "yan", "xu"} {
		dev.Agent(t, agent) // `airlock agents add`, which must say dev accepts it now
	}
	for _, line := range strings.Split(dev.Output(), "\n") {
		if strings.Contains(strings.ToLower(line), "authentication error") || strings.Contains(strings.ToLower(line), "authorization violation") {
			t.Fatalf("airlock dev logged a refused connection while agents were added:\n%s", line)
		}
	}
}
