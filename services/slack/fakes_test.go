package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	slackgo "github.com/slack-go/slack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

const (
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	publicURL     = "https://airlock.example.com"
)

// apiCall is one Slack Web API call the fake received.
type apiCall = slackfake.Call

// fakeSlack is the shared Slack fake (slackfake) with waits that fail the
// test: tests wait for a call instead of sleeping.
type fakeSlack struct{ *slackfake.Server }

func startFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	f := &fakeSlack{slackfake.Start()}
	t.Cleanup(f.Stop)
	return f
}

// next waits for the next call of method.
func (f *fakeSlack) next(t *testing.T, method string) apiCall {
	t.Helper()
	c, ok := f.Next(method, 10*time.Second)
	if !ok {
		t.Fatalf("Slack fake received no %s within 10s", method)
	}
	return c
}

// none fails if a call of method is already queued (checked after the
// caller has waited for something that happens later than it would have).
func (f *fakeSlack) none(t *testing.T, method string) {
	t.Helper()
	if c, ok := f.Queued(method); ok {
		t.Fatalf("unexpected %s: %v %s", method, c.Form, c.Body)
	}
}

// config is the test configuration: Slack pointed at the fake, alice and
// bob mapped, carol not.
func config(t *testing.T, natsURL string, f *fakeSlack) svc.Deps {
	cfg := testenv.Config(natsURL)
	cfg.HTTP.PublicURL = publicURL
	cfg.Slack.BotToken = "xoxb-test"
	cfg.Slack.SigningSecret = signingSecret
	cfg.Slack.APIURL = f.GetAPIURL()
	cfg.Slack.Channel = "#airlock"
	cfg.Slack.Users = map[string]string{"U_ALICE": "alice", "U_BOB": "bob"}
	return testenv.Deps(t, cfg)
}

// fastRetry keeps transient-error tests short; 429s still wait Retry-After.
var fastRetry = airlockslack.WithRetry(airlockslack.Retry{Attempts: 4, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond})

// pendingRecord is a call waiting for alice (or bob) in #ops.
func pendingRecord(t *testing.T, callID string) *airlockv1.ApprovalRecord {
	t.Helper()
	args, err := structpb.NewStruct(map[string]any{
		"path":     "/srv/app/config.yaml",
		"content":  strings.Repeat("x", 300), // long, and still shown whole
		"password": "hunter2",
		"mode":     420,
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)
	return &airlockv1.ApprovalRecord{
		Call: &airlockv1.ToolCall{
			CallId: callID, AgentId: "bot-1", ThreadId: "thread-9", OnBehalfOf: "dave",
			Server: "fs", Tool: "write_file", Arguments: args, Revision: 1,
			Reason: "update config <!channel>",
		},
		Decision: &airlockv1.Decision{
			Action: airlockv1.Action_ACTION_ASK, Reason: "tools that change things need a person's approval",
			RuleId: "write", Risk: airlockv1.Risk_RISK_HIGH, Approvers: []string{"alice"},
			Notify: []string{"console", "slack:#ops"}, Redact: []string{"/password"},
			Timeout: durationpb.New(5 * time.Minute),
		},
		State:    airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		Deadline: timestamppb.New(deadline),
	}
}

// fakeApprovals is a small stand-in for the approval service's micro
// endpoints (decide, get) with its rules: approvers only, the first
// decision wins, a later one changes nothing and says so.
type fakeApprovals struct {
	mu      sync.Mutex
	recs    map[string]*airlockv1.ApprovalRecord
	decides chan *airlockv1.DecideRequest
}

func startFakeApprovals(t *testing.T, deps svc.Deps, recs ...*airlockv1.ApprovalRecord) *fakeApprovals {
	t.Helper()
	a := &fakeApprovals{recs: map[string]*airlockv1.ApprovalRecord{}, decides: make(chan *airlockv1.DecideRequest, 100)}
	for _, r := range recs {
		a.put(r)
	}
	srv, err := micro.AddService(deps.NC, micro.Config{Name: approvalapi.Service, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	add := func(name string, h micro.HandlerFunc) {
		if err := srv.AddEndpoint(name, h, micro.WithEndpointSubject(approvalapi.Subject(name))); err != nil {
			t.Fatal(err)
		}
	}
	add(approvalapi.Decide, rpc.Handle(deps.Log, func() *airlockv1.DecideRequest { return &airlockv1.DecideRequest{} }, a.decide))
	add(approvalapi.Get, rpc.Handle(deps.Log, func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} },
		func(_ context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
			rec, ok := a.get(req.CallId)
			if !ok {
				return nil, apierr.New(apierr.NotFound, "no call %s", req.CallId)
			}
			return &airlockv1.GetResponse{Record: rec}, nil
		}))
	return a
}

func (a *fakeApprovals) put(r *airlockv1.ApprovalRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs[r.Call.CallId] = proto.Clone(r).(*airlockv1.ApprovalRecord)
}

func (a *fakeApprovals) get(id string) (*airlockv1.ApprovalRecord, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.recs[id]
	if !ok {
		return nil, false
	}
	return proto.Clone(r).(*airlockv1.ApprovalRecord), true
}

func (a *fakeApprovals) decide(_ context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	a.decides <- req
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.recs[req.CallId]
	switch {
	case !ok:
		return nil, apierr.New(apierr.NotFound, "no call %s", req.CallId)
	case !contains(rec.Decision.Approvers, req.Principal.GetId()):
		return nil, apierr.New(apierr.NotAuthorized, "%s is not among the approvers of call %s.", req.Principal.GetId(), req.CallId)
	case rec.State != airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
		return &airlockv1.DecideResponse{Record: proto.Clone(rec).(*airlockv1.ApprovalRecord), Message: "already decided"}, nil
	}
	rec.State = map[airlockv1.DecisionKind]airlockv1.ApprovalState{
		airlockv1.DecisionKind_DECISION_KIND_APPROVE:         airlockv1.ApprovalState_APPROVAL_STATE_APPROVED,
		airlockv1.DecisionKind_DECISION_KIND_REJECT:          airlockv1.ApprovalState_APPROVAL_STATE_REJECTED,
		airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES: airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED,
	}[req.Kind]
	rec.DecidedBy, rec.Reason = req.Principal, req.Reason
	return &airlockv1.DecideResponse{Record: proto.Clone(rec).(*airlockv1.ApprovalRecord), Changed: true, Message: "done"}, nil
}

func (a *fakeApprovals) nextDecide(t *testing.T) *airlockv1.DecideRequest {
	t.Helper()
	select {
	case r := <-a.decides:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the approval service received no decision within 10s")
		return nil
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// sign returns the headers Slack sends with body at ts: v0 signature =
// hex(HMAC-SHA256(secret, "v0:<ts>:<body>")).
func sign(secret string, ts time.Time, body string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("X-Slack-Signature", slackfake.Signature(secret, ts.Unix(), body))
	return h
}

// post sends body with header to the endpoint and returns the status, the
// response body and how long the answer took.
func post(t *testing.T, endpoint string, header http.Header, body string) (int, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start)
}

// formBody wraps a payload as Slack does: payload=<url-encoded JSON>.
func formBody(payload any) string {
	body, _ := slackfake.InteractionBody(payload)
	return body
}

// buttonClick is the block_actions payload Slack sends when user clicks the
// button actionID on the card the fake received as posted.
func buttonClick(t *testing.T, user string, posted apiCall, channel, ts, actionID string) map[string]any {
	t.Helper()
	var blocks slackgo.Blocks
	if err := json.Unmarshal([]byte(posted.Blocks()), &blocks); err != nil {
		t.Fatal(err)
	}
	var value string
	for _, b := range blocks.BlockSet {
		if ab, ok := b.(*slackgo.ActionBlock); ok {
			for _, el := range ab.Elements.ElementSet {
				if btn, ok := el.(*slackgo.ButtonBlockElement); ok && btn.ActionID == actionID {
					value = btn.Value
				}
			}
		}
	}
	if value == "" {
		t.Fatalf("the card has no %s button: %s", actionID, posted.Blocks())
	}
	return map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": strings.ToLower(strings.TrimPrefix(user, "U_")), "name": strings.ToLower(strings.TrimPrefix(user, "U_")), "team_id": "T1"},
		"api_app_id":   "A1",
		"token":        "verification-token-unused",
		"container":    map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
		"trigger_id":   "1337.42." + strconv.FormatInt(time.Now().UnixNano(), 16),
		"team":         map[string]any{"id": "T1", "domain": "example"},
		"channel":      map[string]any{"id": channel, "name": "ops"},
		"response_url": "https://hooks.slack.com/actions/T1/1/x",
		"actions": []any{map[string]any{
			"action_id": actionID, "block_id": airlockslack.BlockActions, "type": "button", "value": value,
			"text": map[string]any{"type": "plain_text", "text": actionID}, "action_ts": fmt.Sprintf("%d.000100", time.Now().Unix()),
		}},
	}
}

// viewSubmission is the payload Slack sends when user submits the modal
// that views.open received, with text typed into the reason field.
func viewSubmission(t *testing.T, user string, opened apiCall, text string) map[string]any {
	t.Helper()
	var req struct {
		View struct {
			CallbackID      string `json:"callback_id"`
			PrivateMetadata string `json:"private_metadata"`
		} `json:"view"`
	}
	if err := json.Unmarshal(opened.Body, &req); err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"type": "view_submission",
		"team": map[string]any{"id": "T1"},
		"user": map[string]any{"id": user, "name": strings.ToLower(strings.TrimPrefix(user, "U_"))},
		"view": map[string]any{
			"id": "V1", "type": "modal", "callback_id": req.View.CallbackID, "private_metadata": req.View.PrivateMetadata,
			"state": map[string]any{"values": map[string]any{
				airlockslack.BlockReason: map[string]any{airlockslack.InputReason: map[string]any{"type": "plain_text_input", "value": text}},
			}},
		},
	}
}
