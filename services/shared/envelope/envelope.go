// Package envelope encodes airlock events as messages and back: the codec
// alone, free of any NATS client (shared/bus publishes what it encodes), so
// that the domain packages that build events depend on no broker.
//
// The body is protobuf binary (canonical) or protojson when the message says
// Content-Type: application/json; airlock writes that header only on
// protojson (SPEC §3 asks for it there alone: a message without it is
// protobuf, and the header cost the server and every reader on each
// message of a call). Events of a call its agent requested in
// JSON (Event.json, set from ToolCall.json_events) are stored as protojson
// with the proto field names, so an agent that speaks only JSON can read
// everything about its calls. Every message carries CloudEvents
// attributes as headers (ce-id, ce-type, ce-source, ce-time, ce-specversion),
// a W3C traceparent, and Nats-Msg-Id = ce-id so the stream stores a retried
// publish once.
package envelope

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
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
	// HeaderMsgID is JetStream's message id, by which a stream stores a
	// retried publish once.
	HeaderMsgID     = "Nats-Msg-Id"
	ContentProtobuf = "application/protobuf"
	ContentJSON     = "application/json"
)

// bodyOneof is the Event's body oneof, looked up once rather than by name
// on every encode.
var bodyOneof = (&airlockv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("body")

// bodyTypes names each Go type of the body oneof (Event_Requested, ...) by
// its field name. Built once, read only: WhichOneof tries the oneof's fields
// one by one through reflection, and every event is typed several times on
// its way (encoded, its subject, read back).
var bodyTypes = func() map[reflect.Type]string {
	fields := bodyOneof.Fields()
	types := make(map[reflect.Type]string, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		m := (&airlockv1.Event{}).ProtoReflect()
		m.Set(fd, m.NewField(fd))
		types[reflect.TypeOf(m.Interface().(*airlockv1.Event).Body)] = string(fd.Name())
	}
	return types
}()

// TypeOf returns the event type (the body oneof's field name, which is also
// the subject's last token), or "" for an event without a body.
func TypeOf(ev *airlockv1.Event) string {
	body := ev.GetBody()
	if body == nil {
		return ""
	}
	if typ, ok := bodyTypes[reflect.TypeOf(body)]; ok && !reflect.ValueOf(body).IsNil() {
		return typ
	}
	fd := ev.ProtoReflect().WhichOneof(bodyOneof)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// Subject returns the subject the event is published on.
func Subject(ev *airlockv1.Event) (string, error) {
	return subject.Event(ev.GetAgentId(), ev.GetCallId(), TypeOf(ev))
}

// Message is an encoded event: what a NATS message carries. Header has the
// shape of nats.Header, which converts to it and back without a copy.
type Message struct {
	Subject string
	Header  map[string][]string
	Data    []byte
	// Type is the event type (TypeOf), which the header also names.
	Type string
}

// HeaderValue returns the first value of h's key ("" when none), as nats.Header.Get.
func HeaderValue(h map[string][]string, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Encode builds the message for ev in the events stream. A missing event id
// or time is filled in. parentTrace, when a valid traceparent, makes this
// event a child span of it. The event id is also the Nats-Msg-Id: only
// services write the events stream, so no one else can pre-empt it.
func Encode(ev *airlockv1.Event, source, parentTrace string) (Message, error) {
	return encodeEvent(ev, source, parentTrace, nil, nil)
}

// EncodeInto is Encode with the message's header kept in hb, which the
// caller reuses for its next message once this one is no longer used (a
// sync publish: once it returned). A publisher encodes several events per
// call; a header built afresh for each was a map and its values every time.
func EncodeInto(hb *Header, ev *airlockv1.Event, source, parentTrace string) (Message, error) {
	return encodeEvent(ev, source, parentTrace, nil, hb)
}

// Header holds an encoded message's header (EncodeInto, EncodeAfterInto):
// its map and the values the map points to. The zero Header is ready to
// use; one Header serves one message at a time.
type Header struct {
	m    map[string][]string
	vals [maxHeaders]string
}

// maxHeaders is the most headers encode sets: the CloudEvents attributes
// and trace, the content type (protojson only), then a message id or a
// compare-and-append's two expectations.
const maxHeaders = 10

// encodeEvent encodes ev for the events stream: with its message id, or
// with after's expectation instead (a compare-and-append); the header in
// hb when given.
func encodeEvent(ev *airlockv1.Event, source, parentTrace string, after *expectation, hb *Header) (Message, error) {
	typ := TypeOf(ev)
	if typ == "" {
		return Message{}, fmt.Errorf("encode event for call %s: it has no body", ev.GetCallId())
	}
	subj, err := subject.Event(ev.GetAgentId(), ev.GetCallId(), typ)
	if err != nil {
		return Message{}, fmt.Errorf("encode %s event: %w", typ, err)
	}
	return encode(ev, subj, typ, source, parentTrace, after == nil, after, hb)
}

// Compare-and-append headers (JetStream's): the message is stored only if
// the last message stored on the subject (which may end in a wildcard) has
// the sequence given (0: there is none).
const (
	HeaderExpectedLastSubjSeq        = "Nats-Expected-Last-Subject-Sequence"
	HeaderExpectedLastSubjSeqSubject = "Nats-Expected-Last-Subject-Sequence-Subject"
)

// EncodeAfter is Encode for a compare-and-append after expectSeq on
// expectSubject: the message carries the expectation and no message id
// (bus.PublishAfter says why). Built in one go, not by changing Encode's
// headers, which grew the header map on every append.
func EncodeAfter(ev *airlockv1.Event, source, parentTrace, expectSubject string, expectSeq uint64) (Message, error) {
	return encodeEvent(ev, source, parentTrace, &expectation{subject: expectSubject, seq: expectSeq}, nil)
}

// EncodeAfterInto is EncodeAfter with the message's header kept in hb, as
// EncodeInto.
func EncodeAfterInto(hb *Header, ev *airlockv1.Event, source, parentTrace, expectSubject string, expectSeq uint64) (Message, error) {
	return encodeEvent(ev, source, parentTrace, &expectation{subject: expectSubject, seq: expectSeq}, hb)
}

// EncodeInBatch is Encode for a message of an atomic batch after its first
// (which EncodeAfter encodes): no message id, which the server refuses
// inside a batch, and no expectation, which only the first message may
// carry. Built in one go, not by removing Encode's message id.
func EncodeInBatch(ev *airlockv1.Event, source, parentTrace string) (Message, error) {
	return encodeEvent(ev, source, parentTrace, &expectation{inBatch: true}, nil)
}

// expectation is a compare-and-append's: the last sequence stored on subject.
type expectation struct {
	subject string
	seq     uint64
	// inBatch: none, the message follows the first of an atomic batch,
	// which carries the batch's expectation.
	inBatch bool
}

// EncodeRequest builds an agent's message for the intake stream, on
// airlock.req.<agent>.<call>: a request (body requested) or a report of a
// gate-only call the agent ran (body reported). It carries no Nats-Msg-Id:
// agents choose their message ids, so airlock never relies on them there
// (the policy service recognises a repeated request by its content, and
// accepts one report per call revision).
func EncodeRequest(ev *airlockv1.Event, source, parentTrace string) (Message, error) {
	typ := TypeOf(ev)
	if typ != subject.Requested && typ != Reported {
		return Message{}, fmt.Errorf("encode request for call %s: the event is neither a request nor a report", ev.GetCallId())
	}
	subj, err := subject.Request(ev.GetAgentId(), ev.GetCallId())
	if err != nil {
		return Message{}, fmt.Errorf("encode request: %w", err)
	}
	return encode(ev, subj, typ, source, parentTrace, false, nil, nil)
}

// Reported is the body type of an agent's report (intake only: it is never
// an event type of the events stream).
const Reported = "reported"

func encode(ev *airlockv1.Event, subj, typ, source, parentTrace string, withMsgID bool, after *expectation, hb *Header) (Message, error) {
	if ev.EventId == "" {
		ev.EventId = randomID()
	}
	if ev.Time == nil {
		ev.Time = timestamppb.Now()
	}
	contentType, data, err := marshal(ev)
	if err != nil {
		return Message{}, fmt.Errorf("encode %s event for call %s: %w", typ, ev.CallId, err)
	}
	// Every event is encoded on a hot path (each call publishes several):
	// the header is built in one sized map over one backing array of
	// values rather than grown key by key, and both are reused when the
	// caller keeps them (hb).
	if hb == nil {
		hb = &Header{}
	}
	hb.vals = [maxHeaders]string{
		ev.EventId,
		"airlock.v1." + typ,
		source,
		ev.Time.AsTime().UTC().Format(time.RFC3339Nano),
		"1.0",
		ChildTrace(parentTrace),
		"", "", "", "", // the content type, then the message id or a compare-and-append's two expectations
	}
	keys := [maxHeaders]string{HeaderCEID, HeaderCEType, HeaderCESource, HeaderCETime, HeaderCESpec, HeaderTraceparent}
	n := 6
	if contentType != ContentProtobuf {
		keys[n], hb.vals[n] = HeaderContentType, contentType
		n++
	}
	if withMsgID {
		keys[n], hb.vals[n] = HeaderMsgID, ev.EventId
		n++
	}
	if after != nil && !after.inBatch {
		keys[n], hb.vals[n] = HeaderExpectedLastSubjSeq, strconv.FormatUint(after.seq, 10)
		keys[n+1], hb.vals[n+1] = HeaderExpectedLastSubjSeqSubject, after.subject
		n += 2
	}
	if hb.m == nil {
		hb.m = make(map[string][]string, n)
	} else {
		clear(hb.m)
	}
	backing := hb.vals[:]
	for i, k := range keys[:n] {
		hb.m[k] = backing[i : i+1 : i+1]
	}
	return Message{Subject: subj, Data: data, Header: hb.m, Type: typ}, nil
}

// JSONRead is how airlock reads protojson that others wrote (requests,
// API bodies, stored rules): either field naming, and fields it does not
// know ignored, so a newer writer does not break an older reader.
var JSONRead = protojson.UnmarshalOptions{DiscardUnknown: true}

// marshal encodes ev as protobuf, or as protojson when ev.Json is set.
func marshal(ev *airlockv1.Event) (string, []byte, error) {
	if ev.GetJson() {
		data, err := pbjson.Marshal(ev)
		return ContentJSON, data, err
	}
	data, err := proto.Marshal(ev)
	return ContentProtobuf, data, err
}

// Decode parses an event from a message body and its headers.
func Decode(data []byte, hdr map[string][]string) (*airlockv1.Event, error) {
	ev := &airlockv1.Event{}
	if IsJSON(hdr) {
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
func IsJSON(hdr map[string][]string) bool {
	ct := HeaderValue(hdr, HeaderContentType)
	if ct == "" || ct == ContentProtobuf {
		return false // what airlock writes (nothing, on protobuf): no need to normalise it (the audit sink asks for every event)
	}
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), ContentJSON)
}

// ForCall starts an event by actor about call: its agent, id, revision (1
// when unset), thread and encoding (JSON when the agent asked for it), so
// every event of a call lands on the call's subject, in its thread and in
// the encoding its agent reads. The caller sets the event id and body.
func ForCall(call *airlockv1.ToolCall, actor *airlockv1.Actor) *airlockv1.Event {
	return &airlockv1.Event{
		AgentId: call.GetAgentId(), CallId: call.GetCallId(), Revision: max(call.GetRevision(), 1),
		ThreadId: call.GetThreadId(), Json: call.GetJsonEvents(), Actor: actor,
	}
}

// ChildTrace returns a traceparent in the trace of parent with a new span
// id and parent's trace flags, or a new trace with no flag set when parent
// is not a valid traceparent.
//
// airlock records no spans itself, so it never sets the sampled flag (W3C
// Trace Context: a participant that does not record passes on the flags it
// received). A sampled traceparent also makes the NATS server parse every
// header of the message for its own message tracing, which on each of a
// call's publishes was the largest allocation in the whole round trip.
func ChildTrace(parent string) string {
	// 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>
	var b [55]byte
	copy(b[:], "00-")
	flags := "00"
	if len(parent) >= 53 && parent[:3] == "00-" && parent[35] == '-' && parent[52] == '-' && !strings.Contains(parent[53:], "-") &&
		isHex(parent[3:35]) && strings.Trim(parent[3:35], "0") != "" && !strings.Contains(parent[36:52], "-") {
		copy(b[3:35], parent[3:35])
		if len(parent) == 55 && isHex(parent[53:55]) {
			flags = parent[53:55]
		}
	} else {
		putRandomHex(b[3:35])
	}
	b[35] = '-'
	putRandomHex(b[36:52])
	b[52] = '-'
	copy(b[53:], flags)
	return string(b[:])
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return len(s)%2 == 0
}

// putRandomHex fills dst with random lowercase hex digits. Trace, span and
// generated event ids must be unique, not secret: they come from the
// runtime's per-thread ChaCha8 generator (seeded from the OS), which needs
// no system call and no lock on the publish path.
func putRandomHex(dst []byte) {
	const digits = "0123456789abcdef"
	for i := 0; i < len(dst); i += 16 {
		r := rand.Uint64()
		for j := i; j < len(dst) && j < i+16; j++ {
			dst[j] = digits[r&0xf]
			r >>= 4
		}
	}
}

func randomID() string {
	var b [4 + 24]byte // 96 random bits, as ids.New
	copy(b[:], "evt_")
	putRandomHex(b[4:])
	return string(b[:])
}
