package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestAPendingRESTCallSaysWhatItWaitsFor: an agent polling GET
// /api/v1/calls/{id} of a call that waits for a person gets why, who may
// decide, until when and the call's console page; and a ?wait= longer than
// console.max_wait says it was cut, in the body and in a header.
func TestAPendingRESTCallSaysWhatItWaitsFor(t *testing.T) {
	e := newEnvWith(t, func(c *config.Config) {
		c.Console.MaxWait = time.Second
		c.HTTP.PublicURL = "https://airlock.example"
	})
	agentTok := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, callID, wait string
		asked              bool   // the policy asked a person
		wantFor, wantCap   string // waiting_for, wait_capped_to
	}{
		{"a_call_the_policy_has_not_decided_waits_for_the_policy", "rest_a", "", false, "the policy", ""},
		{"a_call_waiting_for_a_person_names_why_who_until_when_and_where", "rest_b", "", true, "a person", ""},
		{"a_wait_longer_than_max_wait_says_it_was_cut", "rest_c", "?wait=10m", true, "a person", "1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"`+tc.callID+`","tool":"fs__write_file","arguments":{"path":"/tmp/x"}}`); p.Status != http.StatusAccepted {
				t.Fatalf("submit: %d %s", p.Status, p.Body)
			}
			intakeRequest(t, e, "bot", tc.callID)
			if tc.asked {
				ev := &airlockv1.Event{AgentId: "bot", CallId: tc.callID, Revision: 1, Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{
					Decision: &airlockv1.Decision{Reason: "writes need a person", RuleId: "write", Risk: airlockv1.Risk_RISK_MEDIUM, Approvers: []string{"group:reviewers"}},
					Deadline: timestamppb.New(deadline)}}}
				if _, err := e.deps.Publisher("policy").Publish(context.Background(), ev, ""); err != nil {
					t.Fatal(err)
				}
			}
			p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/"+tc.callID+tc.wait, "")
			var got struct {
				Status       string    `json:"status"`
				WaitingFor   string    `json:"waiting_for"`
				Reason       string    `json:"reason"`
				Approvers    []string  `json:"approvers"`
				Deadline     time.Time `json:"deadline"`
				ConsoleURL   string    `json:"console_url"`
				WaitCappedTo string    `json:"wait_capped_to"`
			}
			if p.Status != http.StatusOK || json.Unmarshal([]byte(p.Body), &got) != nil || got.Status != "pending" || got.WaitingFor != tc.wantFor || got.WaitCappedTo != tc.wantCap {
				t.Fatalf("%d %s", p.Status, p.Body)
			}
			if tc.asked && (got.Reason != "writes need a person" || len(got.Approvers) != 1 || !got.Deadline.Equal(deadline) || got.ConsoleURL != "https://airlock.example/calls/bot/"+tc.callID) {
				t.Fatalf("the pending call does not say what it waits for: %s", p.Body)
			}
			if h := p.Header.Get("Airlock-Wait-Capped"); h != tc.wantCap {
				t.Fatalf("Airlock-Wait-Capped %q, want %q", h, tc.wantCap)
			}
		})
	}
}

// TestAReportOnACallTheAgentNeverSubmittedIsNotFound: POST
// /api/v1/calls/{id}/report answers 404, as the API document says, for an id
// the agent never submitted (another agent's call among them), instead of
// "reported" for a report the policy could only refuse later; a report of
// the agent's own call is still accepted.
func TestAReportOnACallTheAgentNeverSubmittedIsNotFound(t *testing.T) {
	e := newEnv(t)
	bot := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	mallory := newToken(t, e, "root", `{"name":"mallory","kind":"agent","agent_id":"mallory"}`)
	if p := apiCall(t, e.srv.URL, bot, http.MethodPost, "/api/v1/calls", `{"call_id":"bots_call","tool":"fs__write_file","arguments":{"path":"/tmp/x"}}`); p.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", p.Status, p.Body)
	}
	intakeRequest(t, e, "bot", "bots_call")
	for _, tc := range []struct {
		name, token, call string
		want              int
	}{
		{"an_id_nobody_submitted", mallory, "nonexist9", http.StatusNotFound},
		{"another_agents_call", mallory, "bots_call", http.StatusNotFound},
		{"the_agents_own_call", bot, "bots_call", http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := apiCall(t, e.srv.URL, tc.token, http.MethodPost, "/api/v1/calls/"+tc.call+"/report", `{"revision":1,"result":{"ok":true}}`)
			if p.Status != tc.want {
				t.Fatalf("report on %s: %d %s, want %d", tc.call, p.Status, p.Body, tc.want)
			}
			if tc.want == http.StatusNotFound && !strings.Contains(p.Body, "submitted no call") {
				t.Fatalf("the 404 does not say why: %s", p.Body)
			}
		})
	}
}
