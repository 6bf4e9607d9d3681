// Package record is the audit trail's domain: how one stream message becomes
// one audit row (fields, redaction, payload), how rows are hash-chained, how
// a chain is verified, and how rows are filtered and analysed. It knows
// nothing of NATS or ClickHouse, so it is tested on plain values.
//
// A row is a pure function of the stream message (its sequence, stored
// time, subject, headers and body) and the previous row's hash. Two sink
// replicas that write the same sequence therefore write identical rows,
// which is what keeps the chain from forking (see the audit package).
package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

// GenesisHash is the prev_hash of the first row of a chain.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Mask replaces a redacted argument value in the audit copy.
const Mask = "[REDACTED]"

// Withheld replaces every argument value of a `requested` event: the policy
// has not yet said which paths are secret, so the request's arguments are
// stored only in the decision event's copy, masked as that decision says.
// The digest of the full arguments is kept on both rows.
const Withheld = "[WITHHELD]"

// Row is one audit record: one event of the events stream.
type Row struct {
	Seq            uint64    `json:"seq"`
	EventID        string    `json:"event_id"`
	Time           time.Time `json:"time"` // stream store time, UTC, millisecond precision
	Type           string    `json:"type"`
	Agent          string    `json:"agent_id"`
	Thread         string    `json:"thread_id"`
	Call           string    `json:"call_id"`
	Revision       uint32    `json:"revision"`
	Server         string    `json:"server"`
	Tool           string    `json:"tool"`
	ActorType      string    `json:"actor_type"`
	ActorID        string    `json:"actor_id"`
	ActorChannel   string    `json:"actor_channel"`
	Decision       string    `json:"decision"`
	Reason         string    `json:"reason"`
	Risk           string    `json:"risk"`
	RuleID         string    `json:"rule_id"`
	PolicyRevision string    `json:"policy_revision"`
	DecisionID     string    `json:"decision_id"`
	ArgsDigest     string    `json:"args_digest"`
	Payload        string    `json:"payload"` // canonical JSON of the redacted event: its time and body (the rest is in columns)
	LatencyMS      *float64  `json:"latency_ms,omitempty"`
	PrevHash       string    `json:"prev_hash"`
	Hash           string    `json:"hash"`
}

// Msg is what Build needs of a stream message.
type Msg struct {
	Seq     uint64
	Time    time.Time // the stream's store time
	Subject string
	Header  nats.Header
	Data    []byte
}

// Build turns a stream message into a row without its hash fields. It never
// fails: a message that does not decode still becomes a row (type from the
// subject, reason saying why, an escaped excerpt as payload), so the chain
// has no holes and the bad message is on record.
func Build(m Msg) Row {
	r := Row{Seq: m.Seq, Time: m.Time.UTC().Truncate(time.Millisecond)}
	if tok := strings.Split(m.Subject, "."); len(tok) == 5 {
		r.Agent, r.Call, r.Type = tok[2], tok[3], tok[4]
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		r.EventID = m.Header.Get(envelope.HeaderCEID)
		r.Decision = "undecodable"
		r.Reason = "undecodable event: " + err.Error()
		r.Payload = undecodablePayload(m.Data)
		return r
	}
	r.EventID = ev.GetEventId()
	if ev.GetAgentId() != "" {
		r.Agent = ev.GetAgentId()
	}
	if ev.GetCallId() != "" {
		r.Call = ev.GetCallId()
	}
	if t := envelope.TypeOf(ev); t != "" {
		r.Type = t
	}
	r.Revision = ev.GetRevision()
	r.Thread = ev.GetThreadId()
	if a := ev.GetActor(); a != nil {
		r.ActorType = strings.ToLower(strings.TrimPrefix(a.GetType().String(), "ACTOR_TYPE_"))
		if a.GetType() == airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED {
			r.ActorType = ""
		}
		r.ActorID, r.ActorChannel = a.GetId(), a.GetChannel()
	}
	fill(&r, ev)
	redact(ev)
	// The envelope fields have their own columns (covered by the hash);
	// the payload keeps the event's own time and its body.
	ev.EventId, ev.AgentId, ev.CallId, ev.Revision, ev.ThreadId, ev.Actor = "", "", "", 0, "", nil
	r.Payload = canonicalJSON(ev)
	return r
}

// fill sets the columns that depend on the event type, from the unredacted event.
func fill(r *Row, ev *airlockv1.Event) {
	call := func(c *airlockv1.ToolCall) {
		if c == nil {
			return
		}
		r.Server, r.Tool = c.GetServer(), c.GetTool()
		if r.Thread == "" {
			r.Thread = c.GetThreadId()
		}
		if r.Revision == 0 {
			r.Revision = c.GetRevision()
		}
		if r.ArgsDigest == "" {
			if d, err := canon.Digest(c.GetArguments()); err == nil {
				r.ArgsDigest = d
			}
		}
	}
	decision := func(d *airlockv1.Decision, verdict string) {
		if d == nil {
			return
		}
		r.Decision = verdict
		r.Reason = d.GetReason()
		if d.GetRisk() != airlockv1.Risk_RISK_UNSPECIFIED {
			r.Risk = strings.ToLower(strings.TrimPrefix(d.GetRisk().String(), "RISK_"))
		}
		r.RuleID, r.PolicyRevision, r.DecisionID = d.GetRuleId(), d.GetPolicyRevision(), d.GetDecisionId()
		if d.GetArgumentsDigest() != "" {
			r.ArgsDigest = d.GetArgumentsDigest()
		}
	}
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Requested:
		call(b.Requested.GetCall())
	case *airlockv1.Event_Allowed:
		decision(b.Allowed.GetDecision(), "allow")
		call(b.Allowed.GetCall())
	case *airlockv1.Event_Denied:
		decision(b.Denied.GetDecision(), "deny")
		call(b.Denied.GetCall())
	case *airlockv1.Event_ApprovalRequested:
		decision(b.ApprovalRequested.GetDecision(), "ask")
		call(b.ApprovalRequested.GetCall())
	case *airlockv1.Event_Approved:
		reason := ""
		if v := b.Approved.GetVotes(); len(v) > 0 {
			reason = v[len(v)-1].GetComment()
		}
		decision(b.Approved.GetDecision(), "approve")
		r.Decision, r.Reason = "approve", reason
		if b.Approved.GetArgumentsDigest() != "" {
			r.ArgsDigest = b.Approved.GetArgumentsDigest()
		}
		if b.Approved.GetPolicyRevision() != "" {
			r.PolicyRevision = b.Approved.GetPolicyRevision()
		}
		call(b.Approved.GetCall())
	case *airlockv1.Event_Rejected:
		r.Decision, r.Reason = "reject", b.Rejected.GetReason()
	case *airlockv1.Event_ChangesRequested:
		r.Decision, r.Reason = "request_changes", b.ChangesRequested.GetFeedback()
	case *airlockv1.Event_Expired:
		r.Decision = "expire"
	case *airlockv1.Event_Canceled:
		r.Decision, r.Reason = "cancel", b.Canceled.GetReason()
	case *airlockv1.Event_Completed:
		r.Reason = calls.AgentRan(b.Completed.GetAgentRan(), b.Completed.GetArgumentsDiffer())
		if l := b.Completed.GetLatency(); l != nil {
			ms := float64(l.AsDuration().Microseconds()) / 1000
			r.LatencyMS = &ms
		}
	case *airlockv1.Event_Failed:
		r.Reason = strings.TrimSpace(b.Failed.GetReason() + ": " + b.Failed.GetMessage())
		r.Reason = strings.TrimSuffix(r.Reason, ":")
		if ran := calls.AgentRan(b.Failed.GetAgentRan(), b.Failed.GetArgumentsDiffer()); ran != "" {
			r.Reason = ran + "; " + r.Reason
		}
		if l := b.Failed.GetLatency(); l != nil {
			ms := float64(l.AsDuration().Microseconds()) / 1000
			r.LatencyMS = &ms
		}
	case *airlockv1.Event_UnauthorizedAttempt:
		// Not a decision: the refused attempt's action goes in the reason, so
		// filtering decision=approve never shows attempts that changed nothing.
		r.Reason = strings.TrimSpace(b.UnauthorizedAttempt.GetAction() + " refused: " + b.UnauthorizedAttempt.GetWhy())
	case *airlockv1.Event_PolicyChanged:
		r.Reason, r.PolicyRevision = b.PolicyChanged.GetChange(), b.PolicyChanged.GetPolicyRevision()
	case *airlockv1.Event_Invalid:
		r.Reason = b.Invalid.GetReason()
	}
}

// redact masks, in place, the argument paths the event's decision names;
// a `requested` event has every argument value withheld.
func redact(ev *airlockv1.Event) {
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Requested:
		if c := b.Requested.GetCall(); c != nil && c.Arguments != nil {
			withholdStruct(c.Arguments)
		}
	case *airlockv1.Event_Allowed:
		RedactArgs(b.Allowed.GetCall().GetArguments(), b.Allowed.GetDecision().GetRedact())
	case *airlockv1.Event_Denied:
		RedactArgs(b.Denied.GetCall().GetArguments(), b.Denied.GetDecision().GetRedact())
	case *airlockv1.Event_ApprovalRequested:
		RedactArgs(b.ApprovalRequested.GetCall().GetArguments(), b.ApprovalRequested.GetDecision().GetRedact())
	case *airlockv1.Event_Approved:
		paths := b.Approved.GetDecision().GetRedact()
		RedactArgs(b.Approved.GetCall().GetArguments(), paths)
		RedactArgs(b.Approved.GetOriginalArguments(), paths)
	}
}

// RedactArgs replaces the value at each JSON pointer (RFC 6901) in args
// with Mask. Paths that do not exist are ignored; "" masks every value.
func RedactArgs(args *structpb.Struct, paths []string) {
	if args == nil {
		return
	}
	for _, p := range paths {
		if p == "" || p == "/" && len(args.Fields) == 0 {
			for k := range args.Fields {
				args.Fields[k] = structpb.NewStringValue(Mask)
			}
			continue
		}
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // tolerate "password" for "/password"
		}
		toks := strings.Split(p[1:], "/")
		for i, t := range toks {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
		maskAt(structpb.NewStructValue(args), toks)
	}
}

func maskAt(v *structpb.Value, toks []string) {
	if len(toks) == 0 {
		return
	}
	last := len(toks) == 1
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		child, ok := k.StructValue.GetFields()[toks[0]]
		if !ok {
			return
		}
		if last {
			k.StructValue.Fields[toks[0]] = structpb.NewStringValue(Mask)
			return
		}
		maskAt(child, toks[1:])
	case *structpb.Value_ListValue:
		i, err := strconv.Atoi(toks[0])
		if err != nil || i < 0 || i >= len(k.ListValue.GetValues()) {
			return
		}
		if last {
			k.ListValue.Values[i] = structpb.NewStringValue(Mask)
			return
		}
		maskAt(k.ListValue.Values[i], toks[1:])
	}
}

func withholdStruct(s *structpb.Struct) {
	for k, v := range s.Fields {
		s.Fields[k] = withhold(v)
	}
}

func withhold(v *structpb.Value) *structpb.Value {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		withholdStruct(k.StructValue)
		return v
	case *structpb.Value_ListValue:
		for i, e := range k.ListValue.Values {
			k.ListValue.Values[i] = withhold(e)
		}
		return v
	default:
		return structpb.NewStringValue(Withheld)
	}
}

// canonicalJSON renders ev as compact, deterministic JSON in the
// protojson mapping (see appendJSON).
func canonicalJSON(ev *airlockv1.Event) string {
	return string(appendJSON(make([]byte, 0, 512), ev.ProtoReflect()))
}

// Canonicalize re-encodes JSON text with sorted keys and no whitespace,
// keeping numbers exactly as written. Invalid JSON is returned unchanged.
func Canonicalize(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func undecodablePayload(data []byte) string {
	const max = 512
	if len(data) > max {
		data = data[:max]
	}
	excerpt := string(data)
	if !utf8.ValidString(excerpt) {
		excerpt = "base16:" + hex.EncodeToString(data)
	}
	b, _ := json.Marshal(map[string]string{"undecodable_excerpt": excerpt})
	return string(b)
}

// Seal sets r.PrevHash to prev and r.Hash to the row's hash.
func Seal(r *Row, prev string) {
	r.PrevHash = prev
	r.Hash = Hash(*r)
}

// Hash is hex SHA-256 of prev_hash followed by the row's canonical fields
// (CanonicalFields); it ignores r.Hash itself.
func Hash(r Row) string {
	h := sha256.New()
	h.Write([]byte(r.PrevHash))
	h.Write(CanonicalFields(r))
	return hex.EncodeToString(h.Sum(nil))
}

// CanonicalFields is the byte form of a row that the hash covers: every
// column except the two hashes, in a fixed order, each written as
// "<byte length>:<value>," so no value can be confused with a separator.
// Time is Unix seconds and the millisecond part separately (as stored),
// latency is "" when unknown.
func CanonicalFields(r Row) []byte {
	lat := ""
	if r.LatencyMS != nil {
		lat = strconv.FormatFloat(*r.LatencyMS, 'f', -1, 64)
	}
	fields := []string{
		strconv.FormatUint(r.Seq, 10), r.EventID,
		strconv.FormatInt(r.Time.Unix(), 10), strconv.Itoa(r.Time.Nanosecond() / 1e6),
		r.Type, r.Agent, r.Thread, r.Call, strconv.FormatUint(uint64(r.Revision), 10),
		r.Server, r.Tool, r.ActorType, r.ActorID, r.ActorChannel,
		r.Decision, r.Reason, r.Risk, r.RuleID, r.PolicyRevision, r.DecisionID,
		r.ArgsDigest, r.Payload, lat,
	}
	var b []byte
	for _, f := range fields {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
		b = append(b, ',')
	}
	return b
}

// Chain seals rows in order, starting from prev (GenesisHash for the first
// row ever), and returns the last hash.
func Chain(rows []Row, prev string) string {
	for i := range rows {
		Seal(&rows[i], prev)
		prev = rows[i].Hash
	}
	return prev
}

// Break describes the first place a chain does not hold.
type Break struct {
	Seq     uint64 `json:"seq"`
	EventID string `json:"event_id"`
	// Problem says what is wrong: the row's hash does not match its
	// contents (it was altered), or its prev_hash does not match the row
	// before it (a row was removed or inserted).
	Problem string `json:"problem"`
}

// Verifier checks rows fed to it in stream order, one at a time, so a
// whole table can be verified without holding it in memory.
type Verifier struct {
	Count uint64
	First *Break
	prev  string
	last  uint64
	start bool
}

// Add checks one row; after the first break it only counts.
func (v *Verifier) Add(r Row) {
	v.Count++
	if v.First != nil {
		return
	}
	if got := Hash(r); got != r.Hash {
		v.First = &Break{Seq: r.Seq, EventID: r.EventID, Problem: fmt.Sprintf("row seq %d (event %s) was altered: its stored hash %s does not match its contents (recomputed %s)", r.Seq, r.EventID, short(r.Hash), short(got))}
		return
	}
	// The oldest row anchors the chain: retention may have removed its predecessors.
	if v.start && r.PrevHash != v.prev {
		v.First = &Break{Seq: r.Seq, EventID: r.EventID, Problem: fmt.Sprintf("row seq %d (event %s) does not follow row seq %d: its prev_hash %s is not that row's hash %s (a row was removed, inserted or reordered)", r.Seq, r.EventID, v.last, short(r.PrevHash), short(v.prev))}
		return
	}
	v.start, v.prev, v.last = true, r.Hash, r.Seq
}

// Head is the last hash verified.
func (v *Verifier) Head() string { return v.prev }

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}
