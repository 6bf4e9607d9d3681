package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
)

// updateGolden rewrites testdata/rows.golden.json from the build as it is.
// Only ever run it with the implementation the file pins (the one before a
// rewrite of the build), never to make a changed build pass.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/rows.golden.json from the current build")

const goldenFile = "testdata/rows.golden.json"

// goldenRow is one pinned row: every column and the hash chain under a
// fixed key (which covers the canonical bytes of every column). A payload
// longer than goldenInline is pinned by its SHA-256, to keep the file small.
type goldenRow struct {
	Name          string `json:"name"`
	Row           Row    `json:"row"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
}

const goldenInline = 1024

// pinned is r as the golden file holds it.
func pinned(name string, r Row) goldenRow {
	g := goldenRow{Name: name, Row: r}
	if len(r.Payload) > goldenInline {
		sum := sha256.Sum256([]byte(r.Payload))
		g.Row.Payload, g.PayloadSHA256 = "", hex.EncodeToString(sum[:])
	}
	return g
}

// goldenMsg is one case of the pinned corpus.
type goldenMsg struct {
	name string
	msg  Msg
}

// filled returns a message of md's type with every field set (lists and
// maps with two entries, strings with non-ASCII and characters JSON
// escapes), recursing down to depth; seed varies the values.
func filled(t testing.TB, md protoreflect.MessageDescriptor, seed string, depth int) protoreflect.Message {
	t.Helper()
	m := dynamicOf(md)
	switch md.FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration":
		m.Set(md.Fields().ByNumber(1), protoreflect.ValueOfInt64(int64(1_700_000_000+len(seed))))
		m.Set(md.Fields().ByNumber(2), protoreflect.ValueOfInt32(int32(123_000_000+len(seed))))
		return m
	case "google.protobuf.Struct":
		s, err := structpb.NewStruct(map[string]any{"path": "/srv/" + seed, "n": 42.5, "ok": true, "none": nil,
			"list": []any{"a", 1, map[string]any{"k": "v"}}, "nested": map[string]any{"password": "p", "ü": "ß"}})
		if err != nil {
			t.Fatal(err)
		}
		return s.ProtoReflect()
	case "google.protobuf.Value":
		return structpb.NewStringValue("value " + seed).ProtoReflect()
	case "google.protobuf.ListValue":
		l, _ := structpb.NewList([]any{"x", 2})
		return l.ProtoReflect()
	}
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() && fd.Message() != nil && depth == 0 {
			continue // the caller picks Event's body
		}
		name := seed + "." + string(fd.Name())
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j, k := range []string{"/z ключ", "/a"} {
				v := scalar(t, fd.MapValue(), fmt.Sprintf("%s[%d]", name, j), depth)
				mp.Set(protoreflect.ValueOfString(k).MapKey(), v)
			}
		case fd.IsList() && (fd.Message() == nil || depth < 4):
			l := m.Mutable(fd).List()
			for j := 0; j < 2; j++ {
				l.Append(scalar(t, fd, fmt.Sprintf("%s[%d]", name, j), depth))
			}
		case fd.IsList():
		case fd.Message() != nil:
			if depth < 4 {
				m.Set(fd, protoreflect.ValueOfMessage(filled(t, fd.Message(), name, depth+1)))
			}
		default:
			m.Set(fd, scalar(t, fd, name, depth))
		}
	}
	return m
}

func dynamicOf(md protoreflect.MessageDescriptor) protoreflect.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		panic(err)
	}
	return mt.New()
}

// scalar is one value of fd (a list element or map value when fd is one).
func scalar(t testing.TB, fd protoreflect.FieldDescriptor, seed string, depth int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(seed + " é中\u2028<&>\"\\\n")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(seed + "\x00\xff"))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(vs.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(-int32(len(seed)))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-int64(len(seed)) * 1e12)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(len(seed)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(math.MaxUint64 - uint64(len(seed)))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0.1 * float64(len(seed)))
	case protoreflect.MessageKind:
		return protoreflect.ValueOfMessage(filled(t, fd.Message(), seed, depth+1))
	}
	t.Fatalf("no filler for %s", fd.Kind())
	return protoreflect.Value{}
}

// goldenCorpus is every event type (each field set), the wire corpus of
// the fast path's own tests, and odd messages: large and deep arguments,
// non-ASCII, redaction of every shape, protojson, bytes out of Go's field
// order, unknown fields, invalid UTF-8, undecodable bytes.
func goldenCorpus(t testing.TB) []goldenMsg {
	at := time.Unix(1_700_000_000, 987_654_321)
	var out []goldenMsg
	add := func(name, subj string, data []byte, hdr map[string][]string) {
		out = append(out, goldenMsg{name, Msg{Seq: uint64(len(out) + 1), Time: at.Add(time.Duration(len(out)) * time.Second), Subject: subj, Header: hdr, Data: data}})
	}
	proto3 := func(name string, ev *airlockv1.Event) {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		subj := "airlock.evt." + ev.GetAgentId() + "." + ev.GetCallId() + "." + envelope.TypeOf(ev)
		add(name, subj, data, map[string][]string{envelope.HeaderContentType: {envelope.ContentProtobuf}, envelope.HeaderCEID: {ev.GetEventId()}})
		js, err := pbjson.Marshal(ev)
		if err != nil {
			return // protojson has no form for non-finite numbers: the event is refused at ingress
		}
		add(name+" as protojson", subj, js, map[string][]string{envelope.HeaderContentType: {envelope.ContentJSON}})
	}

	// Every event type, every field set.
	body := eventDesc.Oneofs().ByName("body")
	for i := 0; i < body.Fields().Len(); i++ {
		fd := body.Fields().Get(i)
		ev := filled(t, eventDesc, "ev", 0).Interface().(*airlockv1.Event)
		ev.Json = false
		ev.AgentId, ev.CallId = "bot-ä", "c-"+string(fd.Name())
		ev.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(filled(t, fd.Message(), string(fd.Name()), 1)))
		proto3("every field of "+string(fd.Name()), ev)
		bare := &airlockv1.Event{EventId: "bare-" + string(fd.Name())}
		bare.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(dynamicOf(fd.Message())))
		proto3("empty "+string(fd.Name()), bare)
	}
	for i, ev := range wireCorpus(t) {
		proto3(fmt.Sprintf("wire corpus %d %s", i, envelope.TypeOf(ev)), ev)
	}

	// Large, deep and non-ASCII arguments, redacted in every way.
	big := map[string]any{"content": strings.Repeat("line ä\t\"quoted\" \u00e9\u4e2d\U0001F600\n", 3000), "ключ": "значение", "emoji 😀": "🔑",
		"ctl": "\x00\x1f\x7f", "html": "<script>&amp;</script>", "num": 1e-7, "neg": -0.0, "big": 1e300, "int": 9007199254740993.0}
	for i := 0; i < 200; i++ {
		big[fmt.Sprintf("k%03d", i)] = []any{i, fmt.Sprint(i), map[string]any{"deep": []any{nil, true, "x"}}}
	}
	deep := map[string]any{"leaf": "secret"}
	for i := 0; i < 40; i++ {
		if i%2 == 0 {
			deep = map[string]any{"d": deep, "n": i}
		} else {
			deep = map[string]any{"l": []any{i, deep}}
		}
	}
	big["deep"] = deep
	bigArgs, err := structpb.NewStruct(big)
	if err != nil {
		t.Fatal(err)
	}
	call := &airlockv1.ToolCall{CallId: "big", AgentId: "bot", ThreadId: "th", Server: "fs", Tool: "write_file", Arguments: bigArgs, Revision: 3}
	for _, redact := range [][]string{nil, {""}, {"/"}, {"/content"}, {"ключ", "/emoji 😀"}, {"/k007/2/deep/0"}, {"/k007/02"}, {"/deep/l/1/d/l/1/d"}, {"/a~1b", "/~0"}} {
		name := fmt.Sprintf("large arguments, redact %q", redact)
		d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "écrire", RuleId: "r", Risk: airlockv1.Risk_RISK_CRITICAL, Redact: redact, PolicyRevision: "p", DecisionId: "d"}
		base := func(id string) *airlockv1.Event {
			return &airlockv1.Event{EventId: id, AgentId: "bot", CallId: "big", Revision: 3, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "zoë"}}
		}
		r, a, q, p := base("r"), base("a"), base("q"), base("p")
		r.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}
		a.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call, Decision: d}}
		q.Body = &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: d}}
		p.Body = &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: call, Decision: d, OriginalArguments: bigArgs, Edited: true}}
		for _, ev := range []*airlockv1.Event{r, a, q, p} {
			proto3(name+" "+envelope.TypeOf(ev), ev)
		}
	}

	// Bytes the fast path refuses or that do not decode.
	ev := wireCorpus(t)[1]
	data, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	_, _, n := protowire.ConsumeTag(data)
	m := protowire.ConsumeFieldValue(1, protowire.BytesType, data[n:])
	add("envelope field out of order", "airlock.evt.bot.c1.allowed", append(append([]byte{}, data[n+m:]...), data[:n+m]...), nil)
	add("an unknown field", "airlock.evt.bot.c1.allowed", protowire.AppendString(protowire.AppendTag(append([]byte{}, data...), 999, protowire.BytesType), "?"), nil)
	add("a field twice", "airlock.evt.bot.c1.allowed", append(append([]byte{}, data...), data[:n+m]...), nil)
	add("invalid UTF-8 in a string", "airlock.evt.bot.c1.allowed", protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe"), nil)
	add("undecodable bytes", "airlock.evt.bot.c9.requested", []byte{0xff, 0x01, 0x02}, map[string][]string{envelope.HeaderCEID: {"e-bad"}})
	add("undecodable non-UTF-8 bytes", "airlock.evt.bot.c9.requested", []byte("\x0a\x02\xc3"), nil)
	add("undecodable protojson", "airlock.evt.bot.c9.requested", []byte(`{"eventId": 1`), map[string][]string{envelope.HeaderContentType: {envelope.ContentJSON}})
	add("no body, system subject", "airlock.sys.audit.pruned", nil, nil)
	return out
}

// goldenRows builds and chains the corpus as the sink does, once with
// Build and once with an Arena; both must give the same rows.
func goldenRows(t *testing.T) []goldenRow {
	key, err := NewKey([]byte("a fixed audit key for the golden rows, 32+ bytes"))
	if err != nil {
		t.Fatal(err)
	}
	var a Arena
	sealer := key.Sealer()
	prev := GenesisHash
	var out []goldenRow
	for _, c := range goldenCorpus(t) {
		r := Build(c.msg)
		if ra := a.Build(c.msg); len(DifferentColumns(&r, &ra)) > 0 {
			t.Fatalf("%s: the arena's row differs in %v", c.name, DifferentColumns(&r, &ra))
		}
		sealer.Seal(&r, prev)
		prev = r.Hash
		out = append(out, pinned(c.name, r))
	}
	return out
}

// TestRowsAreThePinnedRows: every column, the canonical bytes and the hash
// chain of a corpus covering every event type and odd payloads are the
// ones the build gave before its rewrite (testdata/rows.golden.json), so a
// faster build stores exactly what the old one did and `audit verify` of
// an existing trail still passes.
func TestRowsAreThePinnedRows(t *testing.T) {
	got := goldenRows(t)
	path := filepath.FromSlash(goldenFile)
	if *updateGolden {
		data, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the pinned rows: %v", err)
	}
	var want []goldenRow
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, %d pinned: the corpus changed; pin it again from the implementation before the change", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name {
			t.Fatalf("row %d is %q, pinned %q", i, g.Name, w.Name)
		}
		if d := DifferentColumns(&g.Row, &w.Row); len(d) > 0 {
			t.Errorf("%s: differs in %v\n got %+v\nwant %+v", g.Name, d, g.Row, w.Row)
		}
		if g.PayloadSHA256 != w.PayloadSHA256 {
			t.Errorf("%s: the payload's SHA-256 is %s, pinned %s", g.Name, g.PayloadSHA256, w.PayloadSHA256)
		}
		if g.Row.Hash != w.Row.Hash || g.Row.PrevHash != w.Row.PrevHash {
			t.Errorf("%s: the hash chain differs: got %s after %s, pinned %s after %s", g.Name, g.Row.Hash, g.Row.PrevHash, w.Row.Hash, w.Row.PrevHash)
		}
	}
}
