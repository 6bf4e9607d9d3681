package gateway

import (
	"os"
	"testing"

	"github.com/airlock-gate/airlock/services/gateway/codemode"
)

// TestMain lets this test binary run run_code scripts as the gateway's own
// program does: in a child process of itself.
func TestMain(m *testing.M) {
	codemode.MaybeChild()
	os.Exit(m.Run())
}
