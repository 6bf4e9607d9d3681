// Package ingress decides whether a request an agent published may enter
// airlock. Anything it refuses becomes an `invalid` event with a reason a
// person can act on, and goes no further.
package ingress

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Limits on the free-text and name fields of a call.
const (
	MaxNameLen   = 128
	MaxReasonLen = 4096
	MaxThreadLen = 128
)

var (
	namePattern   = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
	threadPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// nonFinite finds a NaN or infinite number in v and returns its JSON pointer.
func nonFinite(s *structpb.Struct, at string) (string, bool) {
	for k, v := range s.GetFields() {
		if p, ok := nonFiniteValue(v, at+"/"+k); ok {
			return p, true
		}
	}
	return "", false
}

func nonFiniteValue(v *structpb.Value, at string) (string, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return at, true
		}
	case *structpb.Value_StructValue:
		return nonFinite(k.StructValue, at)
	case *structpb.Value_ListValue:
		for i, e := range k.ListValue.GetValues() {
			if p, ok := nonFiniteValue(e, fmt.Sprintf("%s/%d", at, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// Refusal is why a request was refused; Reason is the sentence recorded in
// the `invalid` event and returned to the agent.
type Refusal struct {
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// Request checks one message an agent published on airlock.req.<agent>.<call>.
// It returns the normalized call (server and tool split from "server__tool",
// revision defaulted, ids filled from the subject, the fields only airlock
// may set cleared) or a Refusal. A report is refused here; Intake takes both.
func Request(subj string, data []byte, header nats.Header, maxBytes int) (*airlockv1.ToolCall, *Refusal) {
	call, rep, r := Intake(subj, data, header, maxBytes)
	if r == nil && rep != nil {
		return nil, refuse("request body must be \"requested\", got \"reported\"")
	}
	return call, r
}

// Report is an agent's report of how a gate-only call it ran ended, as it
// came out of the intake stream: which call revision (the agent is the
// subject's, so an agent can only report on its own calls) and what the
// agent says. Whether that revision may be reported on is the policy
// service's to check against the call's recorded events.
type Report struct {
	Ref  callref.Ref
	Body *airlockv1.Reported
}

// MaxReportResultBytes bounds the result an agent reports; a longer one is
// refused (the SDK truncates before sending).
const MaxReportResultBytes = 64 << 10

// Intake checks one message an agent published on airlock.req.<agent>.<call>
// and returns either the call it asks for (body "requested", see Request) or
// the report it makes (body "reported"), or a Refusal.
func Intake(subj string, data []byte, header nats.Header, maxBytes int) (*airlockv1.ToolCall, *Report, *Refusal) {
	if len(data) > maxBytes {
		return nil, nil, refuse("request is %d bytes, over the %d-byte limit: pass large inputs by reference (a path or URL) instead of inline", len(data), maxBytes)
	}
	agent, callID, ok := subject.RequestTokens(subj)
	if !ok {
		return nil, nil, refuse("bad subject %q: publish on airlock.req.<agent_id>.<call_id>", subj)
	}
	if err := ids.ValidateAgent(agent); err != nil {
		return nil, nil, refuse("%v", err)
	}
	if err := ids.Validate("call id", callID); err != nil {
		return nil, nil, refuse("%v", err)
	}
	p := subject.Parsed{Agent: agent, Call: callID}
	if envelope.IsJSON(header) {
		if r := checkJSONShape(data); r != nil {
			return nil, nil, r
		}
	}
	ev, err := envelope.Decode(data, header)
	if err != nil {
		return nil, nil, refuse("request does not decode as an airlock.v1.Event (protobuf, or protojson with Content-Type: application/json): %v", err)
	}
	for _, c := range []struct{ field, inEvent, fromSubject string }{
		{"agent_id", ev.AgentId, p.Agent},
		{"call_id", ev.CallId, p.Call},
	} {
		if c.inEvent != "" && c.inEvent != c.fromSubject {
			return nil, nil, refuse("%s %q does not match the subject's %q: publish on airlock.req.<agent_id>.<call_id>", c.field, c.inEvent, c.fromSubject)
		}
	}
	if rep := ev.GetReported(); rep != nil {
		r, refusal := report(p, ev, rep)
		return nil, r, refusal
	}
	req := ev.GetRequested()
	if req == nil {
		return nil, nil, refuse("request body must be \"requested\" (or \"reported\" for a gate-only call the agent ran), got %q", envelope.TypeOf(ev))
	}
	call := req.GetCall()
	if call == nil {
		return nil, nil, refuse("request has no call: set requested.call")
	}
	for _, c := range []struct{ field, inCall, fromSubject string }{
		{"agent_id", call.AgentId, p.Agent},
		{"call_id", call.CallId, p.Call},
	} {
		if c.inCall != "" && c.inCall != c.fromSubject {
			return nil, nil, refuse("%s %q does not match the subject's %q: publish on airlock.req.<agent_id>.<call_id>", c.field, c.inCall, c.fromSubject)
		}
	}
	call.AgentId, call.CallId = p.Agent, p.Call
	// Only airlock vouches for these (the policy service sets them).
	call.OnBehalfOfVerified, call.AnnotationsTrusted = false, false
	if call.Revision == 0 {
		call.Revision = 1
	}
	if ev.Revision != 0 && ev.Revision != call.Revision {
		return nil, nil, refuse("event revision %d does not match call revision %d", ev.Revision, call.Revision)
	}
	if err := Call(call); err != nil {
		return nil, nil, err
	}
	return call, nil, nil
}

// report checks the shape of a report; the agent and call come from the
// subject, the revision from the event (0 means 1).
func report(p subject.Parsed, ev *airlockv1.Event, rep *airlockv1.Reported) (*Report, *Refusal) {
	if n := len(rep.GetResultJson()); n > MaxReportResultBytes {
		return nil, refuse("reported result is %d bytes: keep it under %d (truncate it and set truncated)", n, MaxReportResultBytes)
	}
	if !utf8.ValidString(rep.GetResultJson()) || !utf8.ValidString(rep.GetError()) {
		return nil, refuse("reported result and error must be UTF-8 text")
	}
	if r := rep.GetResultJson(); r != "" && !json.Valid([]byte(r)) {
		return nil, refuse("reported result_json is not JSON: send the result as a JSON value (a string is fine)")
	}
	if len(rep.GetError()) > MaxReasonLen {
		return nil, refuse("reported error is %d bytes: keep it under %d", len(rep.GetError()), MaxReasonLen)
	}
	if rep.GetArguments() != nil {
		if path, ok := nonFinite(rep.GetArguments(), ""); ok {
			return nil, refuse("reported argument %s is not a finite number (NaN or infinity): JSON cannot carry it", path)
		}
	}
	if d := rep.GetLatency(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
		return nil, refuse("reported latency must be a non-negative duration")
	}
	return &Report{Ref: callref.Ref{Agent: p.Agent, Call: p.Call, Rev: max(ev.GetRevision(), 1)}, Body: rep}, nil
}

// Call validates and normalizes a call's own fields. The SDK runs it before
// publishing, so most mistakes are caught without a round trip.
func Call(call *airlockv1.ToolCall) *Refusal {
	if err := ids.ValidateAgent(call.AgentId); err != nil {
		return refuse("%v", err)
	}
	if err := ids.Validate("call id", call.CallId); err != nil {
		return refuse("%v", err)
	}
	if call.Server == "" {
		if srv, tool, ok := strings.Cut(call.Tool, "__"); ok {
			call.Server, call.Tool = srv, tool
		}
	}
	if call.Tool == "" {
		return refuse("tool is required: name the tool to run, e.g. \"fs__read_file\" or server \"fs\" and tool \"read_file\"")
	}
	if call.Server == "" {
		return refuse("server is required: name it, or use a qualified tool name such as \"fs__read_file\"")
	}
	for _, f := range []struct{ name, v string }{{"server", call.Server}, {"tool", call.Tool}} {
		if len(f.v) > MaxNameLen || !namePattern.MatchString(f.v) {
			return refuse("%s %q must be 1-%d characters from A-Z a-z 0-9 _ . : -", f.name, truncate(f.v, 40), MaxNameLen)
		}
	}
	if strings.Contains(call.Server, "__") {
		return refuse("server %q must not contain \"__\": that separates server from tool", call.Server)
	}
	if call.ThreadId != "" && (len(call.ThreadId) > MaxThreadLen || !threadPattern.MatchString(call.ThreadId)) {
		return refuse("thread_id %q must be 1-%d characters from A-Z a-z 0-9 _ -: map other session ids (a hash, or a safe encoding) before sending", truncate(call.ThreadId, 40), MaxThreadLen)
	}
	if strings.IndexFunc(call.OnBehalfOf, unicode.IsControl) >= 0 || len(call.OnBehalfOf) > MaxNameLen {
		return refuse("on_behalf_of must be at most %d bytes without control characters", MaxNameLen)
	}
	if len(call.Reason) > MaxReasonLen {
		return refuse("reason is %d bytes: keep it under %d", len(call.Reason), MaxReasonLen)
	}
	if call.Arguments == nil {
		call.Arguments = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if path, ok := nonFinite(call.Arguments, ""); ok {
		return refuse("argument %s is not a finite number (NaN or infinity): JSON cannot carry it, send a finite number or a string", path)
	}
	if call.Revision == 0 {
		call.Revision = 1
	}
	return nil
}

// checkJSONShape gives a precise reason for the commonest protojson mistake,
// arguments that are not an object, before the generic decoder error.
func checkJSONShape(data []byte) *Refusal {
	var top struct {
		Requested *struct {
			Call *struct {
				Arguments json.RawMessage `json:"arguments"`
			} `json:"call"`
		} `json:"requested"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return refuse("request is not valid JSON: %v", err)
	}
	if top.Requested == nil || top.Requested.Call == nil || len(top.Requested.Call.Arguments) == 0 {
		return nil
	}
	if a := strings.TrimSpace(string(top.Requested.Call.Arguments)); a != "null" && !strings.HasPrefix(a, "{") {
		return refuse("arguments must be a JSON object such as {\"path\": \"/tmp/x\"}, got %s", truncate(a, 40))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// InvalidEvent builds the `invalid` event for a refused request, on the
// agent's own call subject so the agent sees it (a call token that is not a
// valid id is recorded under the call id "_invalid"). Its id is derived from
// the request's intake sequence, so a redelivered request is refused once.
// The agent token is trusted: NATS permissions let an agent publish only on
// its own.
func InvalidEvent(subj string, intakeSeq uint64, revision uint32, data []byte, r *Refusal) *airlockv1.Event {
	agent, callID, ok := subject.RequestTokens(subj)
	if !ok || ids.ValidateAgent(agent) != nil {
		agent, callID = subject.SystemAgent, subject.InvalidCall
	} else if ids.Validate("call id", callID) != nil {
		callID = subject.InvalidCall
	}
	excerpt := string(data)
	if len(excerpt) > 256 {
		excerpt = excerpt[:256]
	}
	if !utf8.ValidString(excerpt) {
		excerpt = strings.ToValidUTF8(excerpt, "?")
	}
	return &airlockv1.Event{
		EventId:  fmt.Sprintf("intake.%d.invalid", intakeSeq),
		AgentId:  agent,
		CallId:   callID,
		Revision: revision,
		Actor:    &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "ingress"},
		Body:     &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: r.Reason, RawExcerpt: excerpt}},
	}
}
