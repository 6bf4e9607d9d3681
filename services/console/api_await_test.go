package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
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

// TestARESTWaitSaysTheAgentIsOverItsBudget: a call the policy did not
// decide because its agent is over its budget is answered only by the
// policy's notice, which is not stored; an agent waiting on GET
// /api/v1/calls/{id}?wait= when it comes is told so at once — 503 with the
// sentence naming the budget and when to retry — instead of "pending"
// after the whole wait.
func TestARESTWaitSaysTheAgentIsOverItsBudget(t *testing.T) {
	e := newEnv(t)
	agentTok := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"rest_over","tool":"fs__write_file","arguments":{"path":"/tmp/x"}}`); p.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", p.Status, p.Body)
	}
	intakeRequest(t, e, "bot", "rest_over")
	type answer struct {
		status     int
		body       string
		retryAfter string
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/calls/rest_over?wait=20s", nil)
		req.Header.Set("Authorization", "Bearer "+agentTok)
		resp, err := apiClient.Do(req)
		if err != nil {
			answered <- answer{0, err.Error(), ""}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b), resp.Header.Get("Retry-After")}
	}()
	notice, err := json.Marshal(ingress.NewOverBudget("bot", "rest_over", 1, 1, 1<<20, 12*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The notice is not stored: it reaches the wait only once the wait
	// follows the call, so the policy's publish is repeated until answered.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case got := <-answered:
			if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, "agent bot is over its budget of 1 calls a minute") || !strings.Contains(got.body, "retry after about 12 s") || got.retryAfter != "12" || !strings.Contains(got.body, `"over_budget":{"agent_id":"bot","call_id":"rest_over","revision":1,"calls_per_minute":1,`) {
				t.Fatalf("GET ?wait= of a call over the agent's budget: %d %s (Retry-After %q); want 503 saying the agent is over its budget and when to retry, Retry-After 12 and the notice in over_budget", got.status, got.body, got.retryAfter)
			}
			waiting = false
		case <-tick.C:
			if err := e.deps.NC.PublishMsg(&nats.Msg{Subject: subject.OverBudgetNotice("bot", "rest_over"), Data: notice}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// An agent asks once it submitted, and the notice can come in between:
	// the console heard it, and answers a later GET with it (until its
	// retry after) rather than "no such call".
	testenv.Eventually(t, 10*time.Second, "a GET without ?wait= after the notice to say the agent is over its budget", func() bool {
		p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/rest_over", "")
		return p.Status == http.StatusServiceUnavailable && strings.Contains(p.Body, "agent bot is over its budget")
	})
	// Submitted again, the call is decided anew: the notice no longer answers.
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"rest_over","tool":"fs__write_file","arguments":{"path":"/tmp/x"}}`); p.Status != http.StatusAccepted {
		t.Fatalf("submit again: %d %s", p.Status, p.Body)
	}
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/rest_over", ""); p.Status != http.StatusOK || !strings.Contains(p.Body, `"pending"`) {
		t.Fatalf("GET after the call was submitted again: %d %s; want it pending", p.Status, p.Body)
	}
}

// TestARESTWaitOnARevisionIsNotAnsweredByANoticeAboutAnother: the notice
// named no revision and the console answered with one it heard before it
// looked at the call, so a wait on revision 1, recorded and pending, was
// answered 503 because the agent's revision 2 was over its budget. A wait
// on ?rev= is answered by a notice about that revision alone; a wait that
// names none, by one about a revision newer than any recorded (the agent's
// newest request, which was not decided).
func TestARESTWaitOnARevisionIsNotAnsweredByANoticeAboutAnother(t *testing.T) {
	e := newEnv(t)
	agentTok := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"two_revs","tool":"fs__write_file","arguments":{"path":"/tmp/x"}}`); p.Status != http.StatusAccepted {
		t.Fatalf("submit revision 1: %d %s", p.Status, p.Body)
	}
	intakeRequest(t, e, "bot", "two_revs")
	// Revision 1 is recorded, and waits for a person.
	for _, ev := range []*airlockv1.Event{
		{AgentId: "bot", CallId: "two_revs", Revision: 1, Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{
			Call: &airlockv1.ToolCall{CallId: "two_revs", AgentId: "bot", Revision: 1, Tool: "fs__write_file"}}}},
		{AgentId: "bot", CallId: "two_revs", Revision: 1, Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{
			Decision: &airlockv1.Decision{Reason: "writes need a person"}}}},
	} {
		if _, err := e.deps.Publisher("policy").Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"two_revs","revision":2,"tool":"fs__write_file","arguments":{"path":"/tmp/y"}}`); p.Status != http.StatusAccepted {
		t.Fatalf("submit revision 2: %d %s", p.Status, p.Body)
	}
	notice, err := json.Marshal(ingress.NewOverBudget("bot", "two_revs", 2, 1, 1<<20, 12*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.deps.NC.Publish(subject.OverBudgetNotice("bot", "two_revs"), notice); err != nil {
		t.Fatal(err)
	}
	// The console has heard it once a wait on revision 2 says so.
	testenv.Eventually(t, 10*time.Second, "a GET ?rev=2 to say revision 2 is over the agent's budget", func() bool {
		p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/two_revs?rev=2", "")
		return p.Status == http.StatusServiceUnavailable && strings.Contains(p.Body, `"revision":2`)
	})
	for _, tc := range []struct {
		name, query string
		status      int
		body        string
	}{
		{"revision_1_is_pending", "?rev=1", http.StatusOK, `"waiting_for":"a person"`},
		{"revision_2_was_not_decided", "?rev=2", http.StatusServiceUnavailable, "agent bot is over its budget"},
		{"the_newest_request_was_not_decided", "", http.StatusServiceUnavailable, "agent bot is over its budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/two_revs"+tc.query, "")
			if p.Status != tc.status || !strings.Contains(p.Body, tc.body) {
				t.Fatalf("GET %s: %d %s; want %d with %s", tc.query, p.Status, p.Body, tc.status, tc.body)
			}
		})
	}
}

// TestARESTWaitPrefersTheNoticeToTheRefusalStoredWithIt: the policy records
// the first requests over budget of a minute as invalid as well as sending
// its notice; a wait that reads the stored refusal first still answers
// 503 with the notice (when to retry), as it did when the console answered
// with a notice it heard before it looked at the call.
func TestARESTWaitPrefersTheNoticeToTheRefusalStoredWithIt(t *testing.T) {
	e := newEnv(t)
	agentTok := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"refused_over","tool":"fs__write_file","arguments":{"path":"/tmp/x"}}`); p.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", p.Status, p.Body)
	}
	intakeRequest(t, e, "bot", "refused_over")
	refusal := &airlockv1.Event{AgentId: "bot", CallId: "refused_over", Revision: 1, Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{
		Reason: "agent bot sent more than limits.agent_calls_per_minute (1 calls) or limits.agent_request_bytes_per_minute (1048576 bytes) in the last minute, so this request was not decided"}}}
	if _, err := e.deps.Publisher("policy").Publish(context.Background(), refusal, ""); err != nil {
		t.Fatal(err)
	}
	notice, err := json.Marshal(ingress.NewOverBudget("bot", "refused_over", 1, 1, 1<<20, 12*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.deps.NC.Publish(subject.OverBudgetNotice("bot", "refused_over"), notice); err != nil {
		t.Fatal(err)
	}
	// Once heard, every GET says so: never the stored refusal.
	testenv.Eventually(t, 10*time.Second, "a GET to say the call is over the agent's budget", func() bool {
		p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/refused_over", "")
		if p.Status == http.StatusOK && strings.Contains(p.Body, `"invalid"`) {
			return false // not heard yet
		}
		return p.Status == http.StatusServiceUnavailable && strings.Contains(p.Body, "agent bot is over its budget")
	})
	for range 3 {
		if p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/refused_over", ""); p.Status != http.StatusServiceUnavailable || !strings.Contains(p.Body, `"over_budget"`) {
			t.Fatalf("GET of a call refused over budget, its notice heard: %d %s; want 503 with the notice", p.Status, p.Body)
		}
	}
}

// TestOtherAgentsNoticesDoNotPushOutAnAgentsOwn (R7 F2): the console kept
// one record of the notices it heard for all agents, oldest first, so
// other agents over their budgets pushed agent bot's notice out within
// seconds and bot's REST wait answered 404 "no such call" instead of 503
// "retry". Each agent's notices push out only its own.
func TestOtherAgentsNoticesDoNotPushOutAnAgentsOwn(t *testing.T) {
	e := newEnv(t)
	agentTok := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	publish := func(agent, call string) {
		t.Helper()
		notice, err := json.Marshal(ingress.NewOverBudget(agent, call, 1, 1, 1<<20, 12*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.deps.NC.Publish(subject.OverBudgetNotice(agent, call), notice); err != nil {
			t.Fatal(err)
		}
	}
	overBudget := func(call string) bool {
		p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/"+call, "")
		return p.Status == http.StatusServiceUnavailable && strings.Contains(p.Body, "agent bot is over its budget")
	}
	publish("bot", "kept")
	testenv.Eventually(t, 10*time.Second, "bot's notice to be heard", func() bool { return overBudget("kept") })
	// Four agents, each sending as many notices as the policy sends one
	// agent in a minute: more than the console kept for all agents.
	for _, agent := range []string{"a1", "a2", "a3", "a4"} {
		for i := range 1100 {
			publish(agent, fmt.Sprintf("flood%d", i))
		}
	}
	// Heard after the flood (one subscription hears in order).
	publish("bot", "last")
	testenv.Eventually(t, 10*time.Second, "bot's notice after the flood to be heard", func() bool { return overBudget("last") })
	if p := apiCall(t, e.srv.URL, agentTok, http.MethodGet, "/api/v1/calls/kept", ""); p.Status != http.StatusServiceUnavailable {
		t.Fatalf("GET of bot's call over budget after other agents' notices: %d %s; want 503 with its notice, still kept", p.Status, p.Body)
	}
}
