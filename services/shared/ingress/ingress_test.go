package ingress

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func jsonHeader() nats.Header {
	h := nats.Header{}
	h.Set("Content-Type", "application/json")
	return h
}

func TestRequestAcceptsAndNormalizes(t *testing.T) {
	call, r := Request("airlock.req.bot.c1",
		[]byte(`{"requested":{"call":{"tool":"fs__read_file","arguments":{"path":"/tmp/a"}}}}`), jsonHeader(), Limits{MaxBytes: 1024})
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
	if _, r := Request("airlock.req.bot.c1", data, nats.Header{}, Limits{MaxBytes: 1024}); r != nil {
		t.Fatal(r)
	}
}

func TestCallRefusesControlCharactersInThreadAndPrincipal(t *testing.T) {
	for _, call := range []*airlockv1.ToolCall{
		{AgentId: "a", CallId: "c", Tool: "fs__read_file", ThreadId: "x\r\revent: sync\rdata: \r\r"},
		{AgentId: "a", CallId: "c", Tool: "fs__read_file", OnBehalfOf: "alice\n"},
		{AgentId: "a", CallId: "c", Tool: "fs__read_file", Cwd: "/home/dev\x1b[2J"},
		{AgentId: "a", CallId: "c", Tool: "fs__read_file", Cwd: "/" + strings.Repeat("d", MaxPathLen)},
	} {
		if r := Call(call); r == nil {
			t.Errorf("accepted %q / %q / %.20q", call.ThreadId, call.OnBehalfOf, call.Cwd)
		}
	}
	if r := Call(&airlockv1.ToolCall{AgentId: "a", CallId: "c", Tool: "fs__read_file", Cwd: "/home/dev/my shop"}); r != nil {
		t.Errorf("refused a plain working directory: %v", r)
	}
}

func TestCallBoundsTheScriptItNames(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		name   string
		script *airlockv1.Script
		ok     bool
	}{
		{"a_script_with_digest_run_and_index_is_accepted", &airlockv1.Script{Digest: digest, RunId: "run_1", Index: 1, Text: "return 1", Preview: []string{"tools.fs__read()"}}, true},
		{"a_digest_of_another_form_is_refused", &airlockv1.Script{Digest: "md5:abc", RunId: "run_1", Index: 1}, false},
		{"a_run_id_with_other_characters_is_refused", &airlockv1.Script{Digest: digest, RunId: "../run", Index: 1}, false},
		{"index_zero_is_refused", &airlockv1.Script{Digest: digest, RunId: "run_1"}, false},
		{"a_text_over_the_limit_is_refused", &airlockv1.Script{Digest: digest, RunId: "run_1", Index: 1, Text: strings.Repeat("x", MaxScriptText+1)}, false},
		{"a_text_that_is_not_utf8_is_refused", &airlockv1.Script{Digest: digest, RunId: "run_1", Index: 1, Text: "\xff"}, false},
		{"a_preview_over_the_limit_is_refused", &airlockv1.Script{Digest: digest, RunId: "run_1", Index: 1, Preview: []string{strings.Repeat("p", MaxPreviewBytes+1)}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Call(&airlockv1.ToolCall{AgentId: "a", CallId: "c", Tool: "fs__read_file", Script: c.script})
			if (r == nil) != c.ok {
				t.Fatalf("refusal %v, want accepted=%v", r, c.ok)
			}
		})
	}
}

func TestRequestRefusals(t *testing.T) {
	nan, _ := proto.Marshal(&airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{
		Call: &airlockv1.ToolCall{Tool: "demo__echo", Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{
			"n": {Kind: &structpb.Value_ListValue{ListValue: &structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(math.NaN())}}}},
		}}}}}})
	inf, _ := proto.Marshal(&airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{
		Call: &airlockv1.ToolCall{Tool: "demo__echo", Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.Inf(1))}}}}}})
	encode := func(call *airlockv1.ToolCall) []byte {
		b, _ := proto.Marshal(&airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}})
		return b
	}
	nanAnnotation := encode(&airlockv1.ToolCall{Tool: "demo__echo", Annotations: &structpb.Struct{Fields: map[string]*structpb.Value{"readOnlyHint": structpb.NewNumberValue(math.NaN())}}})
	kindless := encode(&airlockv1.ToolCall{Tool: "demo__echo", Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{"extra": {}}}})
	farFuture := encode(&airlockv1.ToolCall{Tool: "demo__echo", CreatedAt: &timestamppb.Timestamp{Seconds: math.MaxInt64 / 2}})
	for _, tc := range []struct {
		name, subject string
		data          []byte
		json          bool
		want          string
	}{
		{"refuses_a_subject_outside_the_intake", "airlock.evt.bot.c1.requested", []byte(`{}`), true, "airlock.req.<agent_id>.<call_id>"},
		{"refuses_a_reserved_agent_name", "airlock.req._system.c1", []byte(`{"requested":{"call":{"tool":"demo__echo"}}}`), true, "reserves"},
		{"refuses_a_call_id_with_other_characters", "airlock.req.bot.c$1", []byte(`{"requested":{"call":{"tool":"demo__echo"}}}`), true, "call id"},
		{"refuses_a_thread_id_with_a_slash", "airlock.req.bot.c1", []byte(`{"requested":{"call":{"tool":"demo__echo","threadId":"t/../../grants?"}}}`), true, "thread_id"},
		{"refuses_another_agents_id_in_the_body", "airlock.req.bot.c1", []byte(`{"agentId":"evil","requested":{"call":{"tool":"demo__echo"}}}`), true, "does not match"},
		{"refuses_a_nan_deep_in_the_arguments", "airlock.req.bot.c1", nan, false, "/n/0 is not a finite number"},
		{"refuses_an_infinite_argument", "airlock.req.bot.c1", inf, false, "/x is not a finite number"},
		{"refuses_a_nan_annotation", "airlock.req.bot.c1", nanAnnotation, false, "annotation /readOnlyHint is not a finite number"},
		{"refuses_a_value_of_no_kind", "airlock.req.bot.c1", kindless, false, "argument /extra has no value"},
		{"refuses_a_time_out_of_range", "airlock.req.bot.c1", farFuture, false, "created_at is not a valid time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := nats.Header{}
			if tc.json {
				h = jsonHeader()
			}
			_, r := Request(tc.subject, tc.data, h, Limits{MaxBytes: 1 << 20})
			if r == nil || !strings.Contains(r.Reason, tc.want) {
				t.Fatalf("refusal %v, want one mentioning %q", r, tc.want)
			}
		})
	}
}

func TestInvalidEventStaysOnTheAgentsOwnSubject(t *testing.T) {
	for _, tc := range []struct{ subject, named, agent, call string }{
		{"airlock.req.bot.c1", "", "bot", "c1"},
		{"airlock.req.bot.c$1", "", "bot", "_invalid"},
		{"airlock.req._system.c1", "", "_system", "_invalid"},
		{"airlock.req.bot", "c2", "bot", "c2"},
		{"airlock.req.bot", "", "bot", "_invalid"},
		{"airlock.req.bot", "c$2", "bot", "_invalid"},
	} {
		ev := InvalidEvent(tc.subject, 7, 1, []byte("x"), &Refusal{Reason: "no", Call: tc.named})
		if ev.AgentId != tc.agent || ev.CallId != tc.call || ev.EventId != "intake.7.invalid" {
			t.Errorf("%s: invalid event on %s/%s id %s", tc.subject, ev.AgentId, ev.CallId, ev.EventId)
		}
	}
}

// The intake stores a request under its agent alone (airlock.req.<agent>):
// the call id comes from the body, and a refusal names it so the agent sees
// the refusal on its own call.
func TestRequestAsTheIntakeStoresIt(t *testing.T) {
	body := func(callID string) []byte {
		return []byte(`{"requested":{"call":{"callId":"` + callID + `","tool":"demo__echo"}}}`)
	}
	for _, tc := range []struct {
		name, subject string
		data          []byte
		call, refusal string // the call's id; the refusal's words and the call it names
	}{
		{"the_call_id_comes_from_the_body", "airlock.req.bot", body("c7"), "c7", ""},
		{"a_body_without_a_call_id_is_refused", "airlock.req.bot", body(""), "", "names no call"},
		{"an_invalid_call_id_in_the_body_is_refused", "airlock.req.bot", body("c/7"), "", "call id"},
		{"the_published_subject_and_the_body_must_agree", "airlock.req.bot.c1", body("c7"), "c1", "does not match"},
		{"a_refusal_names_the_bodys_call", "airlock.req.bot", []byte(`{"requested":{"call":{"callId":"c8"}}}`), "c8", "tool is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, r := Request(tc.subject, tc.data, jsonHeader(), Limits{MaxBytes: 1 << 20})
			switch {
			case tc.refusal == "":
				if r != nil || call.GetCallId() != tc.call || call.GetAgentId() != "bot" {
					t.Fatalf("call %v refusal %v, want call bot/%s", call, r, tc.call)
				}
			case r == nil || !strings.Contains(r.Reason, tc.refusal) || r.Call != tc.call:
				t.Fatalf("refusal %+v, want one saying %q about call %q", r, tc.refusal, tc.call)
			}
		})
	}
	big := []byte(`{"requested":{"call":{"callId":"c9","tool":"demo__echo","arguments":{"x":"` + strings.Repeat("a", 2000) + `"}}}}`)
	if _, r := Request("airlock.req.bot", big, jsonHeader(), Limits{MaxBytes: 1000}); r == nil || r.Call != "c9" || !strings.Contains(r.Reason, "over the 1000-byte limit") {
		t.Fatalf("an oversized request was refused with %+v, want its call named", r)
	}
}

// A report, like a request, is stored under its agent alone: its call id is
// the body's (the event's call_id), never a token of the stored subject,
// and a report that names no call is refused.
func TestReportAsTheIntakeStoresIt(t *testing.T) {
	for _, tc := range []struct {
		name, subject string
		data          []byte
		call, refusal string // the report's call; the refusal's words and the call it names
		rev           uint32
	}{
		{"the_call_id_comes_from_the_body", "airlock.req.bot", []byte(`{"callId":"g1","revision":2,"reported":{"resultJson":"\"ok\""}}`), "g1", "", 2},
		{"the_revision_defaults_to_1", "airlock.req.bot", []byte(`{"callId":"g1","reported":{}}`), "g1", "", 1},
		{"a_report_without_a_call_id_is_refused", "airlock.req.bot", []byte(`{"reported":{"resultJson":"\"ok\""}}`), "", "names no call", 0},
		{"an_invalid_call_id_is_refused", "airlock.req.bot", []byte(`{"callId":"g/1","reported":{}}`), "", "call id", 0},
		{"another_agents_id_is_refused", "airlock.req.bot", []byte(`{"agentId":"victim","callId":"g1","reported":{}}`), "g1", "does not match", 0},
		{"the_published_subject_and_the_body_must_agree", "airlock.req.bot.g2", []byte(`{"callId":"g1","reported":{}}`), "g2", "does not match", 0},
		{"a_refusal_names_the_bodys_call", "airlock.req.bot", []byte(`{"callId":"g3","reported":{"resultJson":"not json"}}`), "g3", "is not JSON", 0},
		{"a_request_is_not_a_report", "airlock.req.bot", []byte(`{"requested":{"call":{"callId":"c1","tool":"demo__echo"}}}`), "c1", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, rep, r := Intake(tc.subject, tc.data, jsonHeader(), Limits{MaxBytes: 1 << 20})
			switch {
			case tc.refusal == "" && call != nil:
				if r != nil || rep != nil || call.GetCallId() != tc.call {
					t.Fatalf("call %v report %v refusal %v, want the request of %s", call, rep, r, tc.call)
				}
			case tc.refusal == "":
				if r != nil || rep == nil || rep.Ref.Agent != "bot" || rep.Ref.Call != tc.call || rep.Ref.Rev != tc.rev {
					t.Fatalf("report %+v refusal %v, want one about bot/%s revision %d", rep, r, tc.call, tc.rev)
				}
			case r == nil || !strings.Contains(r.Reason, tc.refusal) || r.Call != tc.call:
				t.Fatalf("refusal %+v, want one saying %q about call %q", r, tc.refusal, tc.call)
			}
		})
	}
	// Request takes requests only, and names the call of a report it refuses.
	if _, r := Request("airlock.req.bot", []byte(`{"callId":"g1","reported":{}}`), jsonHeader(), Limits{MaxBytes: 1 << 20}); r == nil || r.Call != "g1" {
		t.Fatalf("Request took a report: %+v", r)
	}
}

// nested is a JSON object whose value at "v" nests depth containers deep
// (the arguments object counts one), as objects or lists.
func nested(depth int, list bool) string {
	open, close := `{"v":`, `}`
	if list {
		open, close = `[`, `]`
	}
	return `{"v":` + strings.Repeat(open, depth-1) + `1` + strings.Repeat(close, depth-1) + `}`
}

func TestArgumentsNestedPastTheLimitAreRefused(t *testing.T) {
	body := func(args string) []byte {
		return []byte(`{"requested":{"call":{"tool":"fs__write_file","arguments":` + args + `}}}`)
	}
	tests := []struct {
		name    string
		args    string
		lim     Limits
		refused bool
	}{
		{"objects_at_the_default_limit_pass", nested(DefaultMaxDepth, false), Limits{MaxBytes: 1 << 20}, false},
		{"objects_one_past_the_default_limit_are_refused", nested(DefaultMaxDepth+1, false), Limits{MaxBytes: 1 << 20}, true},
		{"lists_one_past_the_default_limit_are_refused", nested(DefaultMaxDepth+1, true), Limits{MaxBytes: 1 << 20}, true},
		{"thousands_of_levels_are_refused", nested(4900, false), Limits{MaxBytes: 1 << 20}, true},
		{"a_configured_limit_holds", nested(9, false), Limits{MaxBytes: 1 << 20, MaxDepth: 8}, true},
		{"a_raised_limit_lets_deeper_arguments_in", nested(64, true), Limits{MaxBytes: 1 << 20, MaxDepth: 64}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, r := Request("airlock.req.bot.d1", body(tc.args), jsonHeader(), tc.lim)
			if !tc.refused {
				if r != nil {
					t.Fatalf("refused: %s", r.Reason)
				}
				return
			}
			if r == nil || !strings.Contains(r.Reason, "nests deeper than") || !strings.Contains(r.Reason, "limits.max_argument_depth") {
				t.Fatalf("want a refusal naming the depth limit, got %v", r)
			}
		})
	}
}

func TestCallHoldsArgumentsToTheCeiling(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	inner := args
	for range MaxDepthCeiling {
		next := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		inner.Fields["v"] = structpb.NewStructValue(next)
		inner = next
	}
	r := Call(&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "fs__x", Arguments: args})
	if r == nil || !strings.Contains(r.Reason, "nests deeper than 128 levels") {
		t.Fatalf("want the ceiling refusal, got %v", r)
	}
}

func TestValidNameIsTheDocumentedPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
	names := []string{"", "fs", "read_file", "a.b:c-d_e", "a b", "a/b", "a*", "a>", "caf\u00e9", "a\x00", strings.Repeat("n", MaxNameLen), strings.Repeat("n", MaxNameLen+1)}
	for c := 0; c < 256; c++ {
		names = append(names, "x"+string([]byte{byte(c)}))
	}
	for _, s := range names {
		if want := len(s) <= MaxNameLen && pattern.MatchString(s); ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, !want, want)
		}
	}
}

// checkCall refuses what protojson would refuse without encoding the call
// as JSON: every text field of a ToolCall, found by reflection (so a field
// added later is covered), refused when it is not UTF-8, and the message
// fields limited to those whose JSON validity checkCall knows.
func TestCheckCallRefusesWhatProtojsonRefuses(t *testing.T) {
	valid := func() *airlockv1.ToolCall {
		args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/x", "n": 1, "nested": map[string]any{"ok": true}})
		return &airlockv1.ToolCall{AgentId: "a", CallId: "c", Tool: "fs__read_file", Arguments: args, CreatedAt: timestamppb.Now(),
			Script: &airlockv1.Script{Digest: "sha256:" + strings.Repeat("ab", 32), RunId: "r1", Index: 1, Preview: []string{"p"}}}
	}
	if r := Call(valid()); r != nil {
		t.Fatalf("a valid call was refused: %s", r.Reason)
	}
	known := map[protoreflect.FullName]bool{"google.protobuf.Struct": true, "google.protobuf.Timestamp": true, "airlock.v1.Script": true}
	var textFields func(path []protoreflect.FieldDescriptor, md protoreflect.MessageDescriptor)
	var paths [][]protoreflect.FieldDescriptor
	textFields = func(path []protoreflect.FieldDescriptor, md protoreflect.MessageDescriptor) {
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			p := append(slices.Clone(path), fd)
			switch fd.Kind() {
			case protoreflect.StringKind:
				paths = append(paths, p)
			case protoreflect.MessageKind:
				if !known[fd.Message().FullName()] {
					t.Errorf("ToolCall field %s is a %s: make checkCall refuse whatever protojson refuses in it, then add it here", fd.FullName(), fd.Message().FullName())
				}
				if fd.Message().FullName() == "airlock.v1.Script" {
					textFields(p, fd.Message())
				}
			}
		}
	}
	textFields(nil, (&airlockv1.ToolCall{}).ProtoReflect().Descriptor())
	if len(paths) < 10 {
		t.Fatalf("found only %d text fields: the walk is broken", len(paths))
	}
	for _, p := range paths {
		call := valid()
		m := call.ProtoReflect()
		for _, fd := range p[:len(p)-1] {
			m = m.Mutable(fd).Message()
		}
		fd := p[len(p)-1]
		if fd.IsList() {
			m.Mutable(fd).List().Append(protoreflect.ValueOfString("bad \xff"))
		} else {
			m.Set(fd, protoreflect.ValueOfString("bad \xff"))
		}
		if _, err := protojson.Marshal(call); err == nil {
			t.Fatalf("protojson accepted %s not UTF-8: the oracle is wrong", fd.FullName())
		}
		if r := Call(call); r == nil {
			t.Errorf("a call whose %s is not UTF-8 was accepted", fd.FullName())
		}
	}
	for _, bad := range []struct {
		name string
		set  func(*airlockv1.ToolCall)
	}{
		{"an argument's text is not UTF-8", func(c *airlockv1.ToolCall) { c.Arguments.Fields["path"] = structpb.NewStringValue("\xff") }},
		{"an argument's name is not UTF-8", func(c *airlockv1.ToolCall) { c.Arguments.Fields["\xff"] = structpb.NewBoolValue(true) }},
		{"a nested argument's text is not UTF-8", func(c *airlockv1.ToolCall) {
			c.Arguments.Fields["nested"].GetStructValue().Fields["x"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("\xfe")}})
		}},
		{"an annotation's text is not UTF-8", func(c *airlockv1.ToolCall) {
			c.Annotations = &structpb.Struct{Fields: map[string]*structpb.Value{"title": structpb.NewStringValue("\xff")}}
		}},
	} {
		call := valid()
		bad.set(call)
		if _, err := protojson.Marshal(call); err == nil {
			t.Fatalf("%s: protojson accepted it, the oracle is wrong", bad.name)
		}
		if r := Call(call); r == nil {
			t.Errorf("%s: the call was accepted", bad.name)
		}
	}
}
