package ingress

import (
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func jsonHeader() nats.Header {
	h := nats.Header{}
	h.Set("Content-Type", "application/json")
	return h
}

func TestRequestAcceptsAndNormalizes(t *testing.T) {
	call, r := Request("airlock.evt.bot.c1.requested",
		[]byte(`{"requested":{"call":{"tool":"fs__read_file","arguments":{"path":"/tmp/a"}}}}`), jsonHeader(), 1024)
	if r != nil {
		t.Fatal(r)
	}
	if call.AgentId != "bot" || call.CallId != "c1" || call.Server != "fs" || call.Tool != "read_file" || call.Revision != 1 {
		t.Fatalf("normalized call %v", call)
	}
}

func TestRequestAcceptsProtobuf(t *testing.T) {
	data, _ := proto.Marshal(&airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{
		Call: &airlockv1.ToolCall{Server: "demo", Tool: "echo"}}}})
	if _, r := Request("airlock.evt.bot.c1.requested", data, nats.Header{}, 1024); r != nil {
		t.Fatal(r)
	}
}

func TestCallRefusesControlCharactersInThreadAndPrincipal(t *testing.T) {
	for _, call := range []*airlockv1.ToolCall{
		{AgentId: "a", CallId: "c", Tool: "fs__read_file", ThreadId: "x\r\revent: sync\rdata: \r\r"},
		{AgentId: "a", CallId: "c", Tool: "fs__read_file", OnBehalfOf: "alice\n"},
	} {
		if r := Call(call); r == nil {
			t.Errorf("accepted %q / %q", call.ThreadId, call.OnBehalfOf)
		}
	}
}
