// Package ingress decides whether a request an agent published may enter
// airlock. Anything it refuses becomes an `invalid` event with a reason a
// person can act on, and goes no further.
package ingress

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
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
	// MaxPathLen bounds the working directory (Linux's PATH_MAX).
	MaxPathLen = 4096
	// MaxScriptText bounds the script text a call records (ToolCall.script),
	// MaxScriptPreview its static preview's entries and their total bytes.
	MaxScriptText    = 16 << 10
	MaxScriptPreview = 50
	MaxPreviewBytes  = 8 << 10
)

// Limits on how deeply a call's arguments (and annotations, and a report's
// arguments) may nest: every object or list counts one level, the
// arguments object itself included, so {"a":{"b":1}} is 2 levels deep.
// Every surface that shows arguments walks them, and indents each level:
// a bound on depth keeps every page, card and CLI output linear in the
// size of what the agent sent.
const (
	// DefaultMaxDepth is limits.max_argument_depth's default.
	DefaultMaxDepth = 32
	// MaxDepthCeiling is the most limits.max_argument_depth may allow;
	// Call (which has no configuration: the SDK and reviewers' edits run
	// it) holds arguments to it.
	MaxDepthCeiling = 128
)

// Limits bound what one request may hold (limits.* of the configuration).
type Limits struct {
	// MaxBytes bounds the request as sent and as airlock stores it.
	MaxBytes int
	// MaxDepth bounds how deeply its arguments nest; 0 means DefaultMaxDepth.
	MaxDepth int
}

// badStruct finds a value JSON cannot carry in s — a NaN or infinite
// number, a value of no kind, text or a member name that is not UTF-8 — or an object or list nested deeper than
// maxDepth levels (s itself is level 1), and returns its JSON pointer and
// what is wrong with it. The walk stops at the first one, so a hostile
// value costs no more than maxDepth levels of recursion.
func badStruct(s *structpb.Struct, at string, maxDepth int) (string, string, bool) {
	return badFields(s, at, 1, maxDepth)
}

func badFields(s *structpb.Struct, at string, depth, maxDepth int) (string, string, bool) {
	if depth > maxDepth {
		return cmp.Or(at, "/"), fmt.Sprintf("nests deeper than %d levels (limits.max_argument_depth): flatten the value, or pass it as a JSON string", maxDepth), true
	}
	for k, v := range s.GetFields() {
		if !utf8.ValidString(k) {
			return cmp.Or(at, "/"), "has a member name that is not UTF-8 text", true
		}
		if p, why, ok := badValue(v, at+"/"+k, depth, maxDepth); ok {
			return p, why, true
		}
	}
	return "", "", false
}

func badValue(v *structpb.Value, at string, depth, maxDepth int) (string, string, bool) {
	switch k := v.GetKind().(type) {
	case nil:
		return at, "has no value (set null explicitly)", true
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return at, "is not a finite number (NaN or infinity): JSON cannot carry it, send a finite number or a string", true
		}
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return at, "is not UTF-8 text: JSON cannot carry it, send text (or base64 for bytes)", true
		}
	case *structpb.Value_StructValue:
		return badFields(k.StructValue, at, depth+1, maxDepth)
	case *structpb.Value_ListValue:
		if depth+1 > maxDepth {
			return at, fmt.Sprintf("nests deeper than %d levels (limits.max_argument_depth): flatten the value, or pass it as a JSON string", maxDepth), true
		}
		for i, e := range k.ListValue.GetValues() {
			if p, why, ok := badValue(e, fmt.Sprintf("%s/%d", at, i), depth+1, maxDepth); ok {
				return p, why, true
			}
		}
	}
	return "", "", false
}

// ValidName reports whether s can be a server or tool name of a call.
// It is [A-Za-z0-9_.:-]{1,MaxNameLen}, checked byte by byte (every call
// checks two names on the hot path; a regular expression cost ten times more).
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '.' && c != ':' && !ids.IsIDByte(c) {
			return false
		}
	}
	return true
}

// Refusal is why a request was refused; Reason is the sentence recorded in
// the `invalid` event and returned to the agent.
type Refusal struct {
	Reason string
	// Call is the call id the refused request named, when it could be read.
	Call string
}

func (r *Refusal) Error() string { return r.Reason }

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// Request checks one message an agent published on airlock.req.<agent>.<call>,
// as the intake stored it (airlock.req.<agent>; the call id is the body's).
// It returns the normalized call (server and tool split from "server__tool",
// revision defaulted, the agent from the subject, the fields only airlock
// may set cleared) or a Refusal, which names the call when its id is known.
// A report is refused here; Intake takes both.
func Request(subj string, data []byte, header nats.Header, lim Limits) (*airlockv1.ToolCall, *Refusal) {
	call, rep, r := Intake(subj, data, header, lim)
	if r == nil && rep != nil {
		return nil, &Refusal{Reason: "request body must be \"requested\", got \"reported\"", Call: rep.Ref.Call}
	}
	return call, r
}

// Report is an agent's report of how a gate-only call it ran ended, as it
// came out of the intake stream: which call revision (the agent is the
// subject's, so an agent can only report on its own calls; the call and
// revision are the body's) and what the agent says. Whether that revision
// may be reported on is the policy service's to check against the call's
// recorded events.
type Report struct {
	Ref  callref.Ref
	Body *airlockv1.Reported
}

// MaxReportResultBytes bounds the result an agent reports; a longer one is
// refused (the SDK truncates before sending).
const MaxReportResultBytes = 64 << 10

// Intake checks one message an agent published on airlock.req.<agent>.<call>,
// as the intake stored it (airlock.req.<agent>), and returns either the call
// it asks for (body "requested", see Request) or the report it makes (body
// "reported", its call id the event's call_id), or a Refusal, which names
// the call when its id is known.
func Intake(subj string, data []byte, header nats.Header, lim Limits) (_ *airlockv1.ToolCall, _ *Report, refusal *Refusal) {
	maxBytes, maxDepth := lim.MaxBytes, cmp.Or(lim.MaxDepth, DefaultMaxDepth)
	var callID string
	defer func() { // the refusal names the call, once its id is known, so the agent sees it
		if refusal != nil && refusal.Call == "" && ids.Validate("call id", callID) == nil {
			refusal.Call = callID
		}
	}()
	agent, callID, ok := subject.RequestTokens(subj)
	if !ok {
		return nil, nil, refuse("bad subject %q: publish on airlock.req.<agent_id>.<call_id>", subj)
	}
	if err := ids.ValidateAgent(agent); err != nil {
		return nil, nil, refuse("%v", err)
	}
	// The stored form names the call in the body alone. A body of allowed
	// size is decoded once, here, for its call id and for what follows.
	// BodyCallID reads what it can of one that does not decode, and
	// checkJSONShape says why a protojson one does not: protojson is the
	// stricter reader (unknown or repeated fields, bad UTF-8), so of a body
	// it decodes both could only say what it says, and reading a JSON
	// request three times was most of its cost here.
	var ev *airlockv1.Event
	var decodeErr error
	isJSON := envelope.IsJSON(header)
	if len(data) <= maxBytes && (callID == "" || isJSON) {
		if ev, decodeErr = envelope.Decode(data, header); decodeErr == nil {
			callID = cmp.Or(callID, ev.GetRequested().GetCall().GetCallId(), ev.GetCallId())
		} else if isJSON {
			ev, decodeErr = nil, nil // decoded again below, after the precise reasons
		}
	}
	if callID == "" && ev == nil {
		callID = BodyCallID(data, header)
	}
	if len(data) > maxBytes {
		return nil, nil, refuse("request is %d bytes, over the %d-byte limit: pass large inputs by reference (a path or URL) instead of inline", len(data), maxBytes)
	}
	if callID != "" {
		if err := ids.Validate("call id", callID); err != nil {
			return nil, nil, refuse("%v", err)
		}
	}
	if isJSON && ev == nil {
		if r := checkJSONShape(data); r != nil {
			return nil, nil, r
		}
	}
	if ev == nil && decodeErr == nil {
		ev, decodeErr = envelope.Decode(data, header)
	}
	if decodeErr != nil {
		return nil, nil, refuse("request does not decode as an airlock.v1.Event (protobuf, or protojson with Content-Type: application/json): %v", decodeErr)
	}
	if rep := ev.GetReported(); rep != nil {
		if callID == "" {
			return nil, nil, refuse("the report names no call: set call_id to the id of the call you report on")
		}
		if r := sameIDs(agent, callID, ev.AgentId, ev.CallId); r != nil {
			return nil, nil, r
		}
		r, refusal := report(callref.Ref{Agent: agent, Call: callID, Rev: max(ev.GetRevision(), 1)}, rep, maxDepth)
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
	if callID == "" {
		return nil, nil, refuse("the request names no call: set requested.call.call_id to the call id you publish on")
	}
	if r := sameIDs(agent, callID, ev.AgentId, ev.CallId, call.AgentId, call.CallId); r != nil {
		return nil, nil, r
	}
	call.AgentId, call.CallId = agent, callID
	// Only airlock vouches for whom a call acts for (the policy service sets
	// it). annotations_trusted and script stay as the sender's claim: the
	// policy service keeps them only on a request a front-end sealed (vouch).
	call.OnBehalfOfVerified = false
	if call.Revision == 0 {
		call.Revision = 1
	}
	if ev.Revision != 0 && ev.Revision != call.Revision {
		return nil, nil, refuse("event revision %d does not match call revision %d", ev.Revision, call.Revision)
	}
	if err := checkCall(call, maxDepth); err != nil {
		return nil, nil, err
	}
	// JSON can be smaller than the protobuf airlock stores ("1," is 2 bytes
	// of JSON, 11 of protobuf): the limit holds for both.
	if n := proto.Size(call); n > maxBytes {
		return nil, nil, refuse("request is %d bytes as airlock stores it, over the %d-byte limit: pass large inputs by reference (a path or URL) instead of inline", n, maxBytes)
	}
	return call, nil, nil
}

// sameIDs refuses a body whose agent and call ids (pairs of agent_id and
// call_id as the body sets them, "" for unset) are not agent and callID.
func sameIDs(agent, callID string, pairs ...string) *Refusal {
	for i := 0; i+1 < len(pairs); i += 2 {
		for _, c := range []struct{ field, v, want string }{{"agent_id", pairs[i], agent}, {"call_id", pairs[i+1], callID}} {
			if c.v != "" && c.v != c.want {
				return refuse("%s %q does not match %q: publish on airlock.req.<agent_id>.<call_id> with the same ids in the body", c.field, c.v, c.want)
			}
		}
	}
	return nil
}

// report checks the shape of a report about ref: the agent comes from the
// subject, the call from the body, the revision from the event (0 means 1).
func report(ref callref.Ref, rep *airlockv1.Reported, maxDepth int) (*Report, *Refusal) {
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
	if path, why, ok := badStruct(rep.GetArguments(), "", maxDepth); ok {
		return nil, refuse("reported argument %s %s", path, why)
	}
	if d := rep.GetLatency(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
		return nil, refuse("reported latency must be a non-negative duration")
	}
	if why := snapshotProblem(rep.GetSnapshot()); why != "" {
		return nil, refuse("reported snapshot %s", why)
	}
	return &Report{Ref: ref, Body: rep}, nil
}

// Bounds of a reported snapshot (agent text: every field is shown).
const (
	MaxSnapshotPaths    = 50
	MaxSnapshotPathLen  = 4096
	MaxSnapshotNoteLen  = MaxReasonLen
	maxSnapshotRefBytes = 4096
)

// snapshotProblem says what is wrong with a reported snapshot, "" when
// nothing (or none was reported).
func snapshotProblem(s *airlockv1.Snapshot) string {
	switch {
	case s == nil:
		return ""
	case s.GetKind() != "git" && s.GetKind() != "copy":
		return "kind must be git or copy"
	case len(s.GetPaths()) > MaxSnapshotPaths:
		return fmt.Sprintf("lists %d paths: list at most %d and count the rest in more", len(s.GetPaths()), MaxSnapshotPaths)
	case len(s.GetNote()) > MaxSnapshotNoteLen:
		return fmt.Sprintf("note is over %d bytes", MaxSnapshotNoteLen)
	case len(s.GetRoot()) > maxSnapshotRefBytes || len(s.GetRef()) > maxSnapshotRefBytes || len(s.GetBefore()) > 64 || len(s.GetAfter()) > 64:
		return "root, ref or commit is too long"
	}
	for _, p := range s.GetPaths() {
		if len(p) > MaxSnapshotPathLen {
			return fmt.Sprintf("path is over %d bytes", MaxSnapshotPathLen)
		}
	}
	return ""
}

// Call validates and normalizes a call's own fields, its arguments nested
// at most MaxDepthCeiling levels (the intake holds them to the configured
// limits.max_argument_depth). The SDK runs it before publishing, so most
// mistakes are caught without a round trip.
func Call(call *airlockv1.ToolCall) *Refusal { return checkCall(call, MaxDepthCeiling) }

func checkCall(call *airlockv1.ToolCall, maxDepth int) *Refusal {
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
		if !ValidName(f.v) {
			return refuse("%s %q must be 1-%d characters from A-Z a-z 0-9 _ . : -", f.name, truncate(f.v, 40), MaxNameLen)
		}
	}
	if strings.Contains(call.Server, "__") {
		return refuse("server %q must not contain \"__\": that separates server from tool", call.Server)
	}
	if call.ThreadId != "" && (len(call.ThreadId) > MaxThreadLen || !ids.OnlyIDBytes(call.ThreadId)) {
		return refuse("thread_id %q must be 1-%d characters from A-Z a-z 0-9 _ -: map other session ids (a hash, or a safe encoding) before sending", truncate(call.ThreadId, 40), MaxThreadLen)
	}
	if strings.IndexFunc(call.OnBehalfOf, unicode.IsControl) >= 0 || len(call.OnBehalfOf) > MaxNameLen {
		return refuse("on_behalf_of must be at most %d bytes without control characters", MaxNameLen)
	}
	if len(call.Reason) > MaxReasonLen {
		return refuse("reason is %d bytes: keep it under %d", len(call.Reason), MaxReasonLen)
	}
	if strings.IndexFunc(call.Cwd, unicode.IsControl) >= 0 || len(call.Cwd) > MaxPathLen {
		return refuse("cwd must be at most %d bytes without control characters", MaxPathLen)
	}
	if r := checkScript(call.Script); r != nil {
		return r
	}
	if call.Arguments == nil {
		call.Arguments = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if path, why, ok := badStruct(call.Arguments, "", maxDepth); ok {
		return refuse("argument %s %s", path, why)
	}
	if path, why, ok := badStruct(call.Annotations, "", maxDepth); ok {
		return refuse("annotation %s %s", path, why)
	}
	if call.CreatedAt != nil {
		if err := call.CreatedAt.CheckValid(); err != nil {
			return refuse("created_at is not a valid time (%v): leave it unset or send an RFC 3339 time", err)
		}
	}
	if call.Revision == 0 {
		call.Revision = 1
	}
	// Every service, front-end and export writes the call as JSON: what
	// protojson would refuse must be refused here, or it would break them
	// for every reviewer. Past the checks above (values of no kind, NaN,
	// created_at out of range) that is text that is not UTF-8. Checked
	// field by field, not by encoding the call as JSON on every request
	// (the SDK's and the policy's largest cost of their own);
	// TestCheckCallRefusesWhatProtojsonRefuses holds the list to the
	// ToolCall message.
	if field := nonUTF8Field(call); field != "" {
		return refuse("%s is not UTF-8 text: JSON cannot carry it, send text", field)
	}
	return nil
}

// nonUTF8Field names the first text field of call (outside its arguments
// and annotations, which badStruct checks) that is not UTF-8, "" when none.
func nonUTF8Field(call *airlockv1.ToolCall) string {
	for _, f := range []struct{ name, v string }{
		{"call_id", call.CallId}, {"agent_id", call.AgentId}, {"thread_id", call.ThreadId}, {"on_behalf_of", call.OnBehalfOf},
		{"server", call.Server}, {"tool", call.Tool}, {"reason", call.Reason}, {"idempotency_key", call.IdempotencyKey}, {"cwd", call.Cwd},
		{"script.digest", call.GetScript().GetDigest()}, {"script.run_id", call.GetScript().GetRunId()}, {"script.text", call.GetScript().GetText()},
	} {
		if !utf8.ValidString(f.v) {
			return f.name
		}
	}
	for _, p := range call.GetScript().GetPreview() {
		if !utf8.ValidString(p) {
			return "script.preview"
		}
	}
	return ""
}

// BodyCallID reads the call id an intake message's body names (a request's
// requested.call.call_id, else the event's call_id, as a report names it),
// as leniently as it can (unknown fields skipped, the rest of the body
// unchecked): it only says which call a message is about, so that even a
// refusal reaches the agent on that call's subject, and a front-end can find
// a request still waiting in the intake. "" when the body names none or
// cannot be read.
func BodyCallID(data []byte, header nats.Header) string {
	callID, _ := BodyCall(data, header)
	return callID
}

// BodyCall is BodyCallID with the revision the body names (the call's,
// else the event's; 1 when it names none, as a request's revision 0 is
// recorded), as leniently: the over-budget notice names both, so that a
// wait on another revision of the call is not ended by it.
func BodyCall(data []byte, header nats.Header) (callID string, revision uint32) {
	if envelope.IsJSON(header) {
		type named struct {
			CallID    string `json:"callId"`
			CallIDAlt string `json:"call_id"`
			Revision  uint32 `json:"revision"`
		}
		var body struct {
			named
			Requested struct {
				Call named `json:"call"`
			} `json:"requested"`
		}
		_ = json.Unmarshal(data, &body) // partial results are what we want
		c := body.Requested.Call
		return cmp.Or(c.CallID, c.CallIDAlt, body.CallID, body.CallIDAlt), max(cmp.Or(c.Revision, body.Revision), 1)
	}
	var ev airlockv1.Event
	_ = proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, &ev)
	call := ev.GetRequested().GetCall()
	return cmp.Or(call.GetCallId(), ev.GetCallId()), max(cmp.Or(call.GetRevision(), ev.GetRevision()), 1)
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
// agent's own call subject so the agent sees it: the call the subject names,
// else the one the refusal names (r.Call, from the body), else — no valid
// call id anywhere — the call id "_invalid". Its id is derived from
// the request's intake sequence, so a redelivered request is refused once.
// The agent token is trusted: NATS permissions let an agent publish only on
// its own.
func InvalidEvent(subj string, intakeSeq uint64, revision uint32, data []byte, r *Refusal) *airlockv1.Event {
	agent, callID, ok := subject.RequestTokens(subj)
	if callID == "" {
		callID = r.Call
	}
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
		EventId:  callref.System{Kind: callref.SystemIntake, ID: strconv.FormatUint(intakeSeq, 10)}.EventID(subject.Invalid),
		AgentId:  agent,
		CallId:   callID,
		Revision: revision,
		Actor:    &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "ingress"},
		Body:     &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: r.Reason, RawExcerpt: excerpt}},
	}
}

// checkScript bounds the run_code script a call names (nil: none).
func checkScript(s *airlockv1.Script) *Refusal {
	if s == nil {
		return nil
	}
	if !scriptDigest.MatchString(s.Digest) {
		return refuse("script.digest must be \"sha256:\" and 64 lowercase hex digits")
	}
	if err := ids.Validate("script run id", s.RunId); err != nil {
		return refuse("%v", err)
	}
	if s.Index == 0 {
		return refuse("script.index counts the script's calls from 1")
	}
	if len(s.Text) > MaxScriptText || !utf8.ValidString(s.Text) {
		return refuse("script.text must be valid UTF-8 of at most %d bytes: cut it (script.size keeps its whole length)", MaxScriptText)
	}
	total := 0
	for _, p := range s.Preview {
		total += len(p)
	}
	if len(s.Preview) > MaxScriptPreview || total > MaxPreviewBytes {
		return refuse("script.preview must have at most %d entries of %d bytes in all", MaxScriptPreview, MaxPreviewBytes)
	}
	return nil
}

var scriptDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
