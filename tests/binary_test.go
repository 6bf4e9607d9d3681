package tests

import (
	"fmt"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// airlockBinary builds the airlock command once per test run.
func airlockBinary(t *testing.T) string { return testenv.AirlockBinary(t) }

// devProcess is a running `airlock dev`.
type devProcess struct {
	*testenv.Process
	NATSURL  string
	HTTPURL  string
	DataDir  string
	natsPort int
	httpAddr string
}

// startDev runs `airlock dev` with dataDir (on free ports when natsPort is 0
// and httpAddr empty) and waits for /healthz.
func startDev(t *testing.T, dataDir string, natsPort int, httpAddr string, extraEnv ...string) *devProcess {
	t.Helper()
	if natsPort == 0 {
		natsPort = freePort(t)
	}
	if httpAddr == "" {
		httpAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	p := testenv.StartAirlock(t, httpAddr, extraEnv, "dev", "--data", dataDir, "--nats-port", fmt.Sprint(natsPort), "--http", httpAddr)
	return &devProcess{Process: p, NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", natsPort), HTTPURL: p.HTTPURL,
		DataDir: dataDir, natsPort: natsPort, httpAddr: httpAddr}
}

// serveProcess is a running `airlock serve SERVICE...`.
type serveProcess struct {
	*testenv.Process
	HTTP string
}

// startServe runs `airlock serve` with args (services and flags) against
// natsURL, on a free HTTP port, and waits until /healthz answers 200.
func startServe(t *testing.T, natsURL string, env []string, args ...string) *serveProcess {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	full := append(append([]string{"serve"}, args...), "--nats", natsURL, "--http", addr)
	p := testenv.StartAirlock(t, addr, env, full...)
	return &serveProcess{Process: p, HTTP: p.HTTPURL}
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
