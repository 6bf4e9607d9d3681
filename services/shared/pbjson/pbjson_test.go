package pbjson

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

var protojsonForm = protojson.MarshalOptions{UseProtoNames: true}

// sameAsProtojson fails unless Append and Marshal both write m as the JSON
// value protojson writes, and protojson reads it back to m.
func sameAsProtojson(t *testing.T, name string, m proto.Message) {
	t.Helper()
	theirs, err := protojsonForm.Marshal(m)
	if err != nil {
		t.Fatalf("%s: protojson: %v", name, err)
	}
	strict, err := Marshal(m)
	if err != nil {
		t.Fatalf("%s: Marshal refused what protojson writes: %v", name, err)
	}
	lenient := Append(nil, m.ProtoReflect())
	if string(strict) != string(lenient) {
		t.Fatalf("%s: Marshal and Append differ:\n%s\n%s", name, strict, lenient)
	}
	var a, b any
	if err := json.Unmarshal(strict, &a); err != nil {
		t.Fatalf("%s: invalid JSON %v:\n%s", name, err, strict)
	}
	_ = json.Unmarshal(theirs, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s differs:\nmine      %s\nprotojson %s", name, strict, theirs)
	}
	back := m.ProtoReflect().New().Interface()
	if err := protojson.Unmarshal(strict, back); err != nil {
		t.Fatalf("%s: protojson cannot read it back: %v\n%s", name, err, strict)
	}
	if !proto.Equal(back, m) {
		t.Fatalf("%s: read back differently:\n%v\n%v", name, back, m)
	}
}

func TestEventsAreWrittenAsProtojsonWritesThem(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"path": "/a\"b\\c\n\u0001é", "n": 1.5, "big": 1e21, "small": 1e-7, "neg": -3, "ok": true, "nil": nil,
		"list": []any{"x", 2, map[string]any{"z": "y"}}, "obj": map[string]any{"b": 1, "a": 2}, "html": "<b>&amp;</b> \u2028"})
	call := &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", ThreadId: "t", Server: "fs", Tool: "w", Arguments: args, Revision: 3,
		CreatedAt: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC)), JsonEvents: true}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Risk: airlockv1.Risk_RISK_HIGH, Approvers: []string{"alice", "group:ops"}, Quorum: 2,
		Timeout: durationpb.New(90 * time.Second), RemindAfter: durationpb.New(1500 * time.Microsecond), Redact: []string{"/p"}}
	events := []*airlockv1.Event{
		{EventId: "e1", AgentId: "bot", CallId: "c1", Revision: 3, Json: true, Time: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 123_456_789, time.UTC)),
			Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"},
			Body:  &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: d, Deadline: timestamppb.New(time.Unix(1_800_000_000, 0))}}},
		{EventId: "e2", Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"x":1}`, Latency: durationpb.New(-2500 * time.Millisecond), Attempt: 1}}},
		{EventId: "e3", Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, Votes: []*airlockv1.Vote{{By: &airlockv1.Actor{Id: "bob"}, At: timestamppb.New(time.Unix(5, 7))}}, Edited: true, OriginalArguments: args,
			PreviewDigest: "9f2c", Precondition: "sha256:0a1b"}}},
		{EventId: "e4", Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "bad", RawExcerpt: "tab\there <b>&amp;</b> \u2028"}}},
		{EventId: "e5", Time: timestamppb.New(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)), Body: &airlockv1.Event_Rejected{Rejected: &airlockv1.Rejected{}}}, // a oneof member that is all defaults
		{EventId: "e6", Time: timestamppb.New(time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)),
			Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Latency: &durationpb.Duration{Seconds: -315576000000, Nanos: -999_999_999}}}},
	}
	for _, ev := range events {
		sameAsProtojson(t, ev.EventId, ev)
	}
}

// TestEveryAirlockMessageFilledIsWrittenAsProtojsonWritesIt fills every field
// of every message airlock defines (each oneof member in turn) and
// compares: a field added to a message is covered without a new case.
func TestEveryAirlockMessageFilledIsWrittenAsProtojsonWritesIt(t *testing.T) {
	fd := (&airlockv1.Event{}).ProtoReflect().Descriptor().ParentFile()
	pkg := fd.Package()
	n := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		md := mt.Descriptor()
		if md.ParentFile().Package() != pkg {
			return true
		}
		variants := 1
		for i := 0; i < md.Oneofs().Len(); i++ {
			variants = max(variants, md.Oneofs().Get(i).Fields().Len())
		}
		for v := 0; v < variants; v++ {
			m := mt.New()
			fill(m, v, 3)
			sameAsProtojson(t, fmt.Sprintf("%s (oneof member %d)", md.FullName(), v), m.Interface())
			n++
		}
		return true
	})
	if n < 40 {
		t.Fatalf("only %d airlock messages filled: is the registry reading package %s?", n, pkg)
	}
}

// fill sets every field of m (of each oneof, its member variant modulo its
// size) to a value that is not the default, down to depth nested messages.
func fill(m protoreflect.Message, variant, depth int) {
	md := m.Descriptor()
	for i := 0; i < md.Fields().Len(); i++ {
		f := md.Fields().Get(i)
		if od := f.ContainingOneof(); od != nil && !od.IsSynthetic() && od.Fields().Get(variant%od.Fields().Len()) != f {
			continue
		}
		switch {
		case f.IsList():
			l := m.Mutable(f).List()
			for j := 0; j < 2; j++ {
				if f.Kind() == protoreflect.MessageKind {
					if depth > 0 {
						e := l.NewElement()
						fill(e.Message(), variant+j, depth-1)
						l.Append(e)
					}
					continue
				}
				l.Append(scalar(f, j))
			}
		case f.IsMap():
			mp := m.Mutable(f).Map()
			for j := 0; j < 2; j++ {
				k := scalar(f.MapKey(), j).MapKey()
				if f.MapValue().Kind() == protoreflect.MessageKind {
					if depth > 0 {
						v := mp.NewValue()
						fill(v.Message(), variant+j, depth-1)
						mp.Set(k, v)
					}
					continue
				}
				mp.Set(k, scalar(f.MapValue(), j))
			}
		case f.Kind() == protoreflect.MessageKind:
			if depth > 0 {
				fillMessage(m.Mutable(f).Message(), variant, depth-1)
			}
		default:
			m.Set(f, scalar(f, 1))
		}
	}
}

// fillMessage is fill, with the well-known types given values protojson
// accepts.
func fillMessage(m protoreflect.Message, variant, depth int) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Timestamp":
		proto.Merge(m.Interface(), timestamppb.New(time.Date(2026, 11, 29, 9, 30, 1, 250_000_000+variant, time.UTC)))
	case "google.protobuf.Duration":
		proto.Merge(m.Interface(), durationpb.New(-time.Duration(variant+1)*1500*time.Millisecond))
	case "google.protobuf.Struct":
		s, _ := structpb.NewStruct(map[string]any{"k\u00e9\"": "v\n", "n": -2.5e-9, "b": true, "z": nil, "l": []any{1.0, "x", map[string]any{"deep": []any{}}}})
		proto.Merge(m.Interface(), s)
	default:
		fill(m, variant, depth)
	}
}

// scalar is a value of the scalar field f that is not its default: which
// picks between two.
func scalar(f protoreflect.FieldDescriptor, which int) protoreflect.Value {
	w := int64(which + 1)
	switch f.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-w * 1_000_003))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(w * 4_000_000_001 % math.MaxUint32))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-w * 9_007_199_254_740_993)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(w) * 18_000_000_000_000_000_001 / 2)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(w) * 0.1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(w) * 1.000000000000001e-7)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s %d \"q\" \\ é\t\u2028 <&>", f.Name(), w))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, 0xff, byte(w), '"'})
	case protoreflect.EnumKind:
		vs := f.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(min(which+1, vs.Len()-1)).Number())
	}
	panic(fmt.Sprintf("no scalar for %s", f.FullName()))
}

// TestMarshalRefusesWhatProtojsonRefuses: an event that protojson will not
// write is not written by Marshal either (it would be an event no reader
// decodes), while Append writes valid JSON of it for the audit trail.
func TestMarshalRefusesWhatProtojsonRefuses(t *testing.T) {
	value := func(v *structpb.Value) *airlockv1.Event {
		return &airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{
			Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{"v": v}}}}}}
	}
	tests := []struct {
		name string
		ev   *airlockv1.Event
	}{
		{"invalid UTF-8 in a string field", &airlockv1.Event{AgentId: "bot\xff"}},
		{"invalid UTF-8 in a Struct key", &airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{
			Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{"k\xfe": structpb.NewNullValue()}}}}}}},
		{"invalid UTF-8 in a Struct string", value(structpb.NewStringValue("\xc3("))},
		{"a Value without kind", value(&structpb.Value{})},
		{"NaN in a Value", value(structpb.NewNumberValue(math.NaN()))},
		{"infinity in a Value", value(structpb.NewNumberValue(math.Inf(-1)))},
		{"a timestamp before year 1", &airlockv1.Event{Time: &timestamppb.Timestamp{Seconds: minTimestampSeconds - 1}}},
		{"a timestamp after year 9999", &airlockv1.Event{Time: &timestamppb.Timestamp{Seconds: maxTimestampSeconds + 1}}},
		{"a timestamp with negative nanoseconds", &airlockv1.Event{Time: &timestamppb.Timestamp{Seconds: 5, Nanos: -1}}},
		{"a duration over 10,000 years", &airlockv1.Event{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{Latency: &durationpb.Duration{Seconds: maxDurationSeconds + 1}}}}},
		{"a duration whose parts disagree in sign", &airlockv1.Event{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{Latency: &durationpb.Duration{Seconds: 1, Nanos: -1}}}}},
		{"a duration with a second's nanoseconds", &airlockv1.Event{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{Latency: &durationpb.Duration{Nanos: 1e9}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := protojsonForm.Marshal(tt.ev); err == nil {
				t.Fatal("protojson writes it: this case tests nothing")
			}
			if b, err := Marshal(tt.ev); err == nil || !strings.HasPrefix(err.Error(), "encode JSON: ") {
				t.Fatalf("Marshal wrote %s, %v; want its refusal", b, err)
			}
			if b := Append(nil, tt.ev.ProtoReflect()); !json.Valid(b) {
				t.Fatalf("Append wrote invalid JSON: %s", b)
			}
		})
	}
}

func TestAppendOfInvalidUTF8IsStillValidJSON(t *testing.T) {
	b := AppendString(nil, "ok\xff\xfe")
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

// allowedEvent is an auto-allowed call's decision event, as the policy
// stores it for an agent that speaks JSON.
func allowedEvent() *airlockv1.Event {
	args, _ := structpb.NewStruct(map[string]any{"text": "hello from the bench"})
	now := timestamppb.New(time.Now())
	return &airlockv1.Event{Json: true, Time: now, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "policy"},
		EventId: "evt_0123456789abcdef01234567", AgentId: "bot", CallId: "call_1abcdefabcdef", Revision: 1,
		Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{
			Call: &airlockv1.ToolCall{CallId: "call_1abcdefabcdef", AgentId: "bot", Server: "demo", Tool: "echo", Arguments: args, Revision: 1, CreatedAt: now, JsonEvents: true},
			Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, Reason: "read-only tools run at once", RuleId: "allow-read-only", Risk: airlockv1.Risk_RISK_LOW,
				PolicyRevision: "sha256:abcdef0123456789", DecisionId: "dec_0123456789abcdef", DecidedAt: now, Timeout: durationpb.New(time.Hour)}}},
	}
}

// BenchmarkMarshalAllowed writes allowedEvent with Marshal, with protojson
// and, for scale, as protobuf.
func BenchmarkMarshalAllowed(b *testing.B) {
	ev := allowedEvent()
	for _, enc := range []struct {
		name    string
		marshal func(proto.Message) ([]byte, error)
	}{{"pbjson", Marshal}, {"protojson", protojsonForm.Marshal}, {"protobuf", proto.Marshal}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.marshal(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadAllowed reads allowedEvent back as the executor does, from
// its JSON (protojson: what a call requested in JSON costs every reader of
// its events) and, for scale, from its protobuf.
func BenchmarkReadAllowed(b *testing.B) {
	ev := allowedEvent()
	js, err := Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	pb, err := proto.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	for _, dec := range []struct {
		name      string
		data      []byte
		unmarshal func([]byte, proto.Message) error
	}{{"protojson", js, protojson.Unmarshal}, {"protobuf", pb, proto.Unmarshal}} {
		b.Run(dec.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := dec.unmarshal(dec.data, &airlockv1.Event{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
