// Package envelope encodes airlock events as NATS messages and back.
//
// The body is protobuf binary (canonical) or protojson when the message says
// Content-Type: application/json. Every message carries CloudEvents
// attributes as headers (ce-id, ce-type, ce-source, ce-time, ce-specversion),
// a W3C traceparent, and Nats-Msg-Id = ce-id so the stream stores a retried
// publish once.
package envelope

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Header names.
const (
	HeaderContentType = "Content-Type"
	HeaderCEID        = "ce-id"
	HeaderCEType      = "ce-type"
	HeaderCESource    = "ce-source"
	HeaderCETime      = "ce-time"
	HeaderCESpec      = "ce-specversion"
	HeaderTraceparent = "traceparent"
	ContentProtobuf   = "application/protobuf"
	ContentJSON       = "application/json"
)

// TypeOf returns the event type (the body oneof's field name, which is also
// the subject's last token), or "" for an event without a body.
func TypeOf(ev *airlockv1.Event) string {
	od := ev.ProtoReflect().Descriptor().Oneofs().ByName("body")
	fd := ev.ProtoReflect().WhichOneof(od)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// EventID is the deterministic id for an event that happens at most once
// per call revision, e.g. "call_1.2.approved".
func EventID(call string, revision uint32, typ string) string {
	return fmt.Sprintf("%s.%d.%s", call, revision, typ)
}

// Subject returns the subject the event is published on.
func Subject(ev *airlockv1.Event) (string, error) {
	return subject.Event(ev.GetAgentId(), ev.GetCallId(), TypeOf(ev))
}

// Encode builds the message for ev. A missing event id or time is filled in.
// parentTrace, when a valid traceparent, makes this event a child span of it.
func Encode(ev *airlockv1.Event, source, parentTrace string) (*nats.Msg, error) {
	typ := TypeOf(ev)
	if typ == "" {
		return nil, fmt.Errorf("encode event for call %s: it has no body", ev.GetCallId())
	}
	if ev.EventId == "" {
		ev.EventId = randomID()
	}
	if ev.Time == nil {
		ev.Time = timestamppb.Now()
	}
	subj, err := Subject(ev)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", typ, err)
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode %s event for call %s: %w", typ, ev.CallId, err)
	}
	msg := nats.NewMsg(subj)
	msg.Data = data
	msg.Header.Set(HeaderContentType, ContentProtobuf)
	msg.Header.Set(HeaderCEID, ev.EventId)
	msg.Header.Set(HeaderCEType, "airlock.v1."+typ)
	msg.Header.Set(HeaderCESource, source)
	msg.Header.Set(HeaderCETime, ev.Time.AsTime().UTC().Format(time.RFC3339Nano))
	msg.Header.Set(HeaderCESpec, "1.0")
	msg.Header.Set(HeaderTraceparent, ChildTrace(parentTrace))
	msg.Header.Set(jetstream.MsgIDHeader, ev.EventId)
	return msg, nil
}

// Decode parses an event from a message body and its headers.
func Decode(data []byte, header nats.Header) (*airlockv1.Event, error) {
	ev := &airlockv1.Event{}
	if IsJSON(header) {
		if err := protojson.Unmarshal(data, ev); err != nil {
			return nil, fmt.Errorf("decode protojson event: %w", err)
		}
		return ev, nil
	}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("decode protobuf event: %w", err)
	}
	return ev, nil
}

// IsJSON reports whether the message declares a protojson body.
func IsJSON(header nats.Header) bool {
	ct := header.Get(HeaderContentType)
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), ContentJSON)
}

// Publisher publishes events to JetStream with the envelope above.
type Publisher struct {
	js     jetstream.JetStream
	source string
}

// NewPublisher returns a Publisher whose events name source as ce-source,
// e.g. "airlock/policy" or "agent/bot-1".
func NewPublisher(js jetstream.JetStream, source string) *Publisher {
	return &Publisher{js: js, source: source}
}

// Publish stores ev in the events stream and waits for the stream's ack.
// A publish whose event id the stream saw within its duplicate window is
// acknowledged as a duplicate and stored once; that is success.
func (p *Publisher) Publish(ctx context.Context, ev *airlockv1.Event, parentTrace string) (*jetstream.PubAck, error) {
	msg, err := Encode(ev, p.source, parentTrace)
	if err != nil {
		return nil, err
	}
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	return ack, nil
}

// ChildTrace returns a traceparent in the trace of parent with a new span
// id, or a new trace when parent is not a valid traceparent.
func ChildTrace(parent string) string {
	traceID := ""
	if p := strings.Split(parent, "-"); len(p) == 4 && p[0] == "00" && len(p[1]) == 32 && len(p[2]) == 16 && isHex(p[1]) {
		traceID = p[1]
	}
	if traceID == "" {
		traceID = randomHex(16)
	}
	return "00-" + traceID + "-" + randomHex(8) + "-01"
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.Trim(s, "0") != ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

func randomID() string { return "evt_" + randomHex(12) }
