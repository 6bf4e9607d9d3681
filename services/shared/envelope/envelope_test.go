package envelope

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestEncodeSetsSubjectAndHeaders(t *testing.T) {
	ev := &airlockv1.Event{
		EventId: EventID("c1", 1, "requested"), AgentId: "a1", CallId: "c1", Revision: 1,
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
		HeaderCEID: "c1.1.requested", "Nats-Msg-Id": "c1.1.requested", HeaderCEType: "airlock.v1.requested",
		HeaderCESource: "agent/a1", HeaderCESpec: "1.0", HeaderContentType: ContentProtobuf,
	} {
		if got := msg.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	tp := msg.Header.Get(HeaderTraceparent)
	if !strings.HasPrefix(tp, "00-0af7651916cd43dd8448eb211c80319c-") || strings.Contains(tp, "b7ad6b7169203331") {
		t.Fatalf("traceparent %q is not a child span of the parent", tp)
	}
	if msg.Header.Get(HeaderCETime) == "" {
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
	h := nats.Header{}
	h.Set(HeaderContentType, "application/json; charset=utf-8")
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
