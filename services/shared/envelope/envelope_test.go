package envelope

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestEncodeSetsSubjectAndHeaders(t *testing.T) {
	ev := &airlockv1.Event{
		EventId: "a1.c1.1.requested", AgentId: "a1", CallId: "c1", Revision: 1,
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{Tool: "echo"}}},
	}
	parent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	msg, err := Encode(ev, "agent/a1", parent)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "airlock.evt.a1.c1.requested" {
		t.Fatalf("subject %q", msg.Subject)
	}
	for h, want := range map[string]string{
		HeaderCEID: "a1.c1.1.requested", "Nats-Msg-Id": "a1.c1.1.requested", HeaderCEType: "airlock.v1.requested",
		HeaderCESource: "agent/a1", HeaderCESpec: "1.0", HeaderContentType: "",
	} {
		if got := HeaderValue(msg.Header, h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	tp := HeaderValue(msg.Header, HeaderTraceparent)
	if !strings.HasPrefix(tp, "00-0af7651916cd43dd8448eb211c80319c-") || strings.Contains(tp, "b7ad6b7169203331") {
		t.Fatalf("traceparent %q is not a child span of the parent", tp)
	}
	if HeaderValue(msg.Header, HeaderCETime) == "" {
		t.Fatal("ce-time missing")
	}
	back, err := Decode(msg.Data, msg.Header)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, ev) {
		t.Fatalf("round trip changed the event: %v", back)
	}
}

func TestDecodeAcceptsProtoJSON(t *testing.T) {
	h := map[string][]string{HeaderContentType: {"application/json; charset=utf-8"}}
	ev, err := Decode([]byte(`{"agentId":"a1","callId":"c1","requested":{"call":{"tool":"fs__read_file","arguments":{"path":"/tmp"}}}}`), h)
	if err != nil {
		t.Fatal(err)
	}
	if TypeOf(ev) != "requested" || ev.GetRequested().GetCall().GetArguments().GetFields()["path"].GetStringValue() != "/tmp" {
		t.Fatalf("decoded %v", ev)
	}
}

func TestEncodeRefusesEventsWithoutBodyOrBadIDs(t *testing.T) {
	if _, err := Encode(&airlockv1.Event{AgentId: "a", CallId: "c"}, "x", ""); err == nil {
		t.Fatal("event without body encoded")
	}
	bad := &airlockv1.Event{AgentId: "a.b", CallId: "c", Body: &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{}}}
	if _, err := Encode(bad, "x", ""); err == nil {
		t.Fatal("event with a dotted agent id encoded")
	}
}

func TestChildTraceStartsNewTraceFromGarbage(t *testing.T) {
	for _, parent := range []string{"", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		tp := ChildTrace(parent)
		if p := strings.Split(tp, "-"); len(p) != 4 || len(p[1]) != 32 || len(p[2]) != 16 {
			t.Fatalf("ChildTrace(%q) = %q", parent, tp)
		}
	}
}

func TestChildTraceKeepsTheParentsTraceWithANewSpan(t *testing.T) {
	tests := []struct{ name, parent, keep, flags string }{
		{"a valid parent keeps its trace id and flags", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "0af7651916cd43dd8448eb211c80319c", "01"},
		{"an unsampled parent's children stay unsampled", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "0af7651916cd43dd8448eb211c80319c", "00"},
		{"upper-case hex is accepted as before", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "0AF7651916CD43DD8448EB211C80319C", "01"},
		{"a trace id that is not hex starts a new trace, unsampled", "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01", "", "00"},
		{"an extra field starts a new trace, unsampled", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xx", "", "00"},
		{"no parent starts a new trace, unsampled (airlock records no spans)", "", "", "00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := ChildTrace(tt.parent), ChildTrace(tt.parent)
			pa, pb := strings.Split(a, "-"), strings.Split(b, "-")
			if len(pa) != 4 || len(pa[1]) != 32 || len(pa[2]) != 16 || !isHex(pa[1]) || !isHex(pa[2]) {
				t.Fatalf("ChildTrace(%q) = %q: not a traceparent", tt.parent, a)
			}
			if pa[3] != tt.flags {
				t.Fatalf("ChildTrace(%q) = %q: flags %s, want %s", tt.parent, a, pa[3], tt.flags)
			}
			if (tt.keep != "") != (pa[1] == tt.keep) {
				t.Fatalf("ChildTrace(%q) = %q: trace id kept = %v, want %v", tt.parent, a, pa[1] == tt.keep, tt.keep != "")
			}
			if pa[2] == pb[2] {
				t.Fatalf("two children of %q got the same span id %s", tt.parent, pa[2])
			}
			if tt.keep == "" && pa[1] == pb[1] {
				t.Fatalf("two new traces got the same trace id %s", pa[1])
			}
		})
	}
}

func TestGeneratedEventIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := randomID()
		if len(id) != len("evt_")+24 || !strings.HasPrefix(id, "evt_") || !isHex(id[4:]) || seen[id] {
			t.Fatalf("generated event id %q is malformed or repeated", id)
		}
		seen[id] = true
	}
}

func BenchmarkEncodeDecode(b *testing.B) {
	args, _ := structpb.NewStruct(map[string]any{"text": "hello from the bench"})
	parent := ChildTrace("")
	b.ReportAllocs()
	for b.Loop() {
		ev := &airlockv1.Event{
			EventId: "bench.call_1.1.requested", AgentId: "bench", CallId: "call_1", Revision: 1,
			Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{CallId: "call_1", AgentId: "bench", Tool: "demo__echo", Arguments: args}}},
		}
		msg, err := Encode(ev, "agent/bench", parent)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(msg.Data, msg.Header); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEventsOfAJSONCallAreStoredAsJSON: an event marked json is encoded as
// protojson with the proto field names and Content-Type application/json,
// and decodes back to the same event; one not marked json is protobuf and
// carries no Content-Type.
func TestEventsOfAJSONCallAreStoredAsJSON(t *testing.T) {
	ev := &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Json: true,
		Body: &airlockv1.Event_Rejected{Rejected: &airlockv1.Rejected{Reason: "not today"}}}
	msg, err := Encode(ev, "airlock/test", "")
	if err != nil {
		t.Fatal(err)
	}
	if ct := HeaderValue(msg.Header, HeaderContentType); ct != ContentJSON {
		t.Fatalf("Content-Type %q, want %s", ct, ContentJSON)
	}
	var doc map[string]any
	if err := json.Unmarshal(msg.Data, &doc); err != nil {
		t.Fatalf("the body is not JSON: %v\n%s", err, msg.Data)
	}
	if doc["call_id"] != "c1" || doc["rejected"].(map[string]any)["reason"] != "not today" {
		t.Fatalf("the body does not use the proto field names: %s", msg.Data)
	}
	back, err := Decode(msg.Data, msg.Header)
	if err != nil || back.GetRejected().GetReason() != "not today" || back.GetEventId() != ev.GetEventId() {
		t.Fatalf("decode: %v %v", back, err)
	}
	ev.Json = false
	msg, err = Encode(ev, "airlock/test", "")
	if _, ok := msg.Header[HeaderContentType]; err != nil || ok || IsJSON(msg.Header) {
		t.Fatalf("an event not marked json carries a Content-Type (protobuf is what a message without one holds): %v %q", err, HeaderValue(msg.Header, HeaderContentType))
	}
	if back, err := Decode(msg.Data, msg.Header); err != nil || back.GetRejected().GetReason() != "not today" {
		t.Fatalf("decode the protobuf event: %v %v", back, err)
	}
}

// Every event about a call is built from the call: its subject, revision
// (1 when the call leaves it unset), thread and the encoding its agent
// reads, so no service can forget the JSON flag of an agent that asked
// for JSON.
func TestForCallCarriesWhereAndHowTheCallsEventsGo(t *testing.T) {
	actor := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "executor"}
	for _, tt := range []struct {
		name string
		call *airlockv1.ToolCall
		rev  uint32
	}{
		{"revision unset is 1", &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", ThreadId: "t1"}, 1},
		{"a later revision, JSON", &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 3, JsonEvents: true}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := ForCall(tt.call, actor)
			ev.Body = &airlockv1.Event_Started{Started: &airlockv1.Started{}}
			if ev.GetAgentId() != "bot" || ev.GetCallId() != "c1" || ev.GetRevision() != tt.rev || ev.GetThreadId() != tt.call.GetThreadId() || ev.GetActor() != actor {
				t.Fatalf("event %v", ev)
			}
			msg, err := Encode(ev, "test", "")
			if err != nil {
				t.Fatal(err)
			}
			if asJSON := json.Valid(msg.Data); asJSON != tt.call.GetJsonEvents() {
				t.Fatalf("encoded as JSON: %v, the agent asked for JSON: %v", asJSON, tt.call.GetJsonEvents())
			}
			if msg.Subject != "airlock.evt.bot.c1.exec.started" {
				t.Fatalf("subject %s", msg.Subject)
			}
		})
	}
}

func TestAReusedHeaderCarriesOnlyTheLatestMessagesHeaders(t *testing.T) {
	started := &airlockv1.Event{
		EventId: "a1.c1.1.started", AgentId: "a1", CallId: "c1", Revision: 1,
		Body: &airlockv1.Event_Started{Started: &airlockv1.Started{Attempt: 1}},
	}
	allowed := &airlockv1.Event{
		EventId: "a1.c2.1.decision", AgentId: "a1", CallId: "c2", Revision: 1,
		Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{}},
	}
	var hb Header
	steps := []struct {
		name   string
		encode func() (Message, error)
		fresh  func() (Message, error)
	}{
		{"a compare-and-append", func() (Message, error) {
			return EncodeAfterInto(&hb, started, "airlock/executor", "", "airlock.evt.a1.c1.exec.*", 7)
		}, func() (Message, error) {
			return EncodeAfter(started, "airlock/executor", "", "airlock.evt.a1.c1.exec.*", 7)
		}},
		{"then a publish with a message id", func() (Message, error) { return EncodeInto(&hb, allowed, "airlock/policy", "") },
			func() (Message, error) { return Encode(allowed, "airlock/policy", "") }},
		{"then a compare-and-append again", func() (Message, error) {
			return EncodeAfterInto(&hb, started, "airlock/executor", "", "airlock.evt.a1.c1.exec.*", 9)
		}, func() (Message, error) {
			return EncodeAfter(started, "airlock/executor", "", "airlock.evt.a1.c1.exec.*", 9)
		}},
	}
	for _, s := range steps {
		got, err := s.encode()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		want, err := s.fresh()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got.Subject != want.Subject || string(got.Data) != string(want.Data) || len(got.Header) != len(want.Header) {
			t.Fatalf("%s: reused header gave %s with %d headers, a fresh one %s with %d", s.name, got.Subject, len(got.Header), want.Subject, len(want.Header))
		}
		for k, v := range want.Header {
			if k == HeaderTraceparent { // a new span each time
				continue
			}
			if g := HeaderValue(got.Header, k); g != v[0] {
				t.Errorf("%s: header %s = %q, want %q", s.name, k, g, v[0])
			}
		}
	}
}

func TestTypeOfNamesEveryBodyAsItsOneofField(t *testing.T) {
	fields := bodyOneof.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		m := (&airlockv1.Event{}).ProtoReflect()
		m.Set(fd, m.NewField(fd))
		if got := TypeOf(m.Interface().(*airlockv1.Event)); got != string(fd.Name()) {
			t.Errorf("TypeOf an event with body %s = %q", fd.Name(), got)
		}
	}
	for _, c := range []struct {
		name string
		ev   *airlockv1.Event
		want string
	}{
		{"no event", nil, ""},
		{"no body", &airlockv1.Event{}, ""},
		{"a body whose wrapper is nil", &airlockv1.Event{Body: (*airlockv1.Event_Allowed)(nil)}, ""},
		{"a wrapper holding no message", &airlockv1.Event{Body: &airlockv1.Event_Allowed{}}, "allowed"},
	} {
		if got := TypeOf(c.ev); got != c.want {
			t.Errorf("%s: TypeOf = %q, want %q", c.name, got, c.want)
		}
		if fd := c.ev.ProtoReflect().WhichOneof(bodyOneof); fd != nil && string(fd.Name()) != c.want || fd == nil && c.want != "" {
			t.Errorf("%s: WhichOneof disagrees with TypeOf", c.name)
		}
	}
}

// The compare-and-append and batch forms encode the event as Encode does
// and differ only in the headers that make a publish a plain store, an
// append after a sequence, or a batch's later message.
func TestEncodeAfterAndInBatchDifferFromEncodeOnlyInTheirHeaders(t *testing.T) {
	ev := &airlockv1.Event{
		EventId: "a1.c1.1.started", AgentId: "a1", CallId: "c1", Revision: 1,
		Body: &airlockv1.Event_Started{Started: &airlockv1.Started{Attempt: 1}},
	}
	plain, err := Encode(ev, "airlock/executor", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		encode  func() (Message, error)
		headers map[string]string // "": absent
		more    int               // headers beyond Encode's
	}{
		{"EncodeAfter carries the expectation and no message id", func() (Message, error) {
			return EncodeAfter(ev, "airlock/executor", "", "airlock.evt.a1.c1.exec.*", 42)
		}, map[string]string{
			HeaderExpectedLastSubjSeq: "42", HeaderExpectedLastSubjSeqSubject: "airlock.evt.a1.c1.exec.*", HeaderMsgID: "",
			HeaderCEID: "a1.c1.1.started", HeaderCEType: "airlock.v1.started", HeaderCESource: "airlock/executor", HeaderContentType: "",
		}, 1},
		{"EncodeInBatch carries neither a message id nor an expectation", func() (Message, error) {
			return EncodeInBatch(ev, "airlock/executor", "")
		}, map[string]string{
			HeaderExpectedLastSubjSeq: "", HeaderExpectedLastSubjSeqSubject: "", HeaderMsgID: "",
			HeaderCEID: "a1.c1.1.started", HeaderCEType: "airlock.v1.started", HeaderCESource: "airlock/executor", HeaderContentType: "",
		}, -1},
	} {
		msg, err := c.encode()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if msg.Subject != plain.Subject || string(msg.Data) != string(plain.Data) {
			t.Fatalf("%s: gave %s %x, Encode %s %x", c.name, msg.Subject, msg.Data, plain.Subject, plain.Data)
		}
		for h, want := range c.headers {
			if got, ok := msg.Header[h]; want == "" && ok || want != "" && HeaderValue(msg.Header, h) != want {
				t.Errorf("%s: header %s = %q, want %q", c.name, h, got, want)
			}
		}
		if len(msg.Header) != len(plain.Header)+c.more {
			t.Errorf("%s: %d headers, Encode %d: want %+d", c.name, len(msg.Header), len(plain.Header), c.more)
		}
	}
}
