package main

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestSuggestBenchRecordsAHistoryLargerThanAnAgentsBudget: README's tour
// runs `airlock policy suggest-bench --calls 3000`, more calls of one agent
// than limits.agent_calls_per_minute (600) holds in the minute the history
// takes to record; the bench failed at the ~930th call ("did not decide
// call h935 within 15s: is it running?").
func TestSuggestBenchRecordsAHistoryLargerThanAnAgentsBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runCLI(ctx, t, "policy", "suggest-bench", "--calls", "1200", "--after", "0")
	if err != nil {
		t.Fatalf("suggest-bench --calls 1200: %v\n%s", err, out)
	}
	if !strings.Contains(out, "recorded 1200 calls") {
		t.Fatalf("suggest-bench --calls 1200 did not record 1200 calls:\n%s", out)
	}
}

// TestAHistoryPastItsAgentsBudgetSaysSo: a call the policy refuses over
// its agent's budget (an `invalid` event, or past the refusals only a
// notice that is not stored) is never decided; the history says so at
// once, naming the budget, instead of waiting 15 s to ask whether the
// policy service is running.
func TestAHistoryPastItsAgentsBudgetSaysSo(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Limits.AgentCallsPerMinute = 5
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice"}}
	deps := testenv.Deps(t, cfg)
	runDeciders(t, deps)
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	gen := &historyGen{js: deps.JS, stream: cfg.Stream.Name, approvals: approvalapi.New(deps.NC, fk, "console"), reviewers: []string{"alice"},
		rng: rand.New(rand.NewPCG(25, 1)), prefix: "h"}
	t.Cleanup(gen.stop)
	reads := historyMix()[len(historyMix())-1:] // writer-bot's reads, which the policy allows
	start := time.Now()
	st, err := gen.run(context.Background(), reads, 20)
	took := time.Since(start)
	switch {
	case err == nil:
		t.Fatalf("a history of 20 calls at a budget of 5 a minute recorded %+v, want it refused", st)
	case !strings.Contains(err.Error(), "limits.agent_calls_per_minute") || strings.Contains(err.Error(), "is it running"):
		t.Fatalf("a history past its agent's budget: %v, want it to name limits.agent_calls_per_minute", err)
	case took > 10*time.Second:
		t.Fatalf("a history past its agent's budget said so after %s, want at once", took)
	}
	if st.Allowed == 0 || st.Allowed > 5 {
		t.Fatalf("the history recorded %+v before the refusal, want up to the budget's 5 calls allowed", st)
	}
}
