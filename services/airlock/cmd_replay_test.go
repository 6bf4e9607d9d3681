package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestPolicyReplayReportsTheCallsAChangedRuleWouldFlip(t *testing.T) {
	a := startAuditSink(t)
	deps, dsn := a.deps, a.dsn

	// Record decisions made by the shipped policy.
	ctx := context.Background()
	current, err := decide.LoadDir(ctx, "../../policies")
	if err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(deps.JS, "airlock/policy")
	calls := []struct{ tool, path string }{
		{"read_file", "/a"}, {"read_file", "/b"}, {"list_directory", "/"}, {"read_file", "/c"},
		{"write_file", "/d"}, {"write_file", "/e"}, {"delete_file", "/etc/passwd"},
	}
	for i, c := range calls {
		args, _ := structpb.NewStruct(map[string]any{"path": c.path})
		call := &airlockv1.ToolCall{CallId: fmt.Sprintf("rp-%d", i), AgentId: "bot", Server: "fs", Tool: c.tool, Arguments: args, Revision: 1}
		d, err := current.Evaluate(ctx, call, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pub.Publish(ctx, policy.DecisionEvent(call, d), ""); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.OpenWriter(ctx, dsn) // creates the database if the sink has not yet
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testenv.Eventually(t, 15*time.Second, "7 decisions in ClickHouse", func() bool {
		n, err := st.Count(ctx, store.Filter{})
		return err == nil && n == 7
	})

	// The candidate asks before reading: the read-only rule becomes "ask".
	cand := t.TempDir()
	for _, f := range []string{"airlock.rego", "data.json"} {
		raw, err := os.ReadFile(filepath.Join("../../policies", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "data.json" {
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			for _, r := range doc["airlock"].(map[string]any)["rules"].([]any) {
				if rule := r.(map[string]any); rule["id"] == "read-only" {
					rule["effect"] = "ask"
				}
			}
			raw, _ = json.Marshal(doc)
		}
		if err := os.WriteFile(filepath.Join(cand, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	run := func(args ...string) string {
		cmd := newPolicyReplayCmd(&globals{natsURL: deps.Config.NATS.URL})
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"--policy", cand, "--clickhouse", dsn}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	var rep replay.Report
	if err := json.Unmarshal([]byte(run("--json", "--since", "", "--runtime-rules", "none")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 7 || rep.Changed != 4 || rep.Unchanged != 3 || len(rep.Transitions) != 1 {
		t.Fatalf("report %+v; want 7 replayed, 4 changed (the reads), 3 unchanged", rep)
	}
	tr := rep.Transitions[0]
	if tr.From != "allow" || tr.To != "ask" || tr.Count != 4 || len(tr.Examples) != 4 || tr.Examples[0].BeforeRule != "read-only" {
		t.Fatalf("transition %+v; want allow → ask ×4 from rule read-only", tr)
	}
	for _, ex := range tr.Examples {
		if ex.Tool != "fs__read_file" && ex.Tool != "fs__list_directory" {
			t.Errorf("example %s (%s) should not have changed", ex.Call, ex.Tool)
		}
	}
	if text := run("--runtime-rules", "none"); !strings.Contains(text, "would change: 4") || !strings.Contains(text, "allow → ask: 4 call(s)") || strings.Contains(text, "more (--examples N") {
		t.Fatalf("text report:\n%s", text)
	}
	// Fewer examples than calls: the report says how many it left out.
	if text := run("--runtime-rules", "none", "--examples", "1"); !strings.Contains(text, "allow → ask: 4 call(s)") || !strings.Contains(text, "… and 3 more (--examples N shows more)") {
		t.Fatalf("text report with one example:\n%s", text)
	}

	t.Run("the shipped policy itself changes nothing", func(t *testing.T) {
		cmd := newPolicyReplayCmd(&globals{})
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--policy", "../../policies", "--clickhouse", dsn, "--json", "--runtime-rules", "none", "--grants", "none"})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
		var rep replay.Report
		if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || rep.Changed != 0 || rep.Replayed != 7 {
			t.Fatalf("report %s, %v", out.String(), err)
		}
	})

	// A run-time rule in force decided a call when it was recorded; the
	// candidate changes only the read-only rule, so that call must not
	// show up as changed — unless replay is told to leave run-time rules out.
	t.Run("the candidate decides with the run-time rules in force", func(t *testing.T) {
		trust := &airlockv1.PolicyRule{Id: "trust-w", Priority: 5, Server: "fs", Tool: "write_file", Args: map[string]string{"/path": "/w"}, Effect: "allow", Reason: "a run-time rule"}
		raw, err := pbjson.Marshal(trust)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := deps.JS.KeyValue(ctx, deps.Config.Buckets.Policy)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, policy.RulePrefix+trust.Id, raw); err != nil {
			t.Fatal(err)
		}
		engine, err := policy.NewEngine(ctx, deps)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := policy.New(deps, engine, engine.Serve)
		if err != nil {
			t.Fatal(err)
		}
		testenv.RunService(t, svc)
		withRule, err := decide.NewEvaluator(ctx, mustCode(t), []*airlockv1.PolicyRule{trust}, nil)
		if err != nil {
			t.Fatal(err)
		}
		args, _ := structpb.NewStruct(map[string]any{"path": "/w"})
		call := &airlockv1.ToolCall{CallId: "rp-w", AgentId: "bot", Server: "fs", Tool: "write_file", Arguments: args, Revision: 1}
		d, err := withRule.Evaluate(ctx, call, time.Now())
		if err != nil || d.GetRuleId() != "trust-w" {
			t.Fatalf("the run-time rule did not decide the recorded call: %v %v", d, err)
		}
		if _, err := pub.Publish(ctx, policy.DecisionEvent(call, d), ""); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 15*time.Second, "8 decisions in ClickHouse", func() bool {
			n, err := st.Count(ctx, store.Filter{})
			return err == nil && n == 8
		})
		changed := func(args ...string) int {
			var rep replay.Report
			if err := json.Unmarshal([]byte(run(append([]string{"--json", "--since", ""}, args...)...)), &rep); err != nil {
				t.Fatal(err)
			}
			return rep.Changed
		}
		var now int
		testenv.Eventually(t, 15*time.Second, "the policy service to answer with its run-time rule", func() bool {
			now = changed()
			return now == 4
		})
		if none := changed("--runtime-rules", "none"); none != 5 {
			t.Fatalf("without run-time rules %d calls change, want 5 (the reads and the call the run-time rule allowed)", none)
		}
	})
}

// auditSink is a real embedded NATS and private clickhouse-server with the
// audit sink running, sealing with its own key.
type auditSink struct {
	nats   *testenv.NATS
	deps   svc.Deps
	dsn    string
	key    *record.Key
	keyHex string
}

func startAuditSink(t *testing.T) auditSink {
	t.Helper()
	ch := chtest.Start(t)
	n := testenv.StartNATS(t)
	a := auditSink{nats: n, deps: testenv.Deps(t, testenv.Config(n.URL())), dsn: ch.DSN(t)}
	var err error
	if a.key, a.keyHex, err = record.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	sink, err := audit.New(a.deps, audit.Options{DSN: a.dsn, BatchSize: a.deps.Config.Audit.BatchSize, FlushInterval: 50 * time.Millisecond, Key: a.key})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, sink)
	return a
}

func mustCode(t *testing.T) *decide.Code {
	t.Helper()
	c, err := decide.CodeFromDir("../../policies")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAReplayMarksTheChangesOfRunTimeRules: a change decided now by one of
// the running airlock's run-time rules (one added after the call was
// decided, say) is marked as that, not taken for the candidate's, and the
// report says how to replay the candidate alone.
func TestAReplayMarksTheChangesOfRunTimeRules(t *testing.T) {
	change := replay.Change{Call: "c1", Revision: 1, Tool: "demo__write_file", Agent: "bot",
		Before: "ask", BeforeRule: "write-ask", After: "allow", AfterRule: "trust-demo-writes"}
	rep := replay.Report{Replayed: 5, Changed: 1, Unchanged: 4,
		Transitions: []replay.Transition{{From: "ask", To: "allow", Count: 1, Examples: []replay.Change{change}}}}
	for _, tc := range []struct {
		name    string
		runtime []string
		want    []string
		notWant []string
	}{
		{"a_run_time_rule_decides_it_now", []string{"trust-demo-writes"},
			[]string{"1 run-time rule(s)", "now allow (rule trust-demo-writes, run-time", "was ask (rule write-ask:", "`--runtime-rules none` replays the candidate alone"}, nil},
		{"the_candidates_rule_decides_it_now", nil,
			[]string{"0 run-time rule(s)", "now allow (rule trust-demo-writes:"}, []string{"run-time:", ", run-time", "replays the candidate alone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			printReplay(&out, "candidate", "3f9c0a1b2d4e", tc.runtime, 0, "ClickHouse", rep)
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the report does not say %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("the report says %q:\n%s", w, out.String())
				}
			}
		})
	}
}
