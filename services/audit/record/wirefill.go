package record

import (
	"crypto/sha256"
	"math"
	"strings"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/pbwire"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// payloadBufs are scratch buffers the payload is rendered into before it
// is copied into the row's string.
var payloadBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

var (
	riskEnum  = airlockv1.Risk(0).Descriptor()
	actorEnum = airlockv1.ActorType(0).Descriptor()
)

// buildWire is Build's fast path for the events every call produces:
// columns and payload read straight from the protobuf bytes, with no
// decoding into messages. It gives the same row as the generic path (a
// test keeps them equal) and reports false for anything else — another
// event type, protojson, bytes not in Go's canonical field order — which
// then takes the generic path.
//
// The agent and call columns come from the envelope, or from subj (the
// message's subject) where the envelope has none. The strings of the body
// are read with pbwire.View, unchecked: the payload's transcoder renders
// every one of them and refuses the event when one is not UTF-8.
func buildWire(r *Row, subj string, data []byte, a *Arena) bool {
	var ok0 bool // the result of reading the last field below
	var env struct {
		id, agent, call, thread string
		revision                uint32
		actorType               int32
		actorID, actorChannel   string
		bodyNum                 protowire.Number
		body                    []byte
		hasBody                 bool
	}
	// The envelope, read in a plain loop: it is the first thing every event
	// costs. A field it does not read keeps the last field's result. Its
	// fields must come in ascending order, as the payload's transcoder
	// requires of every message: so the transcoder is given the time and
	// the event from its first field past the envelope on, and does not
	// read the envelope again.
	var last protowire.Number
	payloadFrom := -1
	var timeVal []byte
	var hasTime bool
	for rest := data; len(rest) > 0; {
		num, typ, raw, next, ok := pbwire.Next(rest)
		if !ok || num <= last {
			return false
		}
		if num > 7 && payloadFrom < 0 {
			payloadFrom = len(data) - len(rest)
		}
		last, rest = num, next
		switch {
		case num == 1:
			env.id, ok0 = pbwire.String(typ, raw)
		case num == 2:
			env.agent, ok0 = pbwire.String(typ, raw)
		case num == 3:
			env.call, ok0 = pbwire.String(typ, raw)
		case num == 4:
			var v uint64
			v, ok0 = pbwire.Varint(typ, raw)
			env.revision = uint32(v)
		case num == 6:
			var actor []byte
			if actor, ok0 = pbwire.Bytes(typ, raw); ok0 {
				ok0 = readActor(actor, &env.actorType, &env.actorID, &env.actorChannel)
			}
		case num == fieldTime:
			hasTime = true
			timeVal, ok0 = pbwire.Bytes(typ, raw) // its wire type, as the transcoder checks every field's
		case num == 7:
			env.thread, ok0 = pbwire.String(typ, raw)
		case num >= 10:
			if env.hasBody {
				return false
			}
			env.bodyNum, env.hasBody = num, true
			env.body, ok0 = pbwire.Bytes(typ, raw)
		}
		if !ok0 {
			return false
		}
	}
	if !env.hasBody {
		return false
	}
	var ok bool
	if env.agent == "" || env.call == "" {
		// Only then does the subject matter (Type is the body's).
		if agent, call, _, ok := subject.Tokens(subj); ok {
			r.Agent, r.Call = agent, call
		}
	}
	bodies := bodyTypes()
	if int(env.bodyNum) >= len(bodies) || bodies[env.bodyNum] == "" {
		return false
	}
	typ := bodies[env.bodyNum]
	var decision []byte
	var hasCall, hasDecision bool
	// What each hot body carries; every other type takes the generic path.
	switch typ {
	case subject.Requested, subject.Allowed, subject.Denied, subject.ApprovalRequested, subject.Approved:
		ok = pbwire.EachField(env.body, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			switch {
			case n == 1:
				hasCall = true
				_, ok0 = pbwire.Bytes(t, raw) // read with the payload (callFields)
			case n == 2 && typ != subject.Requested:
				hasDecision = true
				decision, ok0 = pbwire.Bytes(t, raw)
			default:
				ok0 = true
			}
			return ok0
		})
		if !ok {
			return false
		}
	case subject.Notified, subject.Started, subject.Completed, subject.Failed:
	default:
		return false
	}
	var redact []string
	var d wireDecision
	if hasDecision {
		var redactBuf [4]string // most decisions redact a few paths: no allocation for them
		if d, redact, ok = readDecision(decision, redactBuf[:0]); !ok {
			return false
		}
	}
	var modes *argModes
	switch typ {
	case subject.Requested:
		modes = a.modes(env.bodyNum, nil, true, false)
	case subject.Approved:
		modes = a.modes(env.bodyNum, redact, false, true)
	case subject.Allowed, subject.Denied, subject.ApprovalRequested:
		modes = a.modes(env.bodyNum, redact, false, false)
	}
	var buf, scratch *[]byte
	var ts *pbjson.SecondsCache
	if a != nil {
		ts = &a.seconds
	} else {
		buf, scratch = payloadBufs.Get().(*[]byte), payloadBufs.Get().(*[]byte)
		defer payloadBufs.Put(buf)
		defer payloadBufs.Put(scratch)
	}
	var callWire *callFields
	if a != nil {
		callWire = &a.call
		callWire.has = [callFieldsKept]bool{} // what it kept of the last event is not read
	} else {
		callWire = &callFields{}
	}
	// With an arena the payload is written straight into its chunk, else
	// into a pooled buffer (and interned with the other columns at the end).
	var dst []byte
	if a != nil {
		c := a.reserve(payloadRoom)
		dst = c[len(c):]
	} else {
		dst = (*buf)[:0]
	}
	var tr *transcoder
	if a != nil {
		tr = &a.transcoder
	}
	payload, ok := eventPayload(tr, dst, timeVal, hasTime, data[payloadFrom:], modes, ts, callWire)
	if !ok {
		return false
	}
	switch {
	case a == nil:
		*buf = payload[:0]
		r.Payload = unsafe.String(unsafe.SliceData(payload), len(payload))
	case unsafe.SliceData(payload) == unsafe.SliceData(dst):
		a.chunks[a.cur] = a.chunks[a.cur][:len(a.chunks[a.cur])+len(payload)] // written in place: keep it
		r.Payload = unsafe.String(unsafe.SliceData(payload), len(payload))
	default:
		r.Payload = a.string(payload) // longer than the room: append moved it
	}

	// Columns, exactly as fill and decidedBy set them.
	r.EventID, r.Type, r.Revision, r.Thread = env.id, typ, env.revision, env.thread
	if env.agent != "" {
		r.Agent = env.agent
	}
	if env.call != "" {
		r.Call = env.call
	}
	if env.actorType != 0 || env.actorID != "" || env.actorChannel != "" {
		if name, ok := actorTypeName(env.actorType); ok {
			r.ActorType = name
		} else {
			return false
		}
		r.ActorID, r.ActorChannel = env.actorID, env.actorChannel
	}
	setDecision := func(verdict string) {
		if !hasDecision {
			return
		}
		r.Decision, r.Reason = verdict, d.reason
		if d.risk != 0 {
			r.Risk = d.riskName
		}
		r.RuleID, r.PolicyRevision, r.DecisionID = d.ruleID, d.policyRevision, d.decisionID
		if d.digest != "" {
			r.ArgsDigest = d.digest
		}
	}
	setCall := func() bool {
		if !hasCall {
			return true
		}
		var server, tool, thread string
		var rev uint64
		var args []byte
		// The payload's transcoder kept the call's fields (call itself is
		// the same bytes): read each as the columns always have.
		ok := true
		for n := protowire.Number(3); n <= 10 && ok; n++ {
			if !callWire.has[n] {
				continue
			}
			t, raw := callWire.typ[n], callWire.val[n]
			switch n {
			case 3:
				thread, ok = pbwire.View(t, raw)
			case 5:
				server, ok = pbwire.View(t, raw)
			case 6:
				tool, ok = pbwire.View(t, raw)
			case 7:
				args, ok = pbwire.Bytes(t, raw)
			case 10:
				rev, ok = pbwire.Varint(t, raw)
			}
		}
		if !ok {
			return false
		}
		r.Server, r.Tool = server, tool
		if r.Thread == "" {
			r.Thread = thread
		}
		if r.Revision == 0 {
			r.Revision = uint32(rev)
		}
		if r.ArgsDigest == "" {
			r.ArgsDigest, ok = a.digestWire(args)
		}
		return ok
	}
	policy := func() {
		switch {
		case d.grantID != "":
			r.GrantID, r.DecidedBy = d.grantID, a.join("grant:", d.grantID)
		case d.ruleID != "":
			r.DecidedBy = a.join("rule:", d.ruleID)
		default:
			r.DecidedBy = "rule:default"
		}
	}
	switch typ {
	case subject.Requested:
		ok = setCall()
	case subject.Allowed:
		setDecision("allow")
		ok = setCall()
		policy()
	case subject.Denied:
		setDecision("deny")
		ok = setCall()
		policy()
	case subject.ApprovalRequested:
		setDecision("ask")
		ok = setCall()
		policy()
	case subject.Approved:
		var comment, digest, prev string
		ok = pbwire.EachField(env.body, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			var ok bool
			switch n {
			case 3:
				var v []byte
				if v, ok = pbwire.Bytes(t, raw); ok {
					comment = ""
					ok = pbwire.EachField(v, func(n protowire.Number, t protowire.Type, raw []byte) bool {
						if n == 3 {
							var ok bool
							comment, ok = pbwire.View(t, raw)
							return ok
						}
						return true
					})
				}
			case 6:
				digest, ok = pbwire.View(t, raw)
			case 8:
				prev, ok = pbwire.View(t, raw)
			default:
				ok = true
			}
			return ok
		})
		if !ok {
			return false
		}
		setDecision("approve")
		r.Decision, r.Reason = "approve", comment
		if digest != "" {
			r.ArgsDigest = digest
		}
		if prev != "" {
			r.PolicyRevision = prev
		}
		ok = setCall()
		if r.ActorID != "" {
			r.DecidedBy = r.ActorID
			if r.ActorType != "" {
				r.DecidedBy = a.join(r.ActorType, ":", r.ActorID)
			}
		}
	case subject.Completed, subject.Failed:
		var reason, message string
		var latency []byte
		hasLatency := false
		ok = pbwire.EachField(env.body, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			var ok bool
			switch {
			case typ == subject.Completed && n == 3, typ == subject.Failed && n == 4:
				hasLatency = true
				latency, ok = pbwire.Bytes(t, raw)
			case typ == subject.Failed && n == 1:
				reason, ok = pbwire.View(t, raw)
			case typ == subject.Failed && n == 3:
				message, ok = pbwire.View(t, raw)
			default:
				ok = true
			}
			return ok
		})
		if !ok {
			return false
		}
		if typ == subject.Failed {
			r.Reason = strings.TrimSuffix(strings.TrimSpace(reason+": "+message), ":")
		}
		if hasLatency {
			var secs, nanos int64
			if !pbwire.EachField(latency, func(n protowire.Number, t protowire.Type, raw []byte) bool {
				v, ok := pbwire.Varint(t, raw)
				if n == 1 {
					secs = int64(v)
				} else if n == 2 {
					nanos = int64(int32(v))
				}
				return ok
			}) {
				return false
			}
			r.LatencyMS = a.float(float64(durationOf(secs, nanos).Microseconds()) / 1000)
		}
	}
	if !ok {
		return false
	}
	if a == nil {
		*scratch = intern(r, *scratch)
	}
	return true
}

// digestWire is canon.DigestWire of args, written into a when a is not nil.
func (a *Arena) digestWire(args []byte) (string, bool) {
	if a == nil {
		return canon.DigestWire(args)
	}
	c := a.reserve(2 * sha256.Size) // the room the hex digest takes: appending to c does not move it
	d, ok := canon.AppendDigestWire(c, args)
	if !ok || len(d) == len(c) {
		return "", ok
	}
	a.chunks[a.cur] = d
	return unsafe.String(&d[len(c)], len(d)-len(c)), true
}

// readActor reads an Actor's type, id and channel.
func readActor(data []byte, typ *int32, id, channel *string) bool {
	for len(data) > 0 {
		num, t, raw, rest, ok := pbwire.Next(data)
		if !ok {
			return false
		}
		data = rest
		switch num {
		case 1:
			var v uint64
			v, ok = pbwire.Varint(t, raw)
			*typ = int32(v)
		case 2:
			*id, ok = pbwire.String(t, raw)
		case 3:
			*channel, ok = pbwire.String(t, raw)
		case 4:
			// Not a column, but the decoder refuses invalid UTF-8 in it:
			// so does this path, or the row would not be the generic one.
			_, ok = pbwire.String(t, raw)
		}
		if !ok {
			return false
		}
	}
	return true
}

type wireDecision struct {
	reason, ruleID, policyRevision, decisionID, grantID, digest, riskName string
	risk                                                                  int32
}

// readDecision reads a decision's columns, and appends its redact paths
// to redact (apart from d, which escapes, so that redact's array need not).
func readDecision(data []byte, redact []string) (d wireDecision, _ []string, _ bool) {
	ok := pbwire.EachField(data, func(n protowire.Number, t protowire.Type, raw []byte) bool {
		var ok bool
		switch n {
		case 2:
			d.reason, ok = pbwire.View(t, raw)
		case 3:
			d.ruleID, ok = pbwire.View(t, raw)
		case 4:
			var v uint64
			v, ok = pbwire.Varint(t, raw)
			d.risk = int32(v)
		case 9:
			var s string
			if s, ok = pbwire.View(t, raw); ok {
				redact = append(redact, s)
			}
		case 10:
			d.policyRevision, ok = pbwire.View(t, raw)
		case 11:
			d.decisionID, ok = pbwire.View(t, raw)
		case 12:
			d.grantID, ok = pbwire.View(t, raw)
		case 13:
			d.digest, ok = pbwire.View(t, raw)
		default:
			ok = true
		}
		return ok
	})
	if d.risk != 0 {
		name, known := riskNames[d.risk]
		if !known {
			return d, redact, false
		}
		d.riskName = name
	}
	return d, redact, ok
}

func actorTypeName(t int32) (string, bool) {
	if t == 0 {
		return "", true
	}
	name, ok := actorTypeNames[t]
	return name, ok
}

// bodyTypes names Event's body fields by number ("" for other numbers).
var bodyTypes = sync.OnceValue(func() []string {
	fs := eventDesc.Oneofs().ByName("body").Fields()
	var names []string
	for i := 0; i < fs.Len(); i++ {
		n := int(fs.Get(i).Number())
		for n >= len(names) {
			names = append(names, "")
		}
		names[n] = string(fs.Get(i).Name())
	}
	return names
})

// riskNames and actorTypeNames are the column forms of the enums' values
// ("RISK_HIGH" → "high"), worked out once: each event would otherwise
// allocate them.
var (
	riskNames      = columnNames(riskEnum, "RISK_")
	actorTypeNames = columnNames(actorEnum, "ACTOR_TYPE_")
)

func columnNames(ed protoreflect.EnumDescriptor, prefix string) map[int32]string {
	names := map[int32]string{}
	vs := ed.Values()
	for i := vs.Len() - 1; i >= 0; i-- { // an alias keeps the first name, as ByNumber does
		names[int32(vs.Get(i).Number())] = strings.ToLower(strings.TrimPrefix(string(vs.Get(i).Name()), prefix))
	}
	return names
}

// columnsOf points at every string column of r, the payload last.
func columnsOf(r *Row) [20]*string {
	return [...]*string{&r.EventID, &r.Type, &r.Agent, &r.Thread, &r.Call, &r.Server, &r.Tool, &r.ActorType, &r.ActorID,
		&r.ActorChannel, &r.Decision, &r.Reason, &r.Risk, &r.RuleID, &r.PolicyRevision, &r.DecisionID, &r.ArgsDigest,
		&r.DecidedBy, &r.GrantID, &r.Payload}
}

// intern copies every string of r into one new allocation, so the row owns
// its strings (not views of the message or a scratch buffer) at the cost
// of one allocation instead of one per column.
func intern(r *Row, buf []byte) []byte {
	fields := columnsOf(r)
	var ends [len(fields)]int
	buf = buf[:0]
	for i, f := range fields {
		buf = append(buf, *f...)
		ends[i] = len(buf)
	}
	all := string(buf)
	start := 0
	for i, f := range fields {
		*f = all[start:ends[i]]
		start = ends[i]
	}
	return buf
}

func durationOf(secs, nanos int64) time.Duration {
	d := time.Duration(secs) * time.Second
	if d/time.Second != time.Duration(secs) {
		if secs < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return d + time.Duration(nanos)
}
