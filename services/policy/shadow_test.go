package policy_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/policies"
	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// echoAsksCandidate is the default policy with one change: demo's echo,
// which the policy in force allows, asks a person.
func echoAsksCandidate(t *testing.T) *airlockv1.ShadowStartRequest {
	t.Helper()
	rego, err := fs.ReadFile(policies.Default(), "airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(policies.Default(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	const allow = `"tool": "echo", "effect": "allow"`
	if !strings.Contains(string(data), allow) {
		t.Fatalf("the default data.json no longer has %s: update this test's candidate", allow)
	}
	return &airlockv1.ShadowStartRequest{Modules: map[string]string{"airlock.rego": string(rego)},
		DataJson: strings.Replace(string(data), allow, `"tool": "echo", "effect": "ask"`, 1), Source: "candidate-dir"}
}

// consoleClient is the policy client as the console uses it (sealed with the
// front-end key, so it acts for the person it names).
func consoleClient(t *testing.T, deps svc.Deps) *policyapi.Client {
	t.Helper()
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	return policyapi.New(deps.NC, fk, "console")
}

// shadowSettled waits until the policy service has handled every request
// in the intake and the candidate on each of replicas has decided every
// call offered to it: the sync point before asserting what the candidate
// was not offered (an offer is made while a request is handled, its
// decision and divergence come after, on the candidate's goroutine).
func shadowSettled(t *testing.T, deps svc.Deps, replicas ...*policy.Engine) {
	t.Helper()
	testenv.Settled(t, deps.JS, deps.Config.Intake.Name, policy.Durable, 10*time.Second)
	testenv.Eventually(t, 10*time.Second, "the candidate to decide every call offered to it", func() bool {
		for _, e := range replicas {
			if !e.ShadowIdle() {
				return false
			}
		}
		return true
	})
}

func TestShadowCandidateRecordsDivergencesOnEveryReplicaUntilStoppedAndSurvivesARestart(t *testing.T) {
	// On a replicated stream an allowed call's request and decision are one
	// batch (DecideNow): the candidate is offered those calls too.
	for _, tt := range []struct {
		name string
		cfg  func(t *testing.T) config.Config
	}{
		{"single_server", func(t *testing.T) config.Config { return testenv.Config(testenv.StartNATS(t).URL()) }},
		{"replicated_stream", func(t *testing.T) config.Config { return testenv.StartCluster(t, 3).Config }},
	} {
		t.Run(tt.name, func(t *testing.T) { shadowCandidateRecordsDivergences(t, tt.cfg(t)) })
	}
}

func shadowCandidateRecordsDivergences(t *testing.T, cfg config.Config) {
	a, _ := replica(t, cfg)
	b, deps := replica(t, cfg)
	client := consoleClient(t, deps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}
	// A run-time rule the candidate must see too: without it the candidate
	// would ask about demo writes that the policy in force allows.
	if _, err := client.PutRule(ctx, &airlockv1.PolicyRule{Id: "trust-demo-writes", Priority: 5, Server: "demo", Tool: "write_file", Effect: "allow", Reason: "sandboxed"}, alice); err != nil {
		t.Fatal(err)
	}

	started, err := client.StartShadow(ctx, func() *airlockv1.ShadowStartRequest { r := echoAsksCandidate(t); r.By = alice; return r }())
	if err != nil {
		t.Fatal(err)
	}
	digest := started.GetState().GetCandidateDigest()
	testenv.Eventually(t, 10*time.Second, "both replicas running the candidate", func() bool {
		return digest != "" && a.ShadowCandidate() == digest && b.ShadowCandidate() == digest
	})
	on := testenv.WaitForEvent(t, deps.JS, subject.OfCall(subject.SystemAgent, subject.SystemCall), subject.ShadowChanged, 10*time.Second)
	if sc := on.GetShadowChanged(); !sc.On || sc.CandidateDigest != digest || on.GetActor().GetId() != "alice" || sc.Source != "candidate-dir" {
		t.Fatalf("shadow_changed %v by %v: want on, candidate %s, by alice, from candidate-dir", sc, on.GetActor(), digest)
	}

	// Same decision (a run-time rule allows it either way), then a different one.
	submit(t, deps.JS, "bot", "same1", "demo", "write_file", map[string]any{"path": "/tmp/a"})
	submit(t, deps.JS, "bot", "diff1", "demo", "echo", map[string]any{"text": "hi", "token": "s3cret"})
	for _, c := range []string{"same1", "diff1"} {
		if ev := waitDecision(t, deps.JS, "bot", c); envelope.TypeOf(ev) != subject.Allowed {
			t.Fatalf("live decision of %s: %s, want allowed (the candidate decides nothing)", c, envelope.TypeOf(ev))
		}
	}
	evaluated := func() uint64 { return a.ShadowStats().Evaluated + b.ShadowStats().Evaluated }
	shadowSettled(t, deps, a, b)
	if n := evaluated(); n != 2 {
		t.Fatalf("the candidate decided %d calls, want both", n)
	}
	allDivergences := func() []*airlockv1.ShadowDivergence {
		var out []*airlockv1.ShadowDivergence
		for _, ev := range testenv.Events(t, deps.JS, subject.OfType(subject.ShadowDivergence)) {
			out = append(out, ev.GetShadowDivergence())
		}
		return out
	}
	got := allDivergences()
	if len(got) != 1 {
		t.Fatalf("%d divergences, want 1 (only the echo call differs): %v", len(got), got)
	}
	dv := got[0]
	if dv.CallId != "diff1" || dv.AgentId != "bot" || dv.LiveAction != "allow" || dv.LiveRuleId != "demo-echo" ||
		dv.CandidateAction != "ask" || dv.CandidateRuleId != "demo-echo" || dv.CandidateDigest != digest || dv.Tool != "echo" {
		t.Errorf("divergence %v: want bot/diff1 echo allow by demo-echo live, ask by demo-echo in candidate %s", dv, digest)
	}
	// The agent's own events say nothing of the candidate.
	for _, ev := range testenv.Events(t, deps.JS, subject.OfCall("bot", "diff1")) {
		if envelope.TypeOf(ev) == subject.ShadowDivergence {
			t.Errorf("a divergence was recorded on the agent's call subjects, where the agent sees it")
		}
	}

	// A request the service refuses (same1 again with other content) is
	// never recorded, so the candidate never sees it: nothing an agent sends
	// beside its recorded calls reaches the shadow report. A call recorded
	// after it (diff3, which diverges) shows the candidate was still offered
	// calls; once both are handled and the candidate is idle, the refused
	// one had every chance to be counted.
	seen := evaluated()
	submit(t, deps.JS, "bot", "same1", "demo", "echo", map[string]any{"text": "not what was recorded"})
	testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", "same1"), subject.UnauthorizedAttempt, 10*time.Second)
	submit(t, deps.JS, "bot", "diff3", "demo", "echo", map[string]any{"text": "after the refused one"})
	waitDecision(t, deps.JS, "bot", "diff3")
	shadowSettled(t, deps, a, b)
	if now, dvs := evaluated(), allDivergences(); now != seen+1 || len(dvs) != 2 || dvs[1].CallId != "diff3" {
		t.Errorf("the candidate decided %d more calls and %d divergences are stored (last %v): want 1 more and 2, the refused request never offered, diff3 offered", now-seen, len(dvs), dvs[len(dvs)-1].GetCallId())
	}

	// Off on every replica: no further call is offered to the candidate.
	bob := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"}
	if _, err := client.StopShadow(ctx, bob); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "both replicas to stop", func() bool { return a.ShadowCandidate() == "" && b.ShadowCandidate() == "" })
	before := evaluated()
	submit(t, deps.JS, "bot", "diff2", "demo", "echo", map[string]any{"text": "again"})
	waitDecision(t, deps.JS, "bot", "diff2")
	shadowSettled(t, deps, a, b)
	if after := evaluated(); after != before || len(allDivergences()) != 2 {
		t.Errorf("after stop the candidate decided %d more call(s) and %d divergences are stored, want none more", after-before, len(allDivergences())-2)
	}
	changes := testenv.Events(t, deps.JS, subject.OfType(subject.ShadowChanged))
	if len(changes) != 2 || changes[1].GetShadowChanged().On || changes[1].GetActor().GetId() != "bob" || changes[1].GetShadowChanged().CandidateDigest != digest {
		t.Errorf("shadow_changed events %v: want one per change (two replicas), the second off by bob naming %s", changes, digest)
	}
	if _, err := client.StopShadow(ctx, bob); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("stopping twice: %v, want not_found", err)
	}

	// A restarted replica runs what the bucket says.
	if _, err := client.StartShadow(ctx, func() *airlockv1.ShadowStartRequest { r := echoAsksCandidate(t); r.By = alice; return r }()); err != nil {
		t.Fatal(err)
	}
	restarted, err := policy.NewEngine(ctx, testenv.Deps(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if restarted.ShadowCandidate() != digest {
		t.Errorf("restarted replica runs candidate %q, want %s", restarted.ShadowCandidate(), digest)
	}
}

func TestABrokenCandidateNeverChangesALiveDecision(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	e, deps := replica(t, cfg)
	client := consoleClient(t, deps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := &airlockv1.Actor{Id: "alice"}

	t.Run("one_that_does_not_compile_is_refused", func(t *testing.T) {
		_, err := client.StartShadow(ctx, &airlockv1.ShadowStartRequest{Modules: map[string]string{"x.rego": "package airlock\n\ndecision := {\"action\": \n"}, By: alice})
		if apierr.CodeOf(err) != apierr.InvalidRequest || !strings.Contains(err.Error(), "x.rego") {
			t.Fatalf("start with a broken candidate: %v, want invalid_request naming x.rego", err)
		}
		if e.ShadowCandidate() != "" {
			t.Fatalf("a refused candidate runs in shadow")
		}
	})
	t.Run("one_too_large_is_refused", func(t *testing.T) {
		big := "package airlock\n\n# " + strings.Repeat("x", policy.MaxCandidateBytes) + "\n"
		if _, err := client.StartShadow(ctx, &airlockv1.ShadowStartRequest{Modules: map[string]string{"big.rego": big}, By: alice}); apierr.CodeOf(err) != apierr.InvalidRequest {
			t.Fatalf("start with a too large candidate: %v, want invalid_request", err)
		}
	})
	t.Run("one_slower_than_its_deadline_fails_and_live_calls_are_decided", func(t *testing.T) {
		// Compiles, but would take seconds per call: every evaluation
		// hits the shadow deadline. Were it to finish it would deny.
		slow := `package airlock

slow if {
	some i in numbers.range(1, 4000)
	some j in numbers.range(1, 4000)
	i * j < 0
}

decision := {"action": "deny", "rule_id": "slow", "reason": "slow", "risk": "high", "redact": []} if not slow
`
		if _, err := client.StartShadow(ctx, &airlockv1.ShadowStartRequest{Modules: map[string]string{"slow.rego": slow}, By: alice}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the slow candidate in shadow", func() bool { return e.ShadowCandidate() != "" })
		for _, c := range []string{"s1", "s2", "s3"} {
			submit(t, deps.JS, "bot", c, "demo", "echo", map[string]any{})
		}
		for _, c := range []string{"s1", "s2", "s3"} {
			if ev := waitDecision(t, deps.JS, "bot", c); envelope.TypeOf(ev) != subject.Allowed || decisionOf(ev).RuleId != "demo-echo" {
				t.Fatalf("live decision of %s under a slow candidate: %s by %s, want allowed by demo-echo", c, envelope.TypeOf(ev), decisionOf(ev).RuleId)
			}
		}
		testenv.Eventually(t, 10*time.Second, "the candidate to fail on every call", func() bool { return e.ShadowStats().Failed >= 3 })
		if n := len(testenv.Events(t, deps.JS, subject.OfType(subject.ShadowDivergence))); n != 0 || e.ShadowStats().Evaluated != 0 {
			t.Errorf("a candidate that never finished recorded %d divergence(s) and %d decision(s)", n, e.ShadowStats().Evaluated)
		}
	})
}
