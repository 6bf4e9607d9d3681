package domain

import (
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestARefusalRepeatedHasOneEventID: the same refusal (call revision,
// actor and channel, action, code) has one id, so the stream's duplicate window drops
// its repeats; any of them differing makes another event.
func TestARefusalRepeatedHasOneEventID(t *testing.T) {
	call := func(rev uint32) *airlockv1.ToolCall {
		return &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: rev}
	}
	dana := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "dana"}
	first := RefusedEvent(call(1), dana, "approve", "already_decided", "decided by alice").GetEventId()
	tests := []struct {
		name string
		ev   *airlockv1.Event
		same bool
	}{
		{"the same refusal, another reason text", RefusedEvent(call(1), dana, "approve", "already_decided", "decided already"), true},
		{"another revision", RefusedEvent(call(2), dana, "approve", "already_decided", "decided by alice"), false},
		{"another actor", RefusedEvent(call(1), &airlockv1.Actor{Id: "erin"}, "approve", "already_decided", "decided by alice"), false},
		{"another action", RefusedEvent(call(1), dana, "reject", "already_decided", "decided by alice"), false},
		{"another code", RefusedEvent(call(1), dana, "approve", "stale_revision", "decided by alice"), false},
		// Slack and then the console: an auditor sees both attempts.
		{"another channel", RefusedEvent(call(1), &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "dana", Channel: "slack"}, "approve", "already_decided", "decided by alice"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ev.GetEventId() == first; got != tt.same {
				t.Fatalf("event id %q against %q: same %v, want %v", tt.ev.GetEventId(), first, got, tt.same)
			}
		})
	}
}
