package decide_test

import (
	"context"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/policy/policybench"
)

// BenchmarkDecision is one decision with the default policy and 100
// run-time rules, as the service makes it (input, eval, document, digest).
func BenchmarkDecision(b *testing.B) {
	ctx := context.Background()
	code, err := decide.DefaultCode()
	if err != nil {
		b.Fatal(err)
	}
	ev, err := decide.NewEvaluator(ctx, code, decide.BenchRules(100), nil)
	if err != nil {
		b.Fatal(err)
	}
	call := decide.BenchCall()
	now := time.Now()
	if d, err := ev.Evaluate(ctx, call, now); err != nil || d.Action != airlockv1.Action_ACTION_ALLOW {
		b.Fatalf("sample call: %v %v", d, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ev.Evaluate(ctx, call, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionFloor is Evaluate with a policy whose decision is a
// constant (policybench.FloorPolicy): the input, query and document costs
// every decision pays before a rule runs.
func BenchmarkDecisionFloor(b *testing.B) {
	ctx := context.Background()
	code, err := decide.NewCode(map[string]string{"floor.rego": policybench.FloorPolicy}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev, err := decide.NewEvaluator(ctx, code, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	call, now := decide.BenchCall(), time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ev.Evaluate(ctx, call, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOPAFloor is the smallest prepared Rego query, the floor every
// decision pays on this machine: read BenchmarkDecision against it.
func BenchmarkOPAFloor(b *testing.B) {
	pq, err := rego.New(rego.Query("data.x.allow"), rego.Module("x.rego", "package x\n\nallow if input.a == 1\n")).PrepareForEval(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	in := rego.EvalInput(map[string]any{"a": 1})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := pq.Eval(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
