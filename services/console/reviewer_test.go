package console_test

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestWhatTheCallPageSaysFollowsTheState: the high-risk warning asks a
// reviewer to read before approving, so it shows only while the call
// waits; history shows each call's id and the arguments that ran.
func TestWhatTheCallPageSaysFollowsTheState(t *testing.T) {
	e := newEnv(t)
	waiting := pending("call_hr", "bot", "fs__delete_file", map[string]any{"path": "/srv/data"}, airlockv1.Risk_RISK_HIGH)
	done := pending("call_hr_done", "bot", "fs__delete_file", map[string]any{"path": "/srv/old"}, airlockv1.Risk_RISK_HIGH)
	done.State, done.DecidedBy, done.UpdatedAt = airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, &airlockv1.Actor{Id: "bob"}, timestamppb.Now()
	done.EditedArguments = mustStruct(t, map[string]any{"path": "/srv/old/cache"})
	e.approval.put(waiting)
	e.approval.put(done)
	b := e.browser()
	b.signIn("alice")
	tests := []struct {
		name, path string
		want, not  []string
	}{
		{"a_waiting_high_risk_call_warns", "/calls/bot/call_hr", []string{`id="high-risk"`, "Deadline"}, nil},
		{"a_decided_high_risk_call_does_not_warn", "/calls/bot/call_hr_done", []string{"approved, completed", `id="decided-by"`}, []string{`id="high-risk"`, "Deadline", `id="act-approve"`}},
		{"history_names_the_call_and_the_arguments_that_ran", "/history", []string{"bot/call_hr_done", `{&#34;path&#34;:&#34;/srv/old/cache&#34;}`, "(edited)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.get(tt.path)
			if p.Status != http.StatusOK {
				t.Fatalf("status %d", p.Status)
			}
			for _, w := range tt.want {
				if !strings.Contains(p.Body, w) {
					t.Errorf("%s lacks %q", tt.path, w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(p.Body, w) {
					t.Errorf("%s shows %q", tt.path, w)
				}
			}
		})
	}
}

// TestTheConsoleSaysAnAgentsCancelIsTheAgents: an agent cancels its own
// calls, and its reason is its own words: the call page and history name
// it as the agent, as every surface does (calls.ActorNote), and a person's
// decision with the channel they decided in.
func TestTheConsoleSaysAnAgentsCancelIsTheAgents(t *testing.T) {
	e := newEnv(t)
	canceled := pending("call_gone", "bot", "fs__write_file", map[string]any{"path": "/srv/x"}, airlockv1.Risk_RISK_LOW)
	canceled.State, canceled.UpdatedAt = airlockv1.ApprovalState_APPROVAL_STATE_CANCELED, timestamppb.Now()
	canceled.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"}
	canceled.Reason = "superseded; approved by alice (console) already"
	rejected := pending("call_no", "bot", "fs__write_file", map[string]any{"path": "/srv/y"}, airlockv1.Risk_RISK_LOW)
	rejected.State, rejected.UpdatedAt, rejected.Reason = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, timestamppb.Now(), "not today"
	rejected.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob", Channel: "teams"}
	e.approval.put(canceled)
	e.approval.put(rejected)
	b := e.browser()
	b.signIn("alice")
	for _, tt := range []struct{ name, path, want string }{
		{"the_call_page_names_the_agent", "/calls/bot/call_gone", `<dd id="decided-by">bot (agent): superseded; approved by alice (console) already</dd>`},
		{"the_call_page_names_a_persons_channel", "/calls/bot/call_no", `<dd id="decided-by">bob (teams): not today</dd>`},
		{"history_names_the_agent", "/history", `bot (agent)<div class="muted">superseded; approved by alice (console) already</div>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if p := b.get(tt.path); p.Status != http.StatusOK || !strings.Contains(p.Body, tt.want) {
				t.Errorf("%s (status %d) lacks %q", tt.path, p.Status, tt.want)
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
