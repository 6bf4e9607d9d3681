package canon

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/pbwire"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDigestIgnoresKeyOrderButNotValues(t *testing.T) {
	a := mustStruct(t, map[string]any{"path": "/tmp/x", "mode": 1, "nested": map[string]any{"b": 2, "a": 1}})
	b := mustStruct(t, map[string]any{"nested": map[string]any{"a": 1, "b": 2}, "mode": 1.0, "path": "/tmp/x"})
	c := mustStruct(t, map[string]any{"path": "/tmp/y", "mode": 1, "nested": map[string]any{"a": 1, "b": 2}})
	da, _ := Digest(a)
	db, _ := Digest(b)
	dc, _ := Digest(c)
	if da != db {
		t.Fatalf("same arguments in another order digest differently: %s vs %s", da, db)
	}
	if da == dc {
		t.Fatal("different arguments have the same digest")
	}
}

func TestNilIsEmptyObject(t *testing.T) {
	b, err := JSON(nil)
	if err != nil || string(b) != "{}" {
		t.Fatalf("JSON(nil) = %q, %v", b, err)
	}
	d1, _ := Digest(nil)
	d2, _ := Digest(&structpb.Struct{})
	if d1 != d2 {
		t.Fatal("nil and empty arguments differ")
	}
}

// Digests recorded by earlier releases were of encoding/json's bytes for
// args.AsMap(): the direct encoder must write exactly those bytes.
func TestJSONIsWhatEncodingJSONWritesForTheMap(t *testing.T) {
	for name, args := range map[string]map[string]any{
		"empty":             {},
		"plain":             {"path": "/tmp/x", "encoding": "utf-8"},
		"keys sort by byte": {"b": 1, "a": 2, "B": 3, "é": 4, "a\x00": 5, "aa": 6},
		"numbers":           {"int": 3, "neg": -2.5, "tiny": 1e-7, "small": 0.000001, "big": 1e21, "just under": 1e20, "pi": 3.141592653589793, "zero": 0, "negzero": -0.0, "max": 1.7976931348623157e308, "min": 5e-324, "neg tiny": -1.5e-10},
		"escaped strings":   {"html": "<a href=\"x\">&</a>", "lt": "a<b", "gt": "a>b", "amp": "a&b", "ctl": "tab\there\nnew\x01\b\f\x7f\r", "unicode": "héllo ☃ \u2028 \u2029", "slash": `back\slash /`},
		"nesting":           {"list": []any{1, "two", nil, true, false, []any{}, map[string]any{}}, "obj": map[string]any{"z": map[string]any{"y": []any{map[string]any{"x": "<>"}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			st := mustStruct(t, args)
			if name == "escaped strings" { // NewStruct refuses invalid UTF-8; a decoded message may still hold it
				st.Fields["bad utf8 \xff"] = structpb.NewStringValue("\xff\xfe")
			}
			want, err := json.Marshal(st.AsMap())
			if err != nil {
				t.Fatal(err)
			}
			got, err := JSON(st)
			if err != nil || string(got) != string(want) {
				t.Fatalf("JSON = %s (%v), encoding/json writes %s", got, err, want)
			}
		})
	}
}

func TestNonFiniteNumbersAreRefused(t *testing.T) {
	for name, f := range map[string]float64{"NaN": math.NaN(), "+Inf": math.Inf(1), "-Inf": math.Inf(-1)} {
		t.Run(name, func(t *testing.T) {
			st := &structpb.Struct{Fields: map[string]*structpb.Value{"n": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(f)}})}}
			if _, err := Digest(st); err == nil {
				t.Fatalf("a digest of %v was computed", f)
			}
		})
	}
}

// The audit sink digests arguments from their protobuf bytes: the digest is
// Digest's, whatever the arguments hold; bytes it cannot vouch for are left
// to Digest, and a non-finite number has no digest there either.
func TestDigestWireIsDigestOfTheDecodedStruct(t *testing.T) {
	for name, args := range map[string]map[string]any{
		"empty":   {},
		"strings": {"s": "<a href='x'>&amp;</a>\u2028\u2029\b\f\x00\x1f\"\\/é😀", "": "empty key", "B": "upper"},
		"numbers": {"n": []any{0.0, -0.0, 1e-7, 1e-6, 123456789012345678901.0, 1e21, 5e-324, 1.5, -2, 1e20}},
		"nesting": {"nested": map[string]any{"z": nil, "a": []any{map[string]any{"b": true}, false, []any{}}}},
		"many":    {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "j": 10, "k": 11, "l": 12, "m": 13, "n": 14, "o": 15, "p": 16, "q": 17},
	} {
		t.Run(name, func(t *testing.T) {
			st := mustStruct(t, args)
			data, err := proto.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Digest(st)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := DigestWire(data); !ok || got != want {
				t.Fatalf("DigestWire = %s (ok %v), Digest = %s", got, ok, want)
			}
			if got, ok := AppendDigestWire([]byte("kept,"), data); !ok || string(got) != "kept,"+want {
				t.Fatalf("AppendDigestWire = %s (ok %v), want kept,%s", got, ok, want)
			}
		})
	}
	t.Run("nested to the wire readers' depth and past it", func(t *testing.T) {
		for _, depth := range []int{pbwire.MaxDepth, pbwire.MaxDepth + 1} {
			v := structpb.NewStringValue("bottom")
			for range depth - 1 {
				v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"k": v}})
			}
			s := &structpb.Struct{Fields: map[string]*structpb.Value{"k": v}}
			data, _ := proto.Marshal(s)
			want, err := Digest(s)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := DigestWire(data)
			if ok != (depth <= pbwire.MaxDepth) || ok && got != want {
				t.Fatalf("%d deep: DigestWire = %s (ok %v), Digest = %s", depth, got, ok, want)
			}
		}
	})
	t.Run("non-finite", func(t *testing.T) {
		data, _ := proto.Marshal(&structpb.Struct{Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(math.Inf(1))}})
		if got, ok := DigestWire(data); !ok || got != "" {
			t.Fatalf("DigestWire = %q (ok %v), want no digest", got, ok)
		}
		if got, ok := AppendDigestWire([]byte("kept,"), data); !ok || string(got) != "kept," {
			t.Fatalf("AppendDigestWire = %q (ok %v), want nothing appended", got, ok)
		}
	})
	entry := func(key string, val []byte) []byte {
		e := protowire.AppendTag(nil, 1, protowire.BytesType)
		e = protowire.AppendString(e, key)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendBytes(e, val)
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), e)
	}
	str := func(s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), s)
	}
	twice := func(key string, vals ...[]byte) []byte { // one entry naming several values
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		for _, v := range vals {
			e = protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), v)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), e)
	}
	emptyStruct := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), nil)
	for name, data := range map[string][]byte{
		"a key twice":                append(entry("k", str("a")), entry("k", str("b"))...),
		"a value twice in one entry": twice("k", str("a"), emptyStruct),
		"invalid utf8":               entry("k", str("\xff")),
		"truncated":                  entry("k", str("abc"))[:5],
		"wrong field":                protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1),
	} {
		t.Run(name, func(t *testing.T) {
			if got, ok := DigestWire(data); ok {
				t.Fatalf("DigestWire vouched for %x: %s", data, got)
			}
		})
	}
}

// Every ASCII byte and the runes encoding/json treats specially are
// escaped exactly as encoding/json escapes them.
func TestStringsEncodeAsEncodingJSONDoes(t *testing.T) {
	var all []string
	for c := range 128 {
		all = append(all, "a"+string(rune(c))+"b")
	}
	all = append(all, "\u2028", "\u2029", "\xff", "é\xc3", "😀", "\ufffd")
	for _, v := range all {
		want, _ := json.Marshal(v)
		got, err := appendString(nil, v)
		if err != nil || string(got) != string(want) {
			t.Errorf("%q: %s, encoding/json writes %s", v, got, want)
		}
	}
}
