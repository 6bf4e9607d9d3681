package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var adminPasswordRE = regexp.MustCompile(`sign in as (\S+) with password (\S+)`)

// adminLogin reads the first admin's name and password from what
// `airlock dev` printed at its first start.
func adminLogin(t *testing.T, dev *devProcess) (user, password string) {
	t.Helper()
	// The output is read from a pipe: it can lag behind /healthz answering.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := adminPasswordRE.FindStringSubmatch(dev.Output()); m != nil {
			return m[1], m[2]
		}
		if time.Now().After(deadline) {
			t.Fatalf("airlock dev did not print the first admin's password:\n%s", dev.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminToken reads the API token `airlock dev` wrote to its data dir.
func adminToken(t *testing.T, dev *devProcess) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dev.DataDir, "admin.token"))
	if err != nil {
		t.Fatalf("airlock dev wrote no admin.token: %v", err)
	}
	return strings.TrimSpace(string(raw))
}

// pendingIDs lists the ids of the calls waiting for a decision, through the REST API.
func pendingIDs(t *testing.T, dev *devProcess, token string) []string {
	t.Helper()
	status, body := bearerGet(t, dev.HTTPURL+"/api/v1/approvals", token)
	if status != http.StatusOK {
		t.Fatalf("list approvals: %d %s", status, body)
	}
	var out struct {
		Records []struct {
			Call struct {
				CallID string `json:"call_id"`
			} `json:"call"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("list approvals: %v: %s", err, body)
	}
	var ids []string
	for _, r := range out.Records {
		ids = append(ids, r.Call.CallID)
	}
	return ids
}

// waitPending waits until the approval service lists call as pending.
func waitPending(t *testing.T, dev *devProcess, token, call string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range pendingIDs(t, dev, token) {
			if id == call {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("call %s is not pending after 15s", call)
}

// bearerGet gets url (the API or a console page) with a bearer token and
// returns status and body.
func bearerGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return bearerDo(t, req, token)
}

// apiPost sends a JSON POST with a bearer token and returns status and body.
func apiPost(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	return bearerDo(t, req, token)
}

func bearerDo(t *testing.T, req *http.Request, token string) (int, string) {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
