package decide_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
)

// One evaluator decides many agents' calls at once, with
// canceled and huge evaluations interleaved. Each call must get exactly the
// decision it gets alone from a fresh evaluator: nothing one evaluation
// caches (virtual documents, decoded documents) may reach another's.
func TestConcurrentEvaluationsShareNoState(t *testing.T) {
	ctx := context.Background()
	for _, bindings := range []map[string]string{nil, {"sup": "supervised"}, {"*": "safe"}} {
		t.Run(fmt.Sprint(bindings), func(t *testing.T) {
			rules := append(decide.BenchRules(50),
				&airlockv1.PolicyRule{Id: "allowlist", Priority: 4, Server: "notes", Principals: []string{"alice"}, Effect: "allow", Redact: []string{"/secret"}},
				&airlockv1.PolicyRule{Id: "literal-names", Priority: 8, Pattern: "{notes__write,build__sh,claude__Bash}", Effect: "ask", Risk: "low"},
				&airlockv1.PolicyRule{Id: "make-ok", Priority: 5, Server: "build", Tool: "sh", Commands: map[string]string{"/cmd": "make *"}, Effect: "allow"},
				&airlockv1.PolicyRule{Id: "agent-ci", Priority: 6, Agent: "ci", Effect: "allow", Risk: "low"},
			)
			code := mustDefault(t)
			mk := func() *decide.Evaluator {
				ev, err := decide.NewEvaluator(ctx, code, rules, bindings)
				if err != nil {
					t.Fatal(err)
				}
				return ev
			}
			calls := append(comparisonCalls(), personCommandCalls()...)
			want := make([]string, len(calls))
			for i, c := range calls {
				d, _ := mk().Evaluate(ctx, c, time.Now())
				want[i] = summary(d)
				if i > 20 {
					// A fresh evaluator per call is slow (60 of them were a
					// third of this package's time): the rest from one
					// evaluator used sequentially.
					break
				}
			}
			seq := mk()
			for i, c := range calls {
				d, _ := seq.Evaluate(ctx, c, time.Now())
				if want[i] == "" {
					want[i] = summary(d)
				} else if want[i] != summary(d) {
					t.Fatalf("call %d: sequential %s, fresh %s", i, summary(d), want[i])
				}
			}
			ev := mk()
			big := map[string]any{}
			for k := range 3000 {
				big[fmt.Sprint("k", k)] = map[string]any{"path": "/tmp/x", "command": "make x"}
			}
			bigArgs, _ := structpb.NewStruct(big)
			var wg sync.WaitGroup
			errs := make(chan string, 100)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewSource(int64(w)))
					for range 3 * len(calls) / 8 {
						i := r.Intn(len(calls))
						switch r.Intn(5) {
						case 0:
							cctx, cancel := context.WithCancel(ctx)
							go cancel()
							_, _ = ev.Evaluate(cctx, calls[r.Intn(len(calls))], time.Now())
						case 1:
							c := proto.Clone(calls[r.Intn(len(calls))]).(*airlockv1.ToolCall)
							c.Arguments = bigArgs
							_, _ = ev.Evaluate(ctx, c, time.Now())
						}
						d, _ := ev.Evaluate(ctx, calls[i], time.Now())
						if got := summary(d); got != want[i] {
							select {
							case errs <- fmt.Sprintf("call %d (%s %s__%s for %q): concurrent %s, alone %s", i, calls[i].AgentId, calls[i].Server, calls[i].Tool, calls[i].OnBehalfOf, got, want[i]):
							default:
							}
						}
						// A caller that edits its decision must not edit the next one's.
						d.Approvers = append(d.Approvers[:0], "mallory")
						d.Redact = append(d.Redact[:0], "x")
						if d.Timeout != nil {
							d.Timeout.Seconds = 1
						}
						d.Reason = "tampered"
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

func summary(d *airlockv1.Decision) string {
	return fmt.Sprintf("%v|%s|%s|%v|%v|%v|%v|%d|%v|%v", d.Action, d.RuleId, d.Reason, d.Risk, d.Redact, d.Approvers, d.Notify, d.Quorum, d.Timeout.AsDuration(), d.QueuePerThread)
}

// Tool names that differ from a rule's exact names only in case,
// Unicode look-alikes, separators or escapes must be decided by the
// compiled rules exactly as the plain policy's globs decide them.
func TestExactNamesDecideLikeGlobs(t *testing.T) {
	ctx := context.Background()
	rules := []*airlockv1.PolicyRule{
		{Id: "deny-literal", Priority: 1, Pattern: "{claude__Bash,fs__rm_rf,srv__ｔool,a.b__c-d}", Effect: "deny", Risk: "high"},
		{Id: "ask-literal", Priority: 2, Pattern: "mail__send", Effect: "ask"},
		{Id: "deny-initial", Priority: 3, ToolPattern: "Ωmega*", Effect: "deny"},
		{Id: "deny-words", Priority: 4, ToolWords: []string{"delete", "i̇nject"}, Effect: "deny"},
		{Id: "allow-rest", Priority: 100, Effect: "allow"},
	}
	ev, err := decide.NewEvaluator(ctx, mustDefault(t), rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	mods := ev.Modules()
	delete(mods, decide.GeneratedModule)
	var opts []func(*rego.Rego)
	for n, m := range mods {
		opts = append(opts, rego.Module(n, m))
	}
	plain, err := rego.New(append(opts, rego.Query(decide.Query), rego.Store(storeOf(t, ev.Data())))...).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := [][2]string{
		{"claude", "Bash"}, {"claude", "bash"}, {"Claude", "Bash"}, {"claude", "BASH"}, {"claude", "Bash "}, {"claude", " Bash"},
		{"claude", "Bash\u200b"}, {"claude", "Ｂash"}, {"claude_", "_Bash"}, {"claude_", "Bash"}, {"claud", "e__Bash"}, {"claude__", "Bash"},
		{"claude", "_Bash"}, {"fs", "rm_rf"}, {"fs", "rm\\_rf"}, {"fs", "rm-rf"}, {"srv", "ｔool"}, {"srv", "tool"}, {"a.b", "c-d"},
		{"a", "b__c-d"}, {"mail", "send"}, {"mail", "Send"}, {"mail", "send\x00"}, {"mail", "send\n"}, {"ma", "il__send"},
		{"x", "Ωmega_1"}, {"x", "ωmega"}, {"x", "\xceΩmega"}, {"x", "deleteFile"}, {"x", "DELETE"}, {"x", "İnject"}, {"x", "i̇nject_x"},
		{"x", "ＤeleteFile"}, {"x", "de\u00adlete"},
	}
	for _, n := range names {
		c := &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: n[0], Tool: n[1], Arguments: &structpb.Struct{}}
		doc, err := ev.DocumentForTest(ctx, c)
		if err != nil {
			t.Fatalf("%q: %v", n, err)
		}
		in, _ := decide.Input(c, time.Now())
		rs, err := plain.Eval(ctx, rego.EvalInput(in))
		if err != nil || len(rs) == 0 {
			t.Fatalf("%q plain: %v", n, err)
		}
		pj, _ := json.Marshal(rs[0].Expressions[0].Value)
		cj, _ := json.Marshal(doc)
		if string(pj) != string(cj) {
			t.Errorf("%q: compiled %s, plain %s", n, cj, pj)
		}
	}
}
