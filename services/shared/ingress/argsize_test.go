package ingress

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// storedArgumentsSize is what raw's arguments add to a call as the intake
// measures it (proto.Size of the ToolCall), the oracle encodedAtLeast may
// never pass.
func storedArgumentsSize(t *testing.T, raw string) int {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return proto.Size(&airlockv1.ToolCall{Arguments: s})
}

func TestEncodedAtLeastNeverPassesTheStoredSize(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, raw := range []string{
		`{}`, `{"a":1}`, `{"a":null,"b":true,"c":false,"d":""}`, `{"a":[0,0,0,0,0,0]}`, `{"a":[-1.5e-3, 2E+10, 0.25]}`,
		`{"s":"\u00e9\ud83d\ude00\n\t\"\\\/"}`, `{"é":"日本語", "\u0041":"ok"}`, `{"a":{"b":{"c":[[],[{}],{"d":[null]}]}}}`,
		`{"long":"` + long + `","list":["` + long + `","` + long + `"]}`,
		"{ \"a\" :\n [ 1 , 2 ,\t3 ] }", `{"a":"[0,0,0] {not: json}"}`,
	} {
		least, _ := encodedAtLeast([]byte(raw))
		if stored := storedArgumentsSize(t, raw); least > stored {
			t.Errorf("%s: at least %d bytes, but stored in %d", raw, least, stored)
		}
	}
}

func TestArgumentsFit(t *testing.T) {
	zeros := func(n int) string { return `{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n), ",") + `]}` }
	for _, c := range []struct {
		name, raw string
		max       int
		refused   bool
	}{
		{"empty", `{}`, 16, false},
		{"none", ``, 16, false},
		{"a small call", `{"path":"/tmp/a"}`, 1024, false},
		{"a list of numbers past the limit once encoded, though its JSON is under it", zeros(1000), 4096, true},
		{"the same list under the limit", zeros(300), 4096, false},
		{"text of its size", `{"t":"` + strings.Repeat("x", 4000) + `"}`, 4096, false},
		{"text past it", `{"t":"` + strings.Repeat("x", 4100) + `"}`, 4096, true},
		{"escapes count as what they stand for", `{"t":"` + strings.Repeat(`\u0041`, 1000) + `"}`, 4096, false},
		{"whitespace counts nothing", `{"t":` + strings.Repeat(" ", 10000) + `1}`, 64, false},
		{"a quote inside text ends nothing", `{"t":"\"` + strings.Repeat(`,1`, 1000) + `"}`, 4096, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ArgumentsFit([]byte(c.raw), c.max)
			if (r != nil) != c.refused {
				t.Fatalf("refused %v, want %v (%v)", r != nil, c.refused, r)
			}
			if r != nil && (!strings.Contains(r.Reason, "limits.max_request_bytes") || !strings.Contains(r.Reason, "by reference")) {
				t.Fatalf("the refusal %q should name the limit and what to do", r.Reason)
			}
			if c.raw != "" && !c.refused {
				if least, _ := encodedAtLeast([]byte(c.raw)); least > storedArgumentsSize(t, c.raw) {
					t.Fatalf("at least %d bytes is more than stored", least)
				}
			}
		})
	}
}

// The bound is close for the shape R9 sent: a list of zeros.
func TestEncodedAtLeastIsTightForAListOfNumbers(t *testing.T) {
	raw := `{"a":[` + strings.TrimSuffix(strings.Repeat("0,", 10000), ",") + `]}`
	least, values := encodedAtLeast([]byte(raw))
	stored := storedArgumentsSize(t, raw)
	if values != 10003 || least < stored*9/10 {
		t.Fatalf("%d values, at least %d bytes, stored in %d: the bound should be within 10%%", values, least, stored)
	}
}
