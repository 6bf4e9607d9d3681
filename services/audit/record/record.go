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
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// GenesisHash is the prev_hash of the first row of a chain.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// ShadowArrow joins the live and the candidate's action in the decision of
// a shadow_divergence row: "allow→ask".
const ShadowArrow = "→"

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
	// DecidedBy says what decided, for every event that decides or refuses
	// something: "human:<id>", "rule:<rule id>", "grant:<grant id>",
	// "timeout", "agent:<id>" (an agent canceling its own call) or
	// "service:<name>"; empty for events that decide nothing.
	DecidedBy string `json:"decided_by"`
	// GrantID names the standing grant an event is about or used.
	GrantID  string `json:"grant_id"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// Msg is what Build needs of a stream message.
type Msg struct {
	Seq     uint64
	Time    time.Time // the stream's store time
	Subject string
	Header  map[string][]string // a nats.Header
	Data    []byte
}

// Build turns a stream message into a row without its hash fields. It never
// fails: a message that does not decode still becomes a row (type from the
// subject, reason saying why, an escaped excerpt as payload), so the chain
// has no holes and the bad message is on record.
func Build(m Msg) Row {
	var r Row
	build(&r, m, nil)
	return r
}

// build builds m's row into *r, which is a zero Row.
func build(r *Row, m Msg, a *Arena) {
	r.Seq, r.Time = m.Seq, m.Time.UTC().Truncate(time.Millisecond)
	// The events every call produces are read straight from the wire
	// (buildWire); the rest, and any bytes it does not handle, are decoded.
	if !envelope.IsJSON(m.Header) && buildWire(r, m.Subject, m.Data, a) {
		return
	}
	*r = Row{Seq: r.Seq, Time: r.Time} // a failed attempt leaves it half-filled
	if agent, call, typ, ok := subject.Tokens(m.Subject); ok {
		r.Agent, r.Call, r.Type = agent, call, typ
	}
	*r = buildGeneric(*r, m)
}

// Arena keeps what a batch of rows writes (payloads, joined columns) in a
// few large buffers that are used again for the next batch, instead of one
// allocation per row, and lets the other columns be views of the messages
// they were read from: the sink's rows live only until their batch is
// inserted, and what it allocates or copies per event is what its CPU
// goes on. One Arena serves one goroutine.
type Arena struct {
	chunks [][]byte
	cur    int
	// argModes already worked out, by what they are worked out from (see
	// modes): a batch's decisions redact the same few paths.
	argModes map[string]*argModes
	key      []byte
	// Scratch of one build: the last timestamp, the call's fields as the
	// payload's transcoder read them.
	seconds    pbjson.SecondsCache
	call       callFields
	transcoder transcoder
	// floats holds the rows' latencies, many to an allocation instead of
	// one each; a full chunk is left to the rows that use it.
	floats []float64
}

// floatChunk is how many latencies share one allocation.
const floatChunk = 512

// float returns a pointer to v, kept in a when a is not nil.
func (a *Arena) float(v float64) *float64 {
	if a == nil {
		p := new(float64) // not &v: v would move to the heap on every call
		*p = v
		return p
	}
	if len(a.floats) == cap(a.floats) {
		a.floats = make([]float64, 0, floatChunk)
	}
	a.floats = append(a.floats, v)
	return &a.floats[len(a.floats)-1]
}

// join returns the concatenation of parts, written into a when a is not nil.
func (a *Arena) join(parts ...string) string {
	if a == nil {
		return strings.Join(parts, "")
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return ""
	}
	c := a.reserve(n)
	start := len(c)
	for _, p := range parts {
		c = append(c, p...)
	}
	a.chunks[a.cur] = c
	return unsafe.String(&c[start], n)
}

// modes returns withheldModes(body) when withhold, else maskModes(body,
// redact, original), each worked out once per arena (a nil a works them
// out every time). The strings of redact may be views of a message.
func (a *Arena) modes(body protowire.Number, redact []string, withhold, original bool) *argModes {
	if a == nil {
		if withhold {
			return withheldModes(body)
		}
		return maskModes(body, redact, original)
	}
	// The key says everything the modes depend on, each string with its
	// length, so two different inputs never share a key.
	k := protowire.AppendVarint(a.key[:0], uint64(body))
	k = append(k, boolByte(withhold), boolByte(original))
	for _, p := range redact {
		k = protowire.AppendString(k, p)
	}
	a.key = k
	if m, ok := a.argModes[string(k)]; ok {
		return m
	}
	var m *argModes
	if withhold {
		m = withheldModes(body)
	} else {
		owned := make([]string, len(redact)) // kept past this message
		for i, p := range redact {
			owned[i] = strings.Clone(p)
		}
		m = maskModes(body, owned, original)
	}
	if len(a.argModes) >= 256 { // a flood of distinct redact lists: start over
		clear(a.argModes)
	}
	if a.argModes == nil {
		a.argModes = map[string]*argModes{}
	}
	a.argModes[string(k)] = m
	return m
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

const arenaChunk = 1 << 20

// Build is Build for a batch: the row's payload and joined columns are
// written into a, its other strings may be views of m's subject and data,
// so m.Data must stay unchanged until a.Reset (the stream client gives each
// message bytes of its own). A row's PrevHash and Hash (set by a Sealer)
// are not in the arena.
func (a *Arena) Build(m Msg) Row {
	var r Row
	build(&r, m, a)
	return r
}

// BuildInto is Build into *r, which must be a zero Row: the sink builds
// each row in its batch's slice instead of copying it there.
func (a *Arena) BuildInto(r *Row, m Msg) { build(r, m, a) }

// Reset makes a's buffers free for new rows: every row built since the last
// Reset must no longer be used. It keeps arenaKeep bytes of them at most: a
// batch of unusually large events (an agent's arguments reach the payload,
// escaped) does not hold its memory for the life of the process.
func (a *Arena) Reset() {
	kept, total := a.chunks[:0], 0
	for _, c := range a.chunks {
		if total+cap(c) <= arenaKeep {
			kept = append(kept, c[:0])
			total += cap(c)
		}
	}
	clear(a.chunks[len(kept):])
	a.chunks, a.cur = kept, 0
	a.floats = a.floats[:0]
}

// arenaKeep bounds what an Arena keeps between batches: a batch of the
// sink's size (10,000 events of a few KiB) fits.
const arenaKeep = 64 << 20

// string copies b into the arena and returns it as a string.
func (a *Arena) string(b []byte) string {
	c := a.reserve(len(b))
	start := len(c)
	c = append(c, b...)
	a.chunks[a.cur] = c
	return unsafe.String(&c[start], len(b))
}

// reserve moves to a chunk with n bytes free and returns it; what is
// appended to it within those n bytes is kept by storing it back in
// a.chunks[a.cur].
func (a *Arena) reserve(n int) []byte {
	for ; a.cur < len(a.chunks); a.cur++ {
		if c := a.chunks[a.cur]; cap(c)-len(c) >= n {
			return c
		}
	}
	a.chunks = append(a.chunks, make([]byte, 0, max(arenaChunk, n)))
	return a.chunks[a.cur]
}

// payloadRoom is the room the wire path leaves for a payload written
// straight into an arena chunk; a longer one is copied there afterwards.
const payloadRoom = 4096

// buildGeneric decodes the event and fills r from it: every type, both encodings.
func buildGeneric(r Row, m Msg) Row {
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		r.EventID = envelope.HeaderValue(m.Header, envelope.HeaderCEID)
		r.Decision = "undecodable"
		r.Reason = undecodableReason(m.Header)
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
		r.ActorType = calls.ActorTypeName(a)
		if a.GetType() == airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED {
			r.ActorType = ""
		}
		r.ActorID, r.ActorChannel = a.GetId(), a.GetChannel()
	}
	fill(&r, ev)
	// The envelope fields have their own columns (covered by the hash);
	// the payload keeps the event's own time and its body, redacted. The
	// wire path renders it from the bytes; anything it does not handle
	// (protojson, another encoder's field order) takes the generic path,
	// which gives the same JSON.
	if !envelope.IsJSON(m.Header) {
		if p, ok := wirePayload(make([]byte, 0, len(m.Data)+len(m.Data)/2+64), m.Data, argModesOf(ev)); ok {
			r.Payload = string(p)
			return r
		}
	}
	redact(ev)
	ev.EventId, ev.AgentId, ev.CallId, ev.Revision, ev.ThreadId, ev.Actor = "", "", "", 0, "", nil
	r.Payload = canonicalJSON(ev)
	return r
}

// Field numbers of the arguments in the event bodies that carry them.
const (
	fieldCall              = 1 // <body>.call
	fieldArguments         = 7 // ToolCall.arguments
	fieldOriginalArguments = 5 // Approved.original_arguments
)

// argModes says how the wire path renders each place arguments sit in ev:
// withheld in a request, masked as the decision says elsewhere.
func argModesOf(ev *airlockv1.Event) *argModes {
	body := ev.ProtoReflect().WhichOneof(eventDesc.Oneofs().ByName("body"))
	if body == nil {
		return nil
	}
	n := body.Number()
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Requested:
		return withheldModes(n)
	case *airlockv1.Event_Allowed:
		return maskModes(n, b.Allowed.GetDecision().GetRedact(), false)
	case *airlockv1.Event_Denied:
		return maskModes(n, b.Denied.GetDecision().GetRedact(), false)
	case *airlockv1.Event_ApprovalRequested:
		return maskModes(n, b.ApprovalRequested.GetDecision().GetRedact(), false)
	case *airlockv1.Event_Approved:
		return maskModes(n, b.Approved.GetDecision().GetRedact(), true)
	}
	return nil
}

// withheldModes: a request's arguments are all withheld.
func withheldModes(body protowire.Number) *argModes {
	var a argModes
	a.add(argPlace{body, fieldCall, fieldArguments}, argMode{withhold: true})
	return &a
}

// maskModes: the decision's redact paths mask the call's arguments (and
// an approval's original arguments).
func maskModes(body protowire.Number, redact []string, original bool) *argModes {
	if len(redact) == 0 {
		return nil
	}
	var m argMode
	for _, p := range redact {
		if p == "" {
			m.all = true
			continue
		}
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		m.paths = append(m.paths, calls.PointerTokens(p))
	}
	var out argModes
	out.add(argPlace{body, fieldCall, fieldArguments}, m)
	if original {
		out.add(argPlace{body, fieldOriginalArguments}, m)
	}
	return &out
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
	case *airlockv1.Event_VoteCast:
		v := b.VoteCast
		r.Decision = "vote"
		r.Reason = fmt.Sprintf("%d of %d approvals", v.GetVotes(), v.GetQuorum())
		if c := v.GetVote().GetComment(); c != "" {
			r.Reason += ": " + c
		}
		r.ArgsDigest = v.GetArgumentsDigest()
	case *airlockv1.Event_GrantCreated:
		g := b.GrantCreated.GetGrant()
		r.GrantID, r.RuleID = g.GetGrantId(), g.GetRuleId()
		r.Server, r.Tool = g.GetServer(), g.GetTool()
		r.Reason = "standing grant for agent " + g.GetAgentId() + " created from call " + g.GetFromCallId()
	case *airlockv1.Event_GrantUsed:
		g := b.GrantUsed
		r.GrantID, r.RuleID = g.GetGrantId(), g.GetRuleId()
		r.Reason = "standing grant " + g.GetGrantId() + " allowed the call"
		if g.GetLimitedUses() {
			r.Reason += fmt.Sprintf(" (%d use(s) left)", g.GetUsesLeft())
		}
	case *airlockv1.Event_GrantRevoked:
		g := b.GrantRevoked
		r.GrantID, r.Server, r.Tool = g.GetGrantId(), g.GetServer(), g.GetTool()
		r.Reason = "standing grant revoked"
	case *airlockv1.Event_GrantExpired:
		r.GrantID = b.GrantExpired.GetGrantId()
		r.Reason = "standing grant " + b.GrantExpired.GetWhy()
	case *airlockv1.Event_DecisionRefused:
		d := b.DecisionRefused
		r.Reason = strings.TrimSpace(d.GetAction() + " refused (" + d.GetCode() + "): " + d.GetWhy())
	case *airlockv1.Event_SignIn:
		if b.SignIn.GetOk() {
			r.Reason = "signed in (" + b.SignIn.GetMethod() + ")"
		} else {
			r.Reason = "sign-in refused (" + b.SignIn.GetMethod() + "): " + b.SignIn.GetWhy()
		}
	case *airlockv1.Event_TokenCreated:
		t := b.TokenCreated
		r.Reason = t.GetKind() + " token " + t.GetTokenId() + " (" + t.GetName() + ") created for " + t.GetOwner()
		if t.GetAgentId() != "" {
			r.Reason += " as agent " + t.GetAgentId()
		}
	case *airlockv1.Event_TokenRevoked:
		r.Reason = "token " + b.TokenRevoked.GetTokenId() + " of " + b.TokenRevoked.GetOwner() + " revoked"
	case *airlockv1.Event_ShadowChanged:
		sc := b.ShadowChanged
		r.PolicyRevision = sc.GetCandidateDigest()
		if sc.GetOn() {
			r.Reason = "shadow on: candidate " + sc.GetCandidateDigest() + " (" + strings.Join(sc.GetModules(), ", ") + ") from " + sc.GetSource()
		} else {
			r.Reason = "shadow off: candidate " + sc.GetCandidateDigest() + " stopped"
		}
	case *airlockv1.Event_ShadowDivergence:
		// Stored under a system subject so that the agent never sees it, the
		// row is still about the live call: its agent, call and revision.
		// decision is "<live>→<candidate>", rule_id the live rule, decided_by
		// the candidate's rule, policy_revision the candidate's digest.
		d := b.ShadowDivergence
		r.Agent, r.Call, r.Revision = d.GetAgentId(), d.GetCallId(), d.GetRevision()
		r.Server, r.Tool = d.GetServer(), d.GetTool()
		r.Decision = d.GetLiveAction() + ShadowArrow + d.GetCandidateAction()
		r.RuleID, r.GrantID = d.GetLiveRuleId(), d.GetLiveGrantId()
		r.PolicyRevision, r.ArgsDigest = d.GetCandidateDigest(), d.GetArgumentsDigest()
		r.Reason = "the candidate would " + d.GetCandidateAction() + " (rule " + d.GetCandidateRuleId() + "): " + d.GetCandidateReason()
	case *airlockv1.Event_AuditPruned:
		p := b.AuditPruned
		r.Reason = fmt.Sprintf("audit rows stored before %s dropped (%d rows, partitions %s); the chain continues at seq %d",
			p.GetBefore(), p.GetRows(), strings.Join(p.GetPartitions(), ","), p.GetFirstKeptSeq())
	case *airlockv1.Event_Undone:
		u := b.Undone
		r.Reason = fmt.Sprintf("undone: %d file(s) put back from %s", len(u.GetPaths())+int(u.GetMore()), u.GetRef())
		if u.GetForced() {
			r.Reason += " (forced over later changes)"
		}
	case *airlockv1.Event_OutcomeResolved:
		o := b.OutcomeResolved
		r.Reason = "in doubt, resolved: " + calls.Happened(o.GetHappened())
		if o.GetNote() != "" {
			r.Reason += " (" + o.GetNote() + ")"
		}
	}
	r.DecidedBy = decidedBy(r, ev)
}

// decidedBy names what decided (see Row.DecidedBy).
func decidedBy(r *Row, ev *airlockv1.Event) string {
	actor := func() string {
		if r.ActorID == "" {
			return ""
		}
		if r.ActorType == "" {
			return r.ActorID
		}
		return r.ActorType + ":" + r.ActorID
	}
	policy := func(d *airlockv1.Decision) string {
		switch {
		case d.GetGrantId() != "":
			r.GrantID = d.GetGrantId()
			return "grant:" + d.GetGrantId()
		case d.GetRuleId() != "":
			return "rule:" + d.GetRuleId()
		}
		return "rule:default"
	}
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Allowed:
		return policy(b.Allowed.GetDecision())
	case *airlockv1.Event_Denied:
		return policy(b.Denied.GetDecision())
	case *airlockv1.Event_ApprovalRequested:
		return policy(b.ApprovalRequested.GetDecision())
	case *airlockv1.Event_GrantUsed:
		return "grant:" + b.GrantUsed.GetGrantId()
	case *airlockv1.Event_Expired:
		return "timeout"
	case *airlockv1.Event_ShadowDivergence:
		// What the candidate decided with; it decided nothing live.
		if g := b.ShadowDivergence.GetCandidateGrantId(); g != "" {
			return "shadow:grant:" + g
		}
		return "shadow:rule:" + b.ShadowDivergence.GetCandidateRuleId()
	case *airlockv1.Event_GrantExpired:
		if b.GrantExpired.GetWhy() == "used_up" {
			return "grant:" + b.GrantExpired.GetGrantId()
		}
		return "timeout"
	case *airlockv1.Event_Approved, *airlockv1.Event_Rejected, *airlockv1.Event_ChangesRequested, *airlockv1.Event_Canceled,
		*airlockv1.Event_VoteCast, *airlockv1.Event_UnauthorizedAttempt, *airlockv1.Event_DecisionRefused,
		*airlockv1.Event_GrantCreated, *airlockv1.Event_GrantRevoked, *airlockv1.Event_PolicyChanged,
		*airlockv1.Event_SignIn, *airlockv1.Event_TokenCreated, *airlockv1.Event_TokenRevoked, *airlockv1.Event_AuditPruned,
		*airlockv1.Event_ShadowChanged, *airlockv1.Event_Undone, *airlockv1.Event_OutcomeResolved:
		return actor()
	}
	return ""
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
		maskAt(structpb.NewStructValue(args), calls.PointerTokens(p))
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
// protojson mapping (see pbjson.Append).
func canonicalJSON(ev *airlockv1.Event) string {
	return string(pbjson.Append(make([]byte, 0, 512), ev.ProtoReflect()))
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

// undecodableReason is an undecodable row's reason: a fixed sentence per
// encoding, never the decoder's error text. protobuf-go varies its text per
// binary on purpose (a space or a no-break space after "proto:") and may
// reword it in any release, and `audit verify` rebuilds every row from the
// stream with its own build: a row holding that text was reported altered
// by a verifier, or a sink replica, built from another binary.
func undecodableReason(hdr map[string][]string) string {
	if envelope.IsJSON(hdr) {
		return "undecodable event: the body is not an airlock event in protojson"
	}
	return "undecodable event: the body is not an airlock event in protobuf"
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

// AppendCanonicalFields appends the byte form of a row that its hash
// covers: every column except the two hashes (and ingested_at), in a fixed
// order, each written as "<byte length>:<value>," so no value can be
// confused with a separator. Time is Unix seconds and the millisecond part
// separately (as stored), latency is "" when unknown.
func AppendCanonicalFields(b []byte, r *Row) []byte {
	field := func(f string) {
		// Half the fields are shorter than 10 bytes (empty, most often):
		// their prefix is written here rather than in a call.
		if n := len(f); n < 10 {
			b = append(b, byte('0'+n), ':')
		} else {
			b = appendLen(b, n)
		}
		b = append(b, f...)
		b = append(b, ',')
	}
	var num [24]byte
	numField := func(n []byte) {
		b = appendLen(b, len(n))
		b = append(b, n...)
		b = append(b, ',')
	}
	numField(strconv.AppendUint(num[:0], r.Seq, 10))
	field(r.EventID)
	numField(strconv.AppendInt(num[:0], r.Time.Unix(), 10))
	numField(strconv.AppendInt(num[:0], int64(r.Time.Nanosecond()/1e6), 10))
	field(r.Type)
	field(r.Agent)
	field(r.Thread)
	field(r.Call)
	numField(strconv.AppendUint(num[:0], uint64(r.Revision), 10))
	field(r.Server)
	field(r.Tool)
	field(r.ActorType)
	field(r.ActorID)
	field(r.ActorChannel)
	field(r.Decision)
	field(r.Reason)
	field(r.Risk)
	field(r.RuleID)
	field(r.PolicyRevision)
	field(r.DecisionID)
	field(r.ArgsDigest)
	field(r.Payload)
	if r.LatencyMS != nil {
		numField(strconv.AppendFloat(num[:0], *r.LatencyMS, 'f', -1, 64))
	} else {
		field("")
	}
	field(r.DecidedBy)
	field(r.GrantID)
	return b
}

// appendLen appends "<n>:", the prefix of a canonical field; every row
// has two dozen, nearly all shorter than 1,000 bytes.
func appendLen(b []byte, n int) []byte {
	switch {
	case n < 10:
		return append(b, byte('0'+n), ':')
	case n < 100:
		return append(b, byte('0'+n/10), byte('0'+n%10), ':')
	case n < 1000:
		return append(b, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10), ':')
	}
	return append(strconv.AppendInt(b, int64(n), 10), ':')
}

// DifferentColumns names the columns in which a and b differ, hashes and
// ingestion time aside: what an altered row changed, next to the event the
// stream holds.
func DifferentColumns(a, b *Row) []string {
	var out []string
	add := func(name string, differ bool) {
		if differ {
			out = append(out, name)
		}
	}
	lat := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	add("seq", a.Seq != b.Seq)
	add("event_id", a.EventID != b.EventID)
	add("ts", !a.Time.Equal(b.Time))
	add("type", a.Type != b.Type)
	add("agent_id", a.Agent != b.Agent)
	add("thread_id", a.Thread != b.Thread)
	add("call_id", a.Call != b.Call)
	add("revision", a.Revision != b.Revision)
	add("server", a.Server != b.Server)
	add("tool", a.Tool != b.Tool)
	add("actor_type", a.ActorType != b.ActorType)
	add("actor_id", a.ActorID != b.ActorID)
	add("actor_channel", a.ActorChannel != b.ActorChannel)
	add("decision", a.Decision != b.Decision)
	add("reason", a.Reason != b.Reason)
	add("risk", a.Risk != b.Risk)
	add("rule_id", a.RuleID != b.RuleID)
	add("policy_revision", a.PolicyRevision != b.PolicyRevision)
	add("decision_id", a.DecisionID != b.DecisionID)
	add("args_digest", a.ArgsDigest != b.ArgsDigest)
	add("payload", a.Payload != b.Payload)
	add("latency_ms", lat(a.LatencyMS) != lat(b.LatencyMS))
	add("decided_by", a.DecidedBy != b.DecidedBy)
	add("grant_id", a.GrantID != b.GrantID)
	return out
}
