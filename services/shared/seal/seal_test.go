package seal

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestRequestSealVerifiesOnlyWhatWasSealed(t *testing.T) {
	k, other := NewKey(), NewKey()
	now := time.Now()
	sealed := func() *nats.Msg {
		m := nats.NewMsg("airlock.api.approval.decide")
		m.Data = []byte(`{"callId":"c1"}`)
		k.Request(m, "console", now)
		return m
	}
	for _, tc := range []struct {
		name   string
		mangle func(*nats.Msg) (subject string, key Key, at time.Time)
		ok     bool
	}{
		{"accepts_the_sealed_request", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, k, now }, true},
		{"refuses_another_endpoint", func(m *nats.Msg) (string, Key, time.Time) { return "airlock.api.policy.rules.put", k, now }, false},
		{"refuses_an_altered_body", func(m *nats.Msg) (string, Key, time.Time) {
			m.Data = []byte(`{"callId":"c2"}`)
			return m.Subject, k, now
		}, false},
		{"refuses_another_key", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, other, now }, false},
		{"refuses_a_stale_seal", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, k, now.Add(Window + time.Second) }, false},
		{"refuses_a_missing_seal", func(m *nats.Msg) (string, Key, time.Time) { m.Header.Del(HeaderSeal); return m.Subject, k, now }, false},
		{"refuses_a_renamed_frontend", func(m *nats.Msg) (string, Key, time.Time) {
			m.Header.Set(HeaderFrontend, "gateway")
			return m.Subject, k, now
		}, false},
		{"refuses_with_no_key", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, Key{}, now }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sealed()
			subj, key, at := tc.mangle(m)
			fe, err := key.VerifyRequest(subj, m.Header, m.Data, at)
			if tc.ok != (err == nil) || (tc.ok && fe != "console") || (!tc.ok && !errors.Is(err, ErrUnsealed)) {
				t.Fatalf("VerifyRequest = %q, %v", fe, err)
			}
		})
	}
}

func TestDecisionSealBindsCallAndArguments(t *testing.T) {
	k := NewKey()
	mk := func() *airlockv1.Event {
		return &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{
			Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "echo"},
			Decision: &airlockv1.Decision{ArgumentsDigest: "abc"}}}}
	}
	ev := mk()
	if err := k.SealDecision(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := k.VerifyDecision(ev); err != nil {
		t.Fatalf("a sealed decision does not verify: %v", err)
	}
	for name, mangle := range map[string]func(*airlockv1.Event){
		"another_agent":    func(e *airlockv1.Event) { e.AgentId = "evil"; e.GetAllowed().Call.AgentId = "evil" },
		"another_tool":     func(e *airlockv1.Event) { e.GetAllowed().Call.Tool = "write_file" },
		"another_digest":   func(e *airlockv1.Event) { e.GetAllowed().Decision.ArgumentsDigest = "def" },
		"another_revision": func(e *airlockv1.Event) { e.Revision = 2; e.GetAllowed().Call.Revision = 2 },
		"made_gate_only":   func(e *airlockv1.Event) { e.GetAllowed().Call.AgentRuns = true },
		"no_seal":          func(e *airlockv1.Event) { e.Seal = "" },
	} {
		t.Run(name, func(t *testing.T) {
			ev := mk()
			_ = k.SealDecision(ev)
			mangle(ev)
			if _, err := k.VerifyDecision(ev); !errors.Is(err, ErrDecisionSeal) {
				t.Fatalf("altered decision verified: %v", err)
			}
		})
	}
}
