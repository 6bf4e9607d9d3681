package decide

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/proto"
)

// A decision the compiled rules made is read once and copied after: the
// copy must hold every field decisionFromValue sets, and share nothing.
func TestCopiedDocumentFieldsAreAllThatADocumentSets(t *testing.T) {
	doc := ast.MustParseTerm(`{"action": "ask", "reason": "r", "rule_id": "x", "risk": "high", "approvers": ["a"], "quorum": 2,
		"timeout": "10m", "notify": ["n"], "redact": {"/p"}, "escalate_to": ["e"], "escalate_after": 60, "remind_after": "1m",
		"queue_per_thread": true}`)
	d, err := decisionFromValue(doc.Value)
	if err != nil {
		t.Fatal(err)
	}
	c := copyDocumentFields(d)
	if !proto.Equal(c, d) {
		t.Fatalf("copy %v, read %v", c, d)
	}
	c.Approvers[0], c.Timeout.Seconds = "changed", 1
	if d.Approvers[0] != "a" || d.Timeout.Seconds != 600 {
		t.Fatalf("the copy shares its lists or durations: %v", d)
	}
}

// Every decision the compiled rules make, alone or combined, is known read.
func TestTheRulesDecisionsAreKnownRead(t *testing.T) {
	rs, _, err := compileRules(mustTestData(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs.rules {
		o := rs.outcomes[i]
		want, err := decisionFromValue(o.solo.Value)
		if err != nil {
			t.Fatal(err)
		}
		if got := rs.decision(o.solo.Value); !proto.Equal(got, want) {
			t.Errorf("rule %d: known %v, read %v", i, got, want)
		}
	}
	c := callView{agent: "a", server: "demo", tool: "echo", name: "demo__echo"}
	combined := rs.decisionTerm(&c)
	if combined == nil || rs.decision(combined.Value) == nil {
		t.Fatalf("the combined decision for demo__echo is not known read: %v", combined)
	}
	if rs.decision(ast.MustParseTerm(`{"action": "allow"}`).Value) != nil {
		t.Error("a document the rules did not make is taken as known")
	}
}

func mustTestData(t *testing.T) map[string]any {
	t.Helper()
	code, err := DefaultCode()
	if err != nil {
		t.Fatal(err)
	}
	data, err := mergeData(code.Data, BenchRules(20), nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
