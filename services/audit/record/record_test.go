package record_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

func args(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRedactArgs(t *testing.T) {
	in := map[string]any{
		"password": "p", "nested": map[string]any{"key": "k", "keep": "v"},
		"list": []any{"a", map[string]any{"secret": "s"}}, "a/b": "slash", "m~n": "tilde",
	}
	cases := []struct {
		name  string
		paths []string
		want  []string // substrings of the JSON after redaction
		gone  []string
	}{
		{"masks a top-level key", []string{"/password"}, []string{`"password":"[REDACTED]"`, `"keep":"v"`}, []string{`"p"`}},
		{"masks a nested key and leaves its siblings", []string{"/nested/key"}, []string{`"key":"[REDACTED]"`, `"keep":"v"`}, []string{`"k"`}},
		{"masks inside an array by index", []string{"/list/1/secret"}, []string{`"secret":"[REDACTED]"`, `"a"`}, []string{`"s"`}},
		{"masks a whole subtree", []string{"/nested"}, []string{`"nested":"[REDACTED]"`}, []string{`"keep"`}},
		{"understands ~1 and ~0 escapes", []string{"/a~1b", "/m~0n"}, []string{`"a/b":"[REDACTED]"`, `"m~n":"[REDACTED]"`}, []string{"slash", "tilde"}},
		{"ignores paths that do not exist", []string{"/nope", "/list/9", "/password/x"}, []string{`"password":"p"`}, nil},
		{"tolerates a path without its leading slash", []string{"password"}, []string{`"password":"[REDACTED]"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := args(t, in)
			record.RedactArgs(a, c.paths)
			b, _ := a.MarshalJSON()
			got := record.Canonicalize(b)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s lacks %s", got, w)
				}
			}
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("%s still has %s", got, g)
				}
			}
		})
	}
}

func msg(t *testing.T, seq uint64, ev *airlockv1.Event) record.Msg {
	t.Helper()
	m, err := bus.Encode(ev, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	return record.Msg{Seq: seq, Time: time.Unix(1_700_000_000, 123_456_789), Subject: m.Subject, Header: m.Header, Data: m.Data}
}

func TestBuildIsAPureFunctionOfTheMessage(t *testing.T) {
	ev := &airlockv1.Event{EventId: "e1", AgentId: "bot", CallId: "c1", Revision: 1,
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", Server: "fs", Tool: "w",
			Arguments: args(t, map[string]any{"b": 1, "a": map[string]any{"z": true, "y": "x"}})}}}}
	m := msg(t, 7, ev)
	first := record.Build(m)
	for i := 0; i < 20; i++ { // protojson varies its whitespace at random; the payload must not
		if again := record.Build(m); again.Payload != first.Payload || string(record.AppendCanonicalFields(nil, &again)) != string(record.AppendCanonicalFields(nil, &first)) {
			t.Fatalf("build %d differs:\n%s\n%s", i, first.Payload, again.Payload)
		}
	}
	if first.Time.Nanosecond() != 123_000_000 {
		t.Errorf("time kept %d ns; want millisecond precision", first.Time.Nanosecond())
	}
}

func TestUndecodableMessageStillBecomesARow(t *testing.T) {
	r := record.Build(record.Msg{Seq: 3, Time: time.Now(), Subject: "airlock.evt.bot.c9.requested", Header: nil, Data: []byte{0xff, 0x01, 0x02}})
	if r.Type != "requested" || r.Agent != "bot" || r.Call != "c9" || r.Decision != "undecodable" || !strings.Contains(r.Payload, "base16:") {
		t.Fatalf("row %+v", r)
	}
}

// An undecodable event's row holds no decoder error text: protobuf-go
// words its errors differently per binary (a space or a no-break space after
// "proto:") and per release, and `audit verify` rebuilds each row with its
// own build, so such text made a verifier or a sink replica built from
// another binary report the row altered.
func TestAnUndecodableRowDoesNotDependOnTheDecodersWording(t *testing.T) {
	for _, tt := range []struct {
		name string
		data []byte
		hdr  map[string][]string
	}{
		{"protobuf", []byte{0xff, 0x01, 0x02}, nil},
		{"protojson", []byte(`{"eventId": 1`), map[string][]string{envelope.HeaderContentType: {envelope.ContentJSON}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := envelope.Decode(tt.data, tt.hdr)
			if err == nil {
				t.Fatal("the corpus decodes")
			}
			r := record.Build(record.Msg{Seq: 3, Time: time.Now(), Subject: "airlock.evt.bot.c9.requested", Header: tt.hdr, Data: tt.data})
			if r.Decision != "undecodable" || !strings.HasPrefix(r.Reason, "undecodable event: ") {
				t.Fatalf("row %+v: want an undecodable row", r)
			}
			inner := errors.Unwrap(err) // the decoder's own error, under envelope's context
			if inner == nil || strings.Contains(r.Reason, inner.Error()) {
				t.Fatalf("reason %q holds the decoder's wording %q", r.Reason, inner)
			}
		})
	}
}

func TestAnalyze(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []record.Row
	seq := uint64(0)
	add := func(call, typ, tool, actor string, at time.Duration) {
		seq++
		rows = append(rows, record.Row{Seq: seq, Call: call, Revision: 1, Type: typ, Server: "fs", Tool: tool, ActorType: "human", ActorID: actor, Time: t0.Add(at)})
	}
	// stamp approves four write calls within a second each; care takes minutes and rejects one.
	for i, c := range []string{"w1", "w2", "w3", "w4"} {
		off := time.Duration(i) * time.Hour
		add(c, "approval_requested", "write", "", off)
		add(c, "approved", "write", "stamp", off+time.Second)
	}
	add("d1", "approval_requested", "delete", "", 0)
	add("d1", "rejected", "", "care", 10*time.Minute)
	add("d2", "approval_requested", "delete", "", 0)
	add("d2", "approved", "delete", "care", 2*time.Minute)
	add("d2", "approved", "delete", "care", 3*time.Minute) // a duplicate outcome counts once
	add("r1", "allowed", "read", "", 0)
	add("x1", "approval_requested", "exec", "", 0)
	add("x1", "expired", "", "", 5*time.Minute)

	a := record.Analyze(rows, record.AnalyticsOptions{})
	tools := map[string]record.ToolStats{}
	for _, ts := range a.Tools {
		tools[ts.Tool] = ts
	}
	reviewers := map[string]record.Reviewer{}
	for _, r := range a.Reviewers {
		reviewers[r.ID] = r
	}
	cases := []struct {
		name string
		ok   bool
	}{
		{"approval rate per tool", tools["fs__write"].ApprovalRate == 1 && tools["fs__delete"].ApprovalRate == 0.5},
		{"auto-allowed calls are counted apart from asked ones", tools["fs__read"].Allowed == 1 && tools["fs__read"].Asked == 0},
		{"expired calls are not decisions", tools["fs__exec"].Expired == 1 && a.DecideCount == 6},
		{"time to decide p50 and p95", a.DecideP50 == 1 && a.DecideP95 == 600},
		{"the fast approver is a rubber-stamper", reviewers["stamp"].RubberStamper && reviewers["stamp"].FastApprovals == 4},
		{"the careful reviewer is not", !reviewers["care"].RubberStamper && reviewers["care"].Decisions == 2},
		{"rubber-stampers come first", len(a.Reviewers) > 0 && a.Reviewers[0].ID == "stamp"},
		{"most-asked tools in order", len(a.MostAsked) == 3 && a.MostAsked[0].Tool == "fs__write" && a.MostAsked[0].Asked == 4},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s: does not hold (%+v)", c.name, a)
		}
	}
}

// TestDecidedByMatchesOnlyDecisions: --decided-by (and the console's
// Decided-by filter) lists what decided calls, never the other events a
// person or a rule is the actor of.
func TestDecidedByMatchesOnlyDecisions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		row       record.Row
		decidedBy string
		want      bool
	}{
		{"a_person_approving_matches_human", record.Row{Type: "approved", Decision: "approve", DecidedBy: "human:alice"}, "human", true},
		{"a_person_approving_matches_the_person", record.Row{Type: "approved", Decision: "approve", DecidedBy: "human:alice"}, "human:alice", true},
		{"a_vote_matches_human", record.Row{Type: "vote_cast", Decision: "vote", DecidedBy: "human:alice"}, "human", true},
		{"a_sign_in_does_not_match_human", record.Row{Type: "sign_in", DecidedBy: "human:alice"}, "human", false},
		{"a_token_created_does_not_match_human", record.Row{Type: "token_created", DecidedBy: "human:alice"}, "human:alice", false},
		{"a_rule_change_does_not_match_human", record.Row{Type: "policy_changed", DecidedBy: "human:admin"}, "human", false},
		{"a_rule_allowing_matches_rule", record.Row{Type: "allowed", Decision: "allow", DecidedBy: "rule:read-only"}, "rule", true},
		{"a_grant_allowing_matches_grant", record.Row{Type: "allowed", Decision: "allow", DecidedBy: "grant:grant_1"}, "grant", true},
		{"a_grant_created_does_not_match_grant", record.Row{Type: "grant_created", DecidedBy: "human:alice"}, "grant", false},
		{"an_expiry_matches_timeout", record.Row{Type: "expired", Decision: "expire", DecidedBy: "timeout"}, "timeout", true},
		{"a_grant_expiring_does_not_match_timeout", record.Row{Type: "grant_expired", DecidedBy: "timeout"}, "timeout", false},
		{"a_candidate_in_shadow_does_not_match_rule", record.Row{Type: "shadow_divergence", Decision: "allow→ask", DecidedBy: "shadow:rule:demo-echo"}, "rule", false},
		{"a_prefix_of_a_name_is_not_a_kind", record.Row{Type: "approved", Decision: "approve", DecidedBy: "human:alice"}, "hum", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (record.Filter{DecidedBy: tc.decidedBy}).Match(tc.row, false); got != tc.want {
				t.Fatalf("Filter{DecidedBy: %q}.Match(%+v) = %v, want %v", tc.decidedBy, tc.row, got, tc.want)
			}
		})
	}
}

func TestAShadowDivergenceRowIsAboutTheLiveCall(t *testing.T) {
	ev := &airlockv1.Event{EventId: "shadow_call.ab12.shadow_divergence", AgentId: "_system", CallId: "ab12",
		Body: &airlockv1.Event_ShadowDivergence{ShadowDivergence: &airlockv1.ShadowDivergence{AgentId: "bot", CallId: "c1", Revision: 2,
			Server: "demo", Tool: "echo", LiveAction: "allow", LiveRuleId: "demo-echo", CandidateAction: "ask", CandidateRuleId: "echo-asks",
			CandidateReason: "echo <b>asks</b>", CandidateDigest: "d1g", ArgumentsDigest: "a1"}}}
	r := record.Build(msg(t, 9, ev))
	want := record.Row{Type: "shadow_divergence", Agent: "bot", Call: "c1", Revision: 2, Server: "demo", Tool: "echo", Decision: "allow→ask",
		RuleID: "demo-echo", DecidedBy: "shadow:rule:echo-asks", PolicyRevision: "d1g", ArgsDigest: "a1"}
	got := record.Row{Type: r.Type, Agent: r.Agent, Call: r.Call, Revision: r.Revision, Server: r.Server, Tool: r.Tool, Decision: r.Decision,
		RuleID: r.RuleID, DecidedBy: r.DecidedBy, PolicyRevision: r.PolicyRevision, ArgsDigest: r.ArgsDigest}
	if got != want || !strings.Contains(r.Reason, "echo-asks") {
		t.Fatalf("row %+v (reason %q),\nwant %+v", got, r.Reason, want)
	}
}
