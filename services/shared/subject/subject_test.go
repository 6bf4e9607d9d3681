package subject

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestEventBuildsAndParsesRoundTrip(t *testing.T) {
	s, err := Event("agent-1", "call_42", Approved)
	if err != nil {
		t.Fatal(err)
	}
	if s != "airlock.evt.agent-1.call_42.approved" {
		t.Fatalf("got %q", s)
	}
	p, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	if p != (Parsed{Agent: "agent-1", Call: "call_42", Type: Approved}) {
		t.Fatalf("got %+v", p)
	}
}

func TestEventRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, agent, call, typ, want string
	}{
		{"rejects_dot_in_agent", "a.b", "c", Requested, "characters outside"},
		{"rejects_wildcard_in_call", "a", "*", Requested, "characters outside"},
		{"rejects_empty_agent", "", "c", Requested, "empty"},
		{"rejects_long_call", "a", strings.Repeat("x", 65), Requested, "limit is 64"},
		{"rejects_unknown_type", "a", "c", "exploded", "unknown event type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Event(tt.agent, tt.call, tt.typ)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Event(%q,%q,%q) error = %v, want it to mention %q", tt.agent, tt.call, tt.typ, err, tt.want)
			}
		})
	}
}

func TestExecutorEventsLiveInTheCallsExecutionLedger(t *testing.T) {
	s, err := Event("bot", "c1", Completed)
	if err != nil || s != "airlock.evt.bot.c1.exec.completed" {
		t.Fatalf("Event = %q, %v", s, err)
	}
	if p, err := Parse(s); err != nil || p != (Parsed{Agent: "bot", Call: "c1", Type: Completed}) {
		t.Fatalf("Parse = %+v, %v", p, err)
	}
	if OfType(Started) != "airlock.evt.*.*.exec.started" || OfExecution("bot", "c1") != "airlock.evt.bot.c1.exec.*" {
		t.Fatalf("OfType %q OfExecution %q", OfType(Started), OfExecution("bot", "c1"))
	}
	if Out(s) != "airlock.out.bot.c1.exec.completed" || OutOfAgentType("bot", Failed) != "airlock.out.bot.*.exec.failed" {
		t.Fatalf("Out %q", Out(s))
	}
}

func TestParseRefusesForeignSubjects(t *testing.T) {
	for _, s := range []string{"airlock.evt.a.b", "other.evt.a.b.requested", "airlock.evt.a.b.c.requested", "airlock.evt.a$.b.requested",
		"airlock.evt.a.b.completed", "airlock.evt.a.b.exec.approved", "airlock.evt.a.b.run.started"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted it", s)
		}
	}
}

// TestTypesAreEveryEventBody: every type stored in the events stream is
// an Event body, and every body but the intake-only report is a type.
func TestTypesAreEveryEventBody(t *testing.T) {
	oneof := (&airlockv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	var bodies []string
	for i := 0; i < oneof.Len(); i++ {
		// reported exists only in the intake: the policy service records
		// it as the call's completed or failed, never under its own type.
		if name := string(oneof.Get(i).Name()); name != "reported" {
			bodies = append(bodies, name)
		}
	}
	if strings.Join(bodies, ",") != strings.Join(Types, ",") {
		t.Fatalf("Types %v are not the Event body oneof %v", Types, bodies)
	}
}

func TestCallKeyGroupsACallsMessages(t *testing.T) {
	for _, tc := range []struct{ subject, want string }{
		{"airlock.evt.bot.c1.requested", "bot.c1"},
		{"airlock.evt.bot.c1.exec.completed", "bot.c1"},
		{"airlock.req.bot.c1", "bot.c1"},
		{"airlock.out.bot.c1.exec.started", "bot.c1"},
		{"airlock.evt.bot", ""},
		{"other.thing.a.b.c", ""},
	} {
		got, ok := CallKey(tc.subject)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("CallKey(%q) = %q, %v; want %q", tc.subject, got, ok, tc.want)
		}
	}
}

func TestRequestTokensReadsThePublishedAndTheStoredForm(t *testing.T) {
	for _, tc := range []struct {
		subject, agent, call string
		ok                   bool
	}{
		{"airlock.req.bot.c1", "bot", "c1", true},
		{"airlock.req.bot", "bot", "", true},
		{"airlock.req.bot.", "", "", false},
		{"airlock.req.bot.c1.x", "", "", false},
		{"airlock.req.", "", "", false},
		{"airlock.evt.bot.c1", "", "", false},
	} {
		agent, call, ok := RequestTokens(tc.subject)
		if ok != tc.ok || (ok && (agent != tc.agent || call != tc.call)) {
			t.Errorf("RequestTokens(%q) = %q, %q, %v; want %q, %q, %v", tc.subject, agent, call, ok, tc.agent, tc.call, tc.ok)
		}
	}
}

func TestTypeSetsNameKnownTypesOnce(t *testing.T) {
	for name, set := range map[string][]string{"PolicyOutcomes": PolicyOutcomes, "ApprovalOutcomes": ApprovalOutcomes, "ExecTypes": ExecTypes, "EndTypes": EndTypes} {
		seen := map[string]bool{}
		for _, typ := range set {
			if !isType(typ) || seen[typ] {
				t.Errorf("%s lists %q, which is unknown or repeated", name, typ)
			}
			seen[typ] = true
		}
	}
	for _, typ := range ExecTypes {
		if !IsExec(typ) {
			t.Errorf("ExecTypes lists %q, which IsExec refuses", typ)
		}
	}
}

// Tokens takes apart every subject Parse accepts the same way, and refuses
// the shapes Parse refuses, without validating ids.
func TestTokensAgreeWithParse(t *testing.T) {
	tests := []struct {
		name, subj       string
		agent, call, typ string
		ok               bool
	}{
		{"a_decision", "airlock.evt.bot.c1.approved", "bot", "c1", "approved", true},
		{"an_execution_event", "airlock.evt.bot.c1.exec.completed", "bot", "c1", "completed", true},
		{"a_system_event", PolicyChanges, SystemAgent, SystemCall, PolicyChanged, true},
		{"too_few_tokens", "airlock.evt.bot.approved", "", "", "", false},
		{"another_prefix", "airlock.out.bot.c1.approved", "", "", "", false},
		{"too_many_tokens", "airlock.evt.bot.c1.x.approved", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, call, typ, ok := Tokens(tt.subj)
			if agent != tt.agent || call != tt.call || typ != tt.typ || ok != tt.ok {
				t.Fatalf("Tokens(%q) = %q %q %q %v", tt.subj, agent, call, typ, ok)
			}
			if p, err := Parse(tt.subj); ok && err == nil && (p.Agent != agent || p.Call != call || p.Type != typ) {
				t.Fatalf("Parse(%q) = %+v, Tokens disagrees", tt.subj, p)
			}
		})
	}
}
