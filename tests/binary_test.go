package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
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

// Admin connects to the dev NATS as its operator (the admin seed dev generated).
func (d *devProcess) Admin(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return testenv.DevAdmin(t, d.DataDir, d.NATSURL)
}

// Agent connects as agent with the credential under the dev data dir,
// creating it first with `airlock agents add` when it does not exist. The
// credential works as soon as `agents add` returns: it waits for dev to
// take it.
func (d *devProcess) Agent(t *testing.T, agent string) *airlock.Client {
	t.Helper()
	file := natsauth.Dev{DataDir: d.DataDir}.CredentialFile(agent)
	if _, err := os.Stat(file); err != nil {
		out, err := exec.Command(airlockBinary(t), "agents", "add", agent, "--data", d.DataDir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "accepts it now") {
			t.Fatalf("airlock agents add %s: %v (want it to say the running dev accepts it)\n%s", agent, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := airlock.Connect(ctx, file, d.NATSURL)
	if err != nil {
		t.Fatalf("agent %s right after `airlock agents add` returned: %v", agent, err)
	}
	t.Cleanup(c.Close)
	return c
}

// API is the approval service as a front-end reaches it (dev's front-end key).
func (d *devProcess) API(t *testing.T) *approvalapi.Client {
	t.Helper()
	nc, _ := d.Admin(t)
	return approvalapi.New(nc, testenv.DevFrontendKey(t, d.DataDir), "console")
}

// Creds is an agent's credential file under the dev data dir.
func (d *devProcess) Creds(agent string) string {
	return natsauth.Dev{DataDir: d.DataDir}.CredentialFile(agent)
}
