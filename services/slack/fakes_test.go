package slack_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
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

// sign returns the headers Slack sends with body at ts: v0 signature =
// hex(HMAC-SHA256(secret, "v0:<ts>:<body>")).
func sign(secret string, ts time.Time, body string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("X-Slack-Signature", slackfake.Signature(secret, ts.Unix(), body))
	return h
}

// post sends body with header to the endpoint and returns the status and
// the response body. An answer that does not come within ackDeadlock fails
// the test.
func post(t *testing.T, endpoint string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := (&http.Client{Timeout: ackDeadlock}).Do(req)
	if err != nil {
		t.Fatalf("the interaction was not answered within %s (%v); if Slack held every call (ackWhileHeld), the answer waited on the work it acknowledges", ackDeadlock, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ackWhileHeld posts a correctly signed interaction to endpoint while the
// Slack fake holds every call, and returns the status and body of the
// answer; then it releases the hold. Slack gives up on an answer after 3 s,
// so the endpoint must answer before it does the work, and the work of every
// click ends in a Slack call (the card's update, a private answer, the
// modal): an answer that waited on the work cannot come while Slack holds.
// The test then fails after a generous wait (post's ackDeadlock: a
// deadlock, not a slow answer), or sees the held calls given up that the
// answer waited for.
func ackWhileHeld(t *testing.T, f *fakeSlack, endpoint string, payload any) (int, string) {
	t.Helper()
	f.Hold()
	defer f.Release()
	body := formBody(payload)
	code, resp := post(t, endpoint, sign(signingSecret, time.Now(), body), body)
	if n := f.Abandoned(); n != 0 {
		t.Fatalf("the interaction was answered only after %d held Slack calls were given up: the answer waited on the work", n)
	}
	return code, resp
}

// ackDeadlock is how long ackWhileHeld waits for an answer that can come
// only if the endpoint does not wait on Slack: long enough for any load,
// longer than the Slack client's own 15 s timeout (so a wait on the work
// shows as a held call given up, when the work retries instead).
const ackDeadlock = 20 * time.Second

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
