package tests

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestPythonClient runs sdk/python's unit tests (python3 -m unittest)
// against a real `airlock dev`, with an agent token created through the
// REST API and a run-time rule that denies writes under secret/.
func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed: install Python 3.9 or newer (apt-get install python3); the client needs nothing else")
	}
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "")
	admin := adminToken(t, dev)
	token, other := agentToken(t, dev, admin, "pybot"), agentToken(t, dev, admin, "intruder")
	status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", admin,
		`{"id":"py-deny-secrets","priority":1,"agent":"pybot","pattern":"demo__write_file","args":{"/path":"secret/**"},"effect":"deny","reason":"secrets stay put"}`)
	if status != http.StatusOK {
		t.Fatalf("add the deny rule: %d %s", status, body)
	}
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	// The rule is in force once a call the policy decides says so.
	waitForRule(t, dev.HTTPURL, token)
	cmd := exec.Command(python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AIRLOCK_URL="+dev.HTTPURL, "AIRLOCK_TOKEN="+token,
		"AIRLOCK_TEST_ADMIN_TOKEN="+admin, "AIRLOCK_TEST_AGENT=pybot", "AIRLOCK_TEST_OTHER_TOKEN="+other, "PYTHONDONTWRITEBYTECODE=1",
		// The SDK's copy of the default bound must equal the server's.
		"AIRLOCK_TEST_MAX_REQUEST_BYTES="+strconv.Itoa(config.Default().Limits.MaxRequestBytes))
	f := testenv.NewTLSFiles(t)
	cmd.Env = append(cmd.Env, "AIRLOCK_TEST_HTTPS_URL="+httpsProxy(t, dev.HTTPURL, f), "AIRLOCK_TEST_TLS_CA="+f.CA, "AIRLOCK_TEST_TLS_OTHER_CA="+f.OtherCA)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "skipped") {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// httpsProxy serves target over HTTPS with f's server certificate (for
// 127.0.0.1 and localhost), as a TLS-terminating proxy in front of the
// console does; it returns its https URL.
func httpsProxy(t *testing.T, target string, f testenv.TLSFiles) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// The clients the test refuses on purpose end their handshakes.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// agentToken creates an agent token for agent through the REST API.
func agentToken(t *testing.T, dev *devProcess, admin, agent string) string {
	t.Helper()
	status, body := apiPost(t, dev.HTTPURL+"/api/v1/tokens", admin, `{"name":"tests","kind":"agent","agent_id":"`+agent+`"}`)
	var tok struct {
		Token string `json:"token"`
	}
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("create an agent token for %s: %d %s", agent, status, body)
	}
	return tok.Token
}

// waitForRule submits a write under secret/ as the agent until the policy
// denies it (the run-time rule reached the policy service).
func waitForRule(t *testing.T, url, token string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		status, body := apiPost(t, url+"/api/v1/calls", token, `{"tool":"demo__write_file","arguments":{"path":"secret/probe","content":"x"}}`)
		if status != http.StatusAccepted {
			t.Fatalf("submit a probe: %d %s", status, body)
		}
		var sub struct {
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal([]byte(body), &sub)
		req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/calls/"+sub.CallID+"?wait=10s", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Status string `json:"status"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if out.Status == "denied" {
			return
		}
	}
	t.Fatal("the deny rule was not in force within 15s")
}
