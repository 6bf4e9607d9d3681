package record

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

func slowPayload(t testing.TB, ev *airlockv1.Event) string {
	t.Helper()
	ev = proto.Clone(ev).(*airlockv1.Event)
	redact(ev)
	ev.EventId, ev.AgentId, ev.CallId, ev.Revision, ev.ThreadId, ev.Actor = "", "", "", 0, "", nil
	return canonicalJSON(ev)
}

func wireCorpus(t testing.TB) []*airlockv1.Event {
	args := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	nested := args(map[string]any{"path": "/etc/x", "token": "s3cret", "n": 1e21, "f": -0.5, "ok": false, "none": nil, "empty": "",
		"list": []any{"a", map[string]any{"pw": "x", "keep": 1}, []any{true, nil}}, "opts": map[string]any{"password": "hunter2", "mode": "0644"},
		"uni": "ä\u2028<&>\"\\\n\t\x01"})
	nested.Fields["nan"] = structpb.NewNumberValue(math.NaN())
	nested.Fields["inf"] = structpb.NewNumberValue(math.Inf(-1))
	nested.Fields["nokind"] = &structpb.Value{}
	call := &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", ThreadId: "th", OnBehalfOf: "carol", Server: "fs", Tool: "write", Arguments: nested, Revision: 2, Reason: "why",
		Script: &airlockv1.Script{Digest: scriptDigest, RunId: "run_1", Index: 1, Text: "await tools.fs__write({path: \"/etc/x\"})\n\u202e", Size: 40, Preview: []string{"tools.fs__write({\"path\":\"/etc/x\"}) at line 1"}}}
	dec := func(redact ...string) *airlockv1.Decision {
		return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "r", RuleId: "rule", Risk: airlockv1.Risk_RISK_HIGH, Redact: redact,
			Approvers: []string{"group:x", "bob"}, Quorum: 2, Timeout: durationpb.New(90 * time.Second), PolicyRevision: "p", DecisionId: "d", ArgumentsDigest: "dg", GrantId: "g"}
	}
	base := func(body func(*airlockv1.Event)) *airlockv1.Event {
		ev := &airlockv1.Event{EventId: "e", AgentId: "bot", CallId: "c1", Revision: 2, ThreadId: "th", Time: timestamppb.New(time.Unix(1_700_000_000, 120_000_000)),
			Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}}
		body(ev)
		return ev
	}
	vote := &airlockv1.Vote{By: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}, At: timestamppb.New(time.Unix(5, 7)), Comment: "ok"}
	return []*airlockv1.Event{
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call, Decision: dec("/token", "opts/password", "/list/1/pw", "/list/01/keep", "/missing/x", "/path/deeper")}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Call: call, Decision: dec("")}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Call: call, Decision: dec("/")}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: dec(), Deadline: timestamppb.New(time.Unix(9, 123456000))}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, Decision: dec("/opts", "/opts/mode"), Votes: []*airlockv1.Vote{vote, vote}, Edited: true,
				OriginalArguments: args(map[string]any{"opts": "x", "token": 1}), ArgumentsDigest: "a", PolicyRevision: "p"}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"x":1}`, Latency: durationpb.New(-1500 * time.Microsecond), Attempt: 1}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "timeout", Latency: durationpb.New(3 * time.Nanosecond)}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "slack", Kind: "announce"}}
		}),
		base(func(e *airlockv1.Event) { e.Body = &airlockv1.Event_Expired{Expired: &airlockv1.Expired{}} }),
		base(func(e *airlockv1.Event) { e.Body = &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{}} }),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_VoteCast{VoteCast: &airlockv1.VoteCast{Vote: vote, Votes: 1, Quorum: 2, ArgumentsDigest: "x"}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_GrantCreated{GrantCreated: &airlockv1.GrantCreated{Grant: &airlockv1.GrantScope{GrantId: "g", AgentId: "bot", ArgumentGlobs: map[string]string{"/z": "a*", "/a": "", "/m": "/tmp/**"}, UsesLeft: 3, LimitedUses: true, ExpiresAt: timestamppb.New(time.Unix(100, 0))}}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_GrantUsed{GrantUsed: &airlockv1.GrantUsed{GrantId: "g"}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_SignIn{SignIn: &airlockv1.SignIn{Method: "password", Why: "no"}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_AuditPruned{AuditPruned: &airlockv1.AuditPruned{Partitions: []string{"202601", "202602"}, Rows: math.MaxUint64, FirstKeptSeq: 7}}
		}),
		base(func(e *airlockv1.Event) {
			e.Body = &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "bad", RawExcerpt: "\xff"[:0]}}
		}),
		{EventId: "bare"},
	}
}

func TestWirePayloadIsTheGenericPayload(t *testing.T) {
	for _, ev := range wireCorpus(t) {
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		want := slowPayload(t, ev)
		for i := 0; i < 5; i++ { // map order differs between encodings
			if i > 0 {
				data, _ = proto.Marshal(ev)
			}
			got, ok := wirePayload(nil, data, argModesOf(ev))
			if !ok {
				t.Fatalf("%s: the wire path gave up on Go's own encoding", ev.GetEventId()+"/"+string(ev.ProtoReflect().WhichOneof(eventDesc.Oneofs().ByName("body")).Name()))
			}
			if string(got) != want {
				t.Fatalf("wire payload differs:\n got %s\nwant %s", got, want)
			}
		}
	}
}

func TestWirePayloadGivesUpOnFieldsOutOfOrderAndBuildStillAgrees(t *testing.T) {
	ev := wireCorpus(t)[1]
	data, _ := proto.Marshal(ev)
	// Move the leading envelope field (event_id, field 1) to the end.
	_, _, n := protowire.ConsumeTag(data)
	m := protowire.ConsumeFieldValue(1, protowire.BytesType, data[n:])
	reordered := append(append([]byte{}, data[n+m:]...), data[:n+m]...)
	if _, ok := wirePayload(nil, reordered, argModesOf(ev)); ok {
		t.Fatal("the wire path accepted fields out of order")
	}
	again := &airlockv1.Event{}
	if err := proto.Unmarshal(reordered, again); err != nil || !proto.Equal(again, ev) {
		t.Fatalf("reordered bytes do not decode to the same event: %v", err)
	}
	if got := Build(Msg{Seq: 1, Data: reordered}).Payload; got != slowPayload(t, ev) {
		t.Fatalf("Build of out-of-order bytes:\n got %s\nwant %s", got, slowPayload(t, ev))
	}
}

func TestWireRowIsTheGenericRow(t *testing.T) {
	corpus := wireCorpus(t)
	// Variants the hot types meet: no actor, no decision, a decision without
	// a digest, an approval without votes, non-finite arguments.
	extra := []*airlockv1.Event{
		{EventId: "x1", AgentId: "a", CallId: "c", Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: &airlockv1.ToolCall{Tool: "t"}}}},
		{EventId: "x2", AgentId: "a", CallId: "c", Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Decision: &airlockv1.Decision{RuleId: "r"}}}},
		{EventId: "x3", Actor: &airlockv1.Actor{Id: "x"}, Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{}}},
		{EventId: "x4", Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Message: "boom"}}},
		{EventId: "x5", Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "e"}}},
		{EventId: "x6", Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{}}},
	}
	for _, ev := range append(corpus, extra...) {
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		m := Msg{Seq: 9, Time: time.Unix(1_700_000_000, 5e6), Subject: "airlock.evt.sub.call.requested", Data: data}
		base := Row{Seq: 9, Time: m.Time.UTC(), Agent: "sub", Call: "call", Type: "requested"}
		want := buildGeneric(base, m)
		got := base
		hot := false
		switch envelope.TypeOf(ev) {
		case "requested", "allowed", "denied", "approval_requested", "approved", "notified", "started", "completed", "failed":
			hot = true
		}
		if ok := buildWire(&got, m.Subject, data, nil); ok != hot {
			t.Fatalf("%s (%s): wire path taken = %v", ev.GetEventId(), want.Type, ok)
		} else if !ok {
			continue
		}
		if d := DifferentColumns(&got, &want); len(d) > 0 {
			t.Fatalf("%s (%s): wire row differs in %v:\n got %+v\nwant %+v", ev.GetEventId(), want.Type, d, got, want)
		}
	}
}

const scriptDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestTheAuditRecordKeepsTheScriptACallNames: an auditor finds a run_code
// script's calls by its digest, and its text on the run's first call, in
// the row's payload on both build paths.
func TestTheAuditRecordKeepsTheScriptACallNames(t *testing.T) {
	ev := wireCorpus(t)[0] // requested, naming a script
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	m := Msg{Seq: 1, Time: time.Unix(1_700_000_000, 0), Subject: "airlock.evt.bot.c1.requested", Data: data}
	base := Row{Seq: 1, Time: m.Time.UTC(), Agent: "bot", Call: "c1", Type: "requested"}
	wire := base
	if !buildWire(&wire, m.Subject, data, nil) {
		t.Fatal("the wire path refused a requested event")
	}
	for name, row := range map[string]Row{"wire": wire, "generic": buildGeneric(base, m)} {
		for _, want := range []string{`"script":`, scriptDigest, `"run_id":"run_1"`, `"index":1`, `await tools.fs__write`} {
			if !strings.Contains(row.Payload, want) {
				t.Errorf("%s: the payload lacks %s: %s", name, want, row.Payload)
			}
		}
	}
}

func TestSubjectTokensTakesEventSubjectsOnly(t *testing.T) {
	cases := []struct {
		name, subject, want string
	}{
		{"an event subject gives agent, call and type", "airlock.evt.bot.c1.approved", "bot/c1/approved"},
		{"four tokens give nothing", "airlock.evt.bot.c1", ""},
		{"six tokens give nothing", "airlock.evt.bot.c1.approved.x", ""},
		{"an executor event gives its type", "airlock.evt.bot.c1.exec.started", "bot/c1/started"},
		{"exec before another type gives nothing", "airlock.evt.bot.c1.exec.approved", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ""
			if a, cl, typ, ok := subject.Tokens(c.subject); ok {
				got = a + "/" + cl + "/" + typ
			}
			if got != c.want {
				t.Fatalf("%q → %q, want %q", c.subject, got, c.want)
			}
		})
	}
}

func TestArenaRowsAreBuildsRowsAndSurviveUntilReset(t *testing.T) {
	var msgs []Msg
	for i, ev := range wireCorpus(t) {
		data, _ := proto.Marshal(ev)
		msgs = append(msgs, Msg{Seq: uint64(i + 1), Time: time.Unix(1_700_000_000, 0), Subject: "airlock.evt.a.c.requested", Data: data})
	}
	var a Arena
	for round := 0; round < 3; round++ { // reused after Reset, and across chunks
		var rows []Row
		for i := 0; i < 8000; i++ {
			rows = append(rows, a.Build(msgs[i%len(msgs)]))
		}
		for i, r := range rows {
			want := Build(msgs[i%len(msgs)])
			if d := DifferentColumns(&r, &want); len(d) > 0 {
				t.Fatalf("round %d row %d: arena row differs in %v", round, i, d)
			}
		}
		a.Reset()
	}
	if len(a.chunks) < 2 {
		t.Fatalf("8000 rows fit in %d chunk(s): the test does not cross a chunk", len(a.chunks))
	}
}

// An arena works out a decision's redaction once and uses it again: two
// different redact lists never share it, and what it keeps is its own,
// never a view of the message it was first read from: the worked-out
// redactions outlive Reset, and with it the messages of the batch (here
// overwritten after each build to show it).
func TestAnArenasRedactionIsEachDecisionsOwn(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"a": "1", "b": "2", "ab": "3", "a/b": "4"})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(redact ...string) []byte {
		ev := &airlockv1.Event{EventId: "e", AgentId: "bot", CallId: "c1", Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{
			Call: &airlockv1.ToolCall{CallId: "c1", Server: "fs", Tool: "t", Arguments: args}, Decision: &airlockv1.Decision{Redact: redact}}}}
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var a Arena
	for _, redact := range [][]string{{"/a", "/b"}, {"/ab"}, {"/a~1b"}, {"/a"}, {"/b"}, {""}, {}, {"/a", "/b"}, {"/ab"}} {
		data := msg(redact...)
		got := a.Build(Msg{Seq: 1, Subject: "airlock.evt.bot.c1.allowed", Data: data})
		want := Build(Msg{Seq: 1, Subject: "airlock.evt.bot.c1.allowed", Data: data})
		for i := range data {
			data[i] = 'x' // the message is gone once its batch is released
		}
		if got.Payload != want.Payload {
			t.Fatalf("redact %q: arena payload %s, want %s", redact, got.Payload, want.Payload)
		}
	}
}

// An arena keeps at most arenaKeep bytes between batches: the chunks a batch
// of unusually large events needed are let go at Reset.
func TestAnArenaKeepsABoundedMemoryAcrossBatches(t *testing.T) {
	var a Arena
	big := make([]byte, arenaKeep/2+1)
	for range 3 {
		if s := a.string(big); len(s) != len(big) {
			t.Fatalf("stored %d bytes of %d", len(s), len(big))
		}
	}
	a.string([]byte("small"))
	a.Reset()
	total := 0
	for _, c := range a.chunks {
		total += cap(c)
		if len(c) != 0 {
			t.Fatalf("a chunk kept %d bytes after Reset", len(c))
		}
	}
	if total > arenaKeep || len(a.chunks) == 0 {
		t.Fatalf("after Reset the arena keeps %d chunks of %d bytes in all, want some, at most %d", len(a.chunks), total, arenaKeep)
	}
	if s := a.string([]byte("next batch")); s != "next batch" {
		t.Fatalf("the next batch stored %q", s)
	}
}

// A scalar the fast path cannot read (bytes that are not one value of the
// field's wire type) refuses the fast path, which leaves the event to the
// decoder: it is never rendered as 0, nor left out as an unset field.
func TestAScalarThatDoesNotReadRefusesTheFastPath(t *testing.T) {
	for _, tt := range []struct {
		name string
		kind protoreflect.Kind
		wire protowire.Type
		val  []byte
	}{
		{"a_float_of_three_bytes", protoreflect.FloatKind, protowire.Fixed32Type, []byte{0, 0, 0}},
		{"a_float_of_another_wire_type", protoreflect.FloatKind, protowire.VarintType, []byte{1}},
		{"a_double_of_four_bytes", protoreflect.DoubleKind, protowire.Fixed64Type, []byte{0, 0, 0, 0}},
		{"an_integer_of_no_bytes", protoreflect.Int64Kind, protowire.VarintType, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if zero(tt.wire, tt.val) {
				t.Errorf("zero(%v, %x) = true: the field would be left out as unset", tt.wire, tt.val)
			}
			var tr transcoder
			if b, ok := tr.value(nil, &wireField{kind: tt.kind, wire: tt.wire}, tt.val, 0); ok {
				t.Errorf("value rendered %s, want the fast path refused", b)
			}
		})
	}
}
