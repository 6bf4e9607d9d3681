package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
)

// The candidate in shadow counts the grant whose last use the live
// decision spent as still usable, in a copy of its own: the grants in force
// are never modified, and grant changes put in force meanwhile (the watcher
// replacing the snapshot) neither wait for it nor race with it (-race).
func TestTheCandidateCountsAGrantSpentLiveWithoutChangingTheGrantsInForce(t *testing.T) {
	ctx := context.Background()
	ev, err := decide.LoadDefault(ctx)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/home/me/notes.txt", "content": "x"})
	call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "write_file", Arguments: args}
	now := time.Now()
	asked, _ := ev.Evaluate(ctx, call, now)
	if asked.Action != airlockv1.Action_ACTION_ASK {
		t.Fatalf("the default policy decides %v for %s__%s; this test needs an ask", asked.Action, call.Server, call.Tool)
	}
	spent := &airlockv1.StandingGrant{Id: "g1", AgentId: "bot", Server: "demo", Tool: "write_file", RuleId: asked.RuleId,
		MaxRisk: airlockv1.Risk_RISK_CRITICAL, LimitedUses: true, UsesLeft: 0}
	e := &Engine{grantWork: map[string]*airlockv1.StandingGrant{"g1": spent}}
	e.publishGrants()
	candidate := e.candidateDecider(ev)
	liveUsedIt := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, GrantId: "g1"}

	changed := make(chan struct{})
	go func() {
		defer close(changed)
		for i := range 200 {
			e.grantWork[fmt.Sprint("other-", i)] = &airlockv1.StandingGrant{Id: fmt.Sprint("other-", i), AgentId: "someone-else"}
			e.publishGrants()
		}
	}()
	for i := range 200 {
		d, err := candidate(ctx, call, liveUsedIt, now)
		if err != nil || d.Action != airlockv1.Action_ACTION_ALLOW || d.GrantId != "g1" {
			t.Fatalf("decision %d: %v %q (%v); want allow by grant g1, whose last use the live decision spent", i, d.GetAction(), d.GetGrantId(), err)
		}
	}
	<-changed
	if g := e.grantSnapshot()["g1"]; g != spent || g.UsesLeft != 0 || len(e.grantSnapshot()) != 201 {
		t.Errorf("grants in force after the candidate decided: g1 %v (the same grant, no use left, wanted), %d grants (201 wanted)", g, len(e.grantSnapshot()))
	}
	// Unless the live decision spent it, a grant with no use left answers nothing.
	if d, _ := candidate(ctx, call, asked, now); d.Action != airlockv1.Action_ACTION_ASK {
		t.Errorf("without the live decision's grant the candidate decides %v, want ask", d.Action)
	}
}
