package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A REST client that submits again under a call id it used, with other
// arguments (README's curl example has a fixed call_id, edited and run
// again), was answered 202 "submitted" though nothing was: the policy
// refuses a call id recorded with other content without a word to the
// agent, and the wait then answered the recorded call's outcome as if it
// were this one's (a newcomer's walkthrough, helper-182). It is a 409 that
// says what to do; the same call again stays harmless.
func TestARESTCallUnderAnIDRecordedWithOtherArgumentsIsRefused(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	bot := agentToken(t, dev, adminToken(t, dev), "bot")
	submit := func(body string) (int, string) {
		t.Helper()
		return apiPost(t, dev.HTTPURL+"/api/v1/calls", bot, body)
	}
	first := `{"call_id":"call-1","tool":"demo__echo","arguments":{"text":"hi"}}`
	if status, body := submit(first); status != http.StatusAccepted {
		t.Fatalf("the first call: %d %s", status, body)
	}
	var out struct {
		Status string `json:"status"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for out.Status != "completed" {
		if time.Now().After(deadline) {
			t.Fatalf("call-1 did not complete: %s", out.Status)
		}
		status, body := bearerGet(t, dev.HTTPURL+"/api/v1/calls/call-1?wait=5s", bot)
		if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("wait for call-1: %d %s", status, body)
		}
	}
	if status, body := submit(first); status != http.StatusAccepted {
		t.Fatalf("the same call again: %d %s, want 202 (harmless)", status, body)
	}
	status, body := submit(`{"call_id":"call-1","tool":"demo__echo","arguments":{"text":"something else"}}`)
	if status != http.StatusConflict || !strings.Contains(body, "call_id call-1 names another call") || !strings.Contains(body, "leave call_id out for a new call") {
		t.Fatalf("another call under call-1: %d %s, want 409 saying the id names another call", status, body)
	}
}
