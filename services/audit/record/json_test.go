package record

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// The payload encoder must say what protojson says: same JSON value, and
// protojson reads it back to the same event.
func TestPayloadJSONIsEquivalentToProtojson(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"path": "/a\"b\\c\n\u0001é", "n": 1.5, "big": 1e21, "neg": -3, "ok": true, "nil": nil,
		"list": []any{"x", 2, map[string]any{"z": "y"}}, "obj": map[string]any{"b": 1, "a": 2}})
	call := &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", ThreadId: "t", Server: "fs", Tool: "w", Arguments: args, Revision: 3,
		CreatedAt: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC))}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Risk: airlockv1.Risk_RISK_HIGH, Approvers: []string{"alice", "group:ops"}, Quorum: 2,
		Timeout: durationpb.New(90 * time.Second), RemindAfter: durationpb.New(1500 * time.Microsecond), Redact: []string{"/p"}}
	events := []*airlockv1.Event{
		{EventId: "e1", AgentId: "bot", CallId: "c1", Revision: 3, Time: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 123_456_789, time.UTC)),
			Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"},
			Body:  &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: d, Deadline: timestamppb.New(time.Unix(1_800_000_000, 0))}}},
		{EventId: "e2", Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"x":1}`, Latency: durationpb.New(-2500 * time.Millisecond), Attempt: 1}}},
		{EventId: "e3", Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, Votes: []*airlockv1.Vote{{By: &airlockv1.Actor{Id: "bob"}, At: timestamppb.New(time.Unix(5, 7))}}, Edited: true, OriginalArguments: args,
			PreviewDigest: "9f2c", Precondition: "sha256:0a1b"}}}, // the audit trail carries the preview an approval was made against
		{EventId: "e4", Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "bad", RawExcerpt: "tab\there <b>&amp;</b> \u2028"}}},
	}
	for _, ev := range events {
		mine := appendJSON(nil, ev.ProtoReflect())
		theirs, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(mine, &a); err != nil {
			t.Fatalf("%s: invalid JSON %v:\n%s", ev.EventId, err, mine)
		}
		_ = json.Unmarshal(theirs, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs:\nmine   %s\nprotojson %s", ev.EventId, mine, theirs)
		}
		back := &airlockv1.Event{}
		if err := protojson.Unmarshal(mine, back); err != nil {
			t.Fatalf("%s: protojson cannot read it back: %v", ev.EventId, err)
		}
		if !proto.Equal(back, ev) {
			t.Errorf("%s: read back differently:\n%v\n%v", ev.EventId, back, ev)
		}
	}
}

func TestPayloadJSONOfInvalidUTF8IsStillValidJSON(t *testing.T) {
	b := appendString(nil, "ok\xff\xfe")
	var s string
	if err := json.Unmarshal(b, &s); err != nil || s != "ok\ufffd\ufffd" {
		t.Fatalf("%s → %q, %v", b, s, err)
	}
}

func TestDigitsAreZeroPaddedDecimal(t *testing.T) {
	for _, width := range []int{1, 2, 3, 4, 6, 9} {
		for _, n := range []int{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345, 99999, 100000, 123456789, 999999999, 1e9 - 1, 1e9 + 7} {
			if got, want := string(appendDigits([]byte("x"), n, width)), fmt.Sprintf("x%0*d", width, n); got != want {
				t.Fatalf("appendDigits(%d, %d) = %q, want %q", n, width, got, want)
			}
		}
	}
}
