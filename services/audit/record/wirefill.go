package record

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
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
func buildWire(r *Row, data []byte, a *Arena) bool {
	var ok0 bool // the result slot of the field callbacks below
	var env struct {
		id, agent, call, thread string
		revision                uint32
		actorType               int32
		actorID, actorChannel   string
		bodyNum                 protowire.Number
		body                    []byte
		hasBody                 bool
	}
	ok := eachField(data, func(num protowire.Number, typ protowire.Type, raw []byte) bool {
		switch {
		case num == 1:
			env.id, ok0 = str(typ, raw)
		case num == 2:
			env.agent, ok0 = str(typ, raw)
		case num == 3:
			env.call, ok0 = str(typ, raw)
		case num == 4:
			var v uint64
			v, ok0 = varint(typ, raw)
			env.revision = uint32(v)
		case num == 6:
			var a []byte
			if a, ok0 = bytesOf(typ, raw); ok0 {
				ok0 = eachField(a, func(n protowire.Number, t protowire.Type, raw []byte) bool {
					switch n {
					case 1:
						v, ok := varint(t, raw)
						env.actorType = int32(v)
						return ok
					case 2:
						var ok bool
						env.actorID, ok = str(t, raw)
						return ok
					case 3:
						var ok bool
						env.actorChannel, ok = str(t, raw)
						return ok
					}
					return true
				})
			}
		case num == 7:
			env.thread, ok0 = str(typ, raw)
		case num >= 10:
			if env.hasBody {
				return false
			}
			env.bodyNum, env.hasBody = num, true
			env.body, ok0 = bytesOf(typ, raw)
		}
		return ok0
	})
	if !ok || !env.hasBody {
		return false
	}
	fd := eventDesc.Fields().ByNumber(env.bodyNum)
	if fd == nil || fd.ContainingOneof() == nil {
		return false
	}
	typ := string(fd.Name())
	var call, decision []byte
	var hasCall, hasDecision bool
	// What each hot body carries; every other type takes the generic path.
	switch typ {
	case "requested", "allowed", "denied", "approval_requested", "approved":
		ok = eachField(env.body, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			switch {
			case n == 1:
				hasCall = true
				call, ok0 = bytesOf(t, raw)
			case n == 2 && typ != "requested":
				hasDecision = true
				decision, ok0 = bytesOf(t, raw)
			default:
				ok0 = true
			}
			return ok0
		})
		if !ok {
			return false
		}
	case "notified", "started", "completed", "failed":
	default:
		return false
	}
	var redact []string
	var d wireDecision
	if hasDecision {
		if d, ok = readDecision(decision); !ok {
			return false
		}
		redact = d.redact
	}
	var modes *argModes
	switch typ {
	case "requested":
		modes = withheldModes(env.bodyNum)
	case "approved":
		modes = maskModes(env.bodyNum, redact, true)
	case "allowed", "denied", "approval_requested":
		modes = maskModes(env.bodyNum, redact, false)
	}
	buf := payloadBufs.Get().(*[]byte)
	defer payloadBufs.Put(buf)
	payload, ok := wirePayload((*buf)[:0], data, modes)
	if !ok {
		return false
	}
	*buf = payload[:0]
	scratch := payloadBufs.Get().(*[]byte)
	defer payloadBufs.Put(scratch)

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
		ok := eachField(call, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			var ok bool
			switch n {
			case 3:
				thread, ok = str(t, raw)
			case 5:
				server, ok = str(t, raw)
			case 6:
				tool, ok = str(t, raw)
			case 7:
				args, ok = bytesOf(t, raw)
			case 10:
				rev, ok = varint(t, raw)
			default:
				ok = true
			}
			return ok
		})
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
			r.ArgsDigest, ok = canonDigest(args)
		}
		return ok
	}
	policy := func() {
		switch {
		case d.grantID != "":
			r.GrantID, r.DecidedBy = d.grantID, "grant:"+d.grantID
		case d.ruleID != "":
			r.DecidedBy = "rule:" + d.ruleID
		default:
			r.DecidedBy = "rule:default"
		}
	}
	switch typ {
	case "requested":
		ok = setCall()
	case "allowed":
		setDecision("allow")
		ok = setCall()
		policy()
	case "denied":
		setDecision("deny")
		ok = setCall()
		policy()
	case "approval_requested":
		setDecision("ask")
		ok = setCall()
		policy()
	case "approved":
		var comment, digest, prev string
		ok = eachField(env.body, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			var ok bool
			switch n {
			case 3:
				var v []byte
				if v, ok = bytesOf(t, raw); ok {
					comment = ""
					ok = eachField(v, func(n protowire.Number, t protowire.Type, raw []byte) bool {
						if n == 3 {
							var ok bool
							comment, ok = str(t, raw)
							return ok
						}
						return true
					})
				}
			case 6:
				digest, ok = str(t, raw)
			case 8:
				prev, ok = str(t, raw)
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
				r.DecidedBy = r.ActorType + ":" + r.ActorID
			}
		}
	case "completed", "failed":
		var reason, message string
		var latency []byte
		hasLatency := false
		ok = eachField(env.body, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			var ok bool
			switch {
			case typ == "completed" && n == 3, typ == "failed" && n == 4:
				hasLatency = true
				latency, ok = bytesOf(t, raw)
			case typ == "failed" && n == 1:
				reason, ok = str(t, raw)
			case typ == "failed" && n == 3:
				message, ok = str(t, raw)
			default:
				ok = true
			}
			return ok
		})
		if !ok {
			return false
		}
		if typ == "failed" {
			r.Reason = strings.TrimSuffix(strings.TrimSpace(reason+": "+message), ":")
		}
		if hasLatency {
			var secs, nanos int64
			if !eachField(latency, func(n protowire.Number, t protowire.Type, raw []byte) bool {
				v, ok := varint(t, raw)
				if n == 1 {
					secs = int64(v)
				} else if n == 2 {
					nanos = int64(int32(v))
				}
				return ok
			}) {
				return false
			}
			ms := float64(durationOf(secs, nanos).Microseconds()) / 1000
			r.LatencyMS = &ms
		}
	}
	if !ok {
		return false
	}
	r.Payload = unsafe.String(unsafe.SliceData(payload), len(payload))
	*scratch = intern(r, *scratch, a)
	return true
}

type wireDecision struct {
	reason, ruleID, policyRevision, decisionID, grantID, digest, riskName string
	risk                                                                  int32
	redact                                                                []string
}

func readDecision(data []byte) (wireDecision, bool) {
	var d wireDecision
	ok := eachField(data, func(n protowire.Number, t protowire.Type, raw []byte) bool {
		var ok bool
		switch n {
		case 2:
			d.reason, ok = str(t, raw)
		case 3:
			d.ruleID, ok = str(t, raw)
		case 4:
			var v uint64
			v, ok = varint(t, raw)
			d.risk = int32(v)
		case 9:
			var s string
			if s, ok = str(t, raw); ok {
				d.redact = append(d.redact, s)
			}
		case 10:
			d.policyRevision, ok = str(t, raw)
		case 11:
			d.decisionID, ok = str(t, raw)
		case 12:
			d.grantID, ok = str(t, raw)
		case 13:
			d.digest, ok = str(t, raw)
		default:
			ok = true
		}
		return ok
	})
	if d.risk != 0 {
		ev := riskEnum.Values().ByNumber(protoreflect.EnumNumber(d.risk))
		if ev == nil {
			return d, false
		}
		d.riskName = strings.ToLower(strings.TrimPrefix(string(ev.Name()), "RISK_"))
	}
	return d, ok
}

func actorTypeName(t int32) (string, bool) {
	if t == 0 {
		return "", true
	}
	ev := actorEnum.Values().ByNumber(protoreflect.EnumNumber(t))
	if ev == nil {
		return "", false
	}
	return strings.ToLower(strings.TrimPrefix(string(ev.Name()), "ACTOR_TYPE_")), true
}

// eachField calls fn for every field of a message, in order.
func eachField(data []byte, fn func(protowire.Number, protowire.Type, []byte) bool) bool {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, data[n:])
		if m < 0 {
			return false
		}
		if !fn(num, typ, data[n:n+m]) {
			return false
		}
		data = data[n+m:]
	}
	return true
}

func bytesOf(typ protowire.Type, raw []byte) ([]byte, bool) {
	if typ != protowire.BytesType {
		return nil, false
	}
	v, n := protowire.ConsumeBytes(raw)
	return v, n >= 0
}

// str reads a string field as a view of the wire bytes, valid only while
// buildWire runs: buildWire copies every string of the row it made into
// one allocation before it returns (intern).
func str(typ protowire.Type, raw []byte) (string, bool) {
	v, ok := bytesOf(typ, raw)
	if !ok || !utf8.Valid(v) {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(v), len(v)), true
}

// intern copies every string of r into one new allocation (or into a when
// not nil), so the row owns its strings (not views of the message or a
// scratch buffer) at the cost of one allocation instead of one per column.
func intern(r *Row, buf []byte, a *Arena) []byte {
	fields := [...]*string{&r.EventID, &r.Type, &r.Agent, &r.Thread, &r.Call, &r.Server, &r.Tool, &r.ActorType, &r.ActorID,
		&r.ActorChannel, &r.Decision, &r.Reason, &r.Risk, &r.RuleID, &r.PolicyRevision, &r.DecisionID, &r.ArgsDigest,
		&r.Payload, &r.DecidedBy, &r.GrantID}
	var ends [len(fields)]int
	buf = buf[:0]
	for i, f := range fields {
		buf = append(buf, *f...)
		ends[i] = len(buf)
	}
	var all string
	if a != nil {
		if len(buf) > 0 {
			all = a.string(buf)
		}
	} else {
		all = string(buf)
	}
	start := 0
	for i, f := range fields {
		*f = all[start:ends[i]]
		start = ends[i]
	}
	return buf
}

func varint(typ protowire.Type, raw []byte) (uint64, bool) {
	if typ != protowire.VarintType {
		return 0, false
	}
	v, n := protowire.ConsumeVarint(raw)
	return v, n >= 0
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

// canonDigest is canon.Digest of the Struct in data, computed from the
// wire bytes: hex SHA-256 of encoding/json's rendering of args.AsMap()
// (keys sorted, HTML-safe escapes, its float format, non-finite numbers as
// the strings AsMap makes of them).
func canonDigest(data []byte) (string, bool) {
	buf := payloadBufs.Get().(*[]byte)
	defer payloadBufs.Put(buf)
	b, ok, finite := canonStruct((*buf)[:0], data)
	if !ok {
		return "", false
	}
	*buf = b[:0]
	if !finite {
		return "", true
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

func canonStruct(b, data []byte) ([]byte, bool, bool) {
	type field struct {
		key string
		val []byte
	}
	var fbuf [16]field
	fields := fbuf[:0]
	ok := eachField(data, func(n protowire.Number, t protowire.Type, raw []byte) bool {
		ent, ok := bytesOf(t, raw)
		if !ok || n != 1 {
			return false
		}
		var f field
		if !eachField(ent, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			var ok bool
			switch n {
			case 1:
				f.key, ok = str(t, raw)
			case 2:
				f.val, ok = bytesOf(t, raw)
			default:
				ok = true
			}
			return ok
		}) {
			return false
		}
		fields = append(fields, f)
		return true
	})
	if !ok {
		return nil, false, false
	}
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	finite := true
	for i, f := range fields {
		if i > 0 && fields[i-1].key == f.key {
			return nil, false, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCanonString(b, f.key)
		b = append(b, ':')
		var ok, fin bool
		if b, ok, fin = canonValue(b, f.val); !ok {
			return nil, false, false
		}
		finite = finite && fin
	}
	return append(b, '}'), true, finite
}

func canonValue(b, data []byte) ([]byte, bool, bool) {
	if len(data) == 0 {
		return append(b, "null"...), true, true
	}
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 {
		return nil, false, false
	}
	m := protowire.ConsumeFieldValue(num, typ, data[n:])
	if m < 0 || n+m != len(data) {
		return nil, false, false
	}
	raw := data[n : n+m]
	switch num {
	case 1:
		return append(b, "null"...), true, true
	case 2:
		v, k := protowire.ConsumeFixed64(raw)
		if typ != protowire.Fixed64Type || k < 0 {
			return nil, false, false
		}
		// canon.Digest refuses non-finite numbers: no digest, as there.
		if f := math.Float64frombits(v); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return appendCanonFloat(b, f), true, true
		}
		return b, true, false
	case 3:
		s, ok := str(typ, raw)
		if !ok {
			return nil, false, false
		}
		return appendCanonString(b, s), true, true
	case 4:
		v, ok := varint(typ, raw)
		if !ok {
			return nil, false, false
		}
		return strconv.AppendBool(b, v != 0), true, true
	case 5:
		v, ok := bytesOf(typ, raw)
		if !ok {
			return nil, false, false
		}
		return canonStruct(b, v)
	case 6:
		v, ok := bytesOf(typ, raw)
		if !ok {
			return nil, false, false
		}
		b = append(b, '[')
		finite, i := true, 0
		ok = eachField(v, func(n protowire.Number, t protowire.Type, raw []byte) bool {
			e, ok := bytesOf(t, raw)
			if !ok || n != 1 {
				return false
			}
			if i > 0 {
				b = append(b, ',')
			}
			i++
			var fin bool
			b, ok, fin = canonValue(b, e)
			finite = finite && fin
			return ok
		})
		if !ok {
			return nil, false, false
		}
		return append(b, ']'), true, finite
	}
	return nil, false, false
}

// appendCanonFloat formats f as encoding/json does.
func appendCanonFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// encoding/json writes e-09 as e-9
		if n := len(b) - start; n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b
}
