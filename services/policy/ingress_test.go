package policy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestMalformedRequestsBecomeInvalid publishes requests the way a buggy or
// hostile agent might, straight onto the bus, and checks that each yields one
// `invalid` event with a reason a person can act on, and nothing else.
func TestMalformedRequestsBecomeInvalid(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Limits.MaxRequestBytes = 2048
	deps := testenv.Deps(t, cfg)
	engine, err := policy.NewEngine(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := policy.New(deps, engine)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, svc)

	pb := func(ev *airlockv1.Event) []byte {
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name, call string // call: where the invalid event is recorded
		data       []byte
		json       bool
		want       string
	}{
		// Bodies that name no call (or cannot be read at all) are recorded
		// under the agent's "_invalid" call.
		{"does_not_decode", "_invalid", []byte{0xff, 0x01, 0x02}, false, "does not decode"},
		{"not_json", "_invalid", []byte(`{"requested":`), true, "not valid JSON"},
		{"names_no_call", "_invalid", []byte(`{"requested":{"call":{"tool":"fs__read_file"}}}`), true, "names no call"},
		{"arguments_not_an_object", "c3", []byte(`{"requested":{"call":{"callId":"c3","tool":"fs__read_file","arguments":["/etc/passwd"]}}}`), true, "arguments must be a JSON object"},
		{"no_tool", "c4", []byte(`{"requested":{"call":{"callId":"c4","server":"fs"}}}`), true, "tool is required"},
		{"no_call", "c5", []byte(`{"callId":"c5","requested":{}}`), true, "has no call"},
		{"wrong_body", "c6", pb(&airlockv1.Event{CallId: "c6", Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{}}}), false, `must be "requested"`},
		{"spoofed_agent", "c7", []byte(`{"agentId":"admin","requested":{"call":{"callId":"c7","tool":"fs__read_file"}}}`), true, "does not match"},
		{"oversized", "c9", []byte(`{"requested":{"call":{"callId":"c9","tool":"fs__write_file","arguments":{"content":"` + strings.Repeat("x", 3000) + `"}}}}`), true, "over the 2048-byte limit"},
		{"bad_tool_name", "c10", []byte(`{"requested":{"call":{"callId":"c10","tool":"fs__read file!"}}}`), true, "must be 1-128 characters"},
		{"unknown_field", "c11", []byte(`{"requested":{"call":{"callId":"c11","tool":"fs__read_file","sudo":true}}}`), true, "does not decode"},
		// A report names its call in its body too (the subject's call token
		// is not stored): one without is refused like any unreadable request.
		{"report_names_no_call", "_invalid", []byte(`{"reported":{"resultJson":"\"done\""}}`), true, "report names no call"},
		{"report_result_not_json", "c13", []byte(`{"callId":"c13","reported":{"resultJson":"done"}}`), true, "is not JSON"},
		{"report_of_another_agent", "c14", []byte(`{"agentId":"admin","callId":"c14","reported":{}}`), true, "does not match"},
		// Issue 22: a deeply nested argument made every page that shows it
		// quadratic; past limits.max_argument_depth (32) it never enters.
		{"nested_past_the_depth_limit", "c15", []byte(`{"requested":{"call":{"callId":"c15","tool":"fs__write_file","arguments":{"v":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}}}`), true, "nests deeper than 32 levels"},
		{"nested_protobuf_past_the_depth_limit", "c16", pb(deepRequest("c16", 40)), false, "nests deeper than 32 levels"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := nats.NewMsg(fmt.Sprintf("airlock.req.bot.c%d", i+1))
			msg.Data = tt.data
			if tt.json {
				msg.Header.Set("Content-Type", "application/json")
			}
			if _, err := deps.JS.PublishMsg(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
			filter := subject.OfCall("bot", tt.call)
			testenv.Eventually(t, 10*time.Second, "an invalid event saying "+tt.want, func() bool {
				return slices.ContainsFunc(testenv.Events(t, deps.JS, filter), func(ev *airlockv1.Event) bool {
					return strings.Contains(ev.GetInvalid().GetReason(), tt.want)
				})
			})
			// Every request handled: nothing more is coming for the call.
			testenv.Settled(t, deps.JS, cfg.Intake.Name, policy.Durable, 10*time.Second)
			if got := testenv.SubjectTypes(t, deps.JS, filter); slices.ContainsFunc(got, func(typ string) bool { return typ != subject.Invalid }) {
				t.Fatalf("events for the call: %v, want only invalid: a refused request is never recorded as requested", got)
			}
		})
	}
}

// deepRequest is a protobuf request for call id whose arguments nest depth
// levels deep.
func deepRequest(id string, depth int) *airlockv1.Event {
	v := structpb.NewNumberValue(1)
	for range depth - 1 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	args := &structpb.Struct{Fields: map[string]*structpb.Value{"v": v}}
	return &airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{
		Call: &airlockv1.ToolCall{CallId: id, Tool: "fs__write_file", Arguments: args}}}}
}
