package tests

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// apprConfig writes a config in which alice and bob review.
func apprConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock.yaml")
	yaml := "approval:\n  groups:\n    reviewers: [alice, bob]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func apprReviewer(id string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: id, Channel: "cli"}
}

// apprWaitPending waits until the approval service holds call as pending.
func apprWaitPending(t *testing.T, api *approvalapi.Client, callID string) *airlockv1.ApprovalRecord {
	t.Helper()
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(t, 20*time.Second, "call "+callID+" to wait for approval", func() bool {
		r, err := api.Get(context.Background(), "bot", callID, 0)
		rec = r
		return err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING
	})
	return rec
}

// Seed 003 C and D, and L, through the real binary: policy asks, the
// approval service refuses the requester, a reviewer rejects and the agent
// gets the reason; a call pending across a restart of every service is
// still decided, and once approved it runs exactly once.
func TestDevApprovalRejectRefusesRequesterAndSurvivesRestart(t *testing.T) {
	dataDir := t.TempDir()
	env := "AIRLOCK_CONFIG=" + apprConfig(t)
	dev := startDev(t, dataDir, 0, "", env)

	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	call := airlock.Call{ID: "rej", Server: "fs", Tool: "write_file", Args: map[string]any{"path": "/etc/hosts"}, OnBehalfOf: "alice"}
	if _, err := agent.Submit(ctx, call); err != nil {
		t.Fatal(err)
	}
	apprWaitPending(t, api, "rej")
	_, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "rej", Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Principal: apprReviewer("alice")})
	if apierr.CodeOf(err) != apierr.NotAuthorized {
		t.Fatalf("the person the call acts for approved it: %v", err)
	}
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "rej", Kind: airlockv1.DecisionKind_DECISION_KIND_REJECT, Reason: "hosts is off limits", Principal: apprReviewer("bob")}); err != nil {
		t.Fatal(err)
	}
	out, err := agent.Await(ctx, "rej")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != airlock.StatusRejected || out.Reason != "hosts is off limits" {
		t.Fatalf("agent got %+v", out)
	}

	if _, err := agent.Submit(ctx, airlock.Call{ID: "kept", Server: "demo", Tool: "write_file", Args: map[string]any{"path": "kept.txt", "content": "kept across a restart"}}); err != nil {
		t.Fatal(err)
	}
	apprWaitPending(t, api, "kept")
	dev.Interrupt(20 * time.Second)

	again := startDev(t, dataDir, dev.natsPort, dev.httpAddr, env)
	api2 := again.API(t)
	apprWaitPending(t, api2, "kept")
	resp, err := api2.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "kept", Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Principal: apprReviewer("bob")})
	if err != nil || !resp.Changed {
		t.Fatalf("approval after restart: %v %v", resp, err)
	}
	// The approval decided after the restart runs the call, once.
	agent2 := again.Agent(t, "bot")
	if out, err := agent2.Await(ctx, "kept"); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("the call approved after the restart ended %+v (%v), want completed", out, err)
	}
	_, js := again.Admin(t)
	if started, completed := testenv.Runs(t, js, "bot", "kept"); started != 1 || completed != 1 {
		t.Errorf("the call approved after the restart started %d and completed %d times, want once each", started, completed)
	}
	if data, err := os.ReadFile(filepath.Join(dataDir, "sandbox", "kept.txt")); err != nil || string(data) != "kept across a restart" {
		t.Errorf("the tool's file holds %q (%v)", data, err)
	}
	again.Interrupt(20 * time.Second)
}

// K (seed 000 "always allow"): a grant with 2 uses created from a pending
// call lets the next two identical calls through without asking; the third asks.
func TestDevStandingGrantWithTwoUses(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+apprConfig(t))
	_, js := dev.Admin(t)
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	args := map[string]any{"path": "/tmp/notes.txt"}
	if _, err := agent.Submit(ctx, airlock.Call{ID: "first", Server: "fs", Tool: "write_file", Args: args}); err != nil {
		t.Fatal(err)
	}
	apprWaitPending(t, api, "first")
	g, err := api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: "bot", FromCallId: "first", By: apprReviewer("alice"),
		Grant: &airlockv1.StandingGrant{UsesLeft: 2, ArgumentGlobs: map[string]string{"/path": "/tmp/*"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"second", "third", "fourth"} {
		if _, err := agent.Submit(ctx, airlock.Call{ID: id, Server: "fs", Tool: "write_file", Args: args}); err != nil {
			t.Fatal(err)
		}
		want := "allowed"
		if i == 2 {
			want = "approval_requested"
		}
		ev := testenv.WaitForEvent(t, js, "airlock.evt.bot."+id+".>", want, 20*time.Second)
		if want == "allowed" && ev.GetAllowed().GetDecision().GetGrantId() != g.GetId() {
			t.Fatalf("call %s was allowed but the decision does not name grant %s: %v", id, g.GetId(), ev.GetAllowed().GetDecision())
		}
	}
}
