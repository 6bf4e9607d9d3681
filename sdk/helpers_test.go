package airlock_test

import (
	"testing"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// startNATS starts a NATS server on which agents' reads of their calls'
// stored events are answered (airlock.agent.<agent>.events), as the
// approval service answers them wherever agents run.
func startNATS(t *testing.T) *testenv.NATS {
	t.Helper()
	n := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	testenv.ServeAgentReads(t, nc, config.Default().Stream.Name)
	return n
}
