package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent withdraws a call while its request still waits for the policy
// (the policy behind: here its consumer paused). The cancel answered "no
// approval for call …", the hook told its agent no and the MCP gateway
// gave up, and once the policy caught up the call was allowed and ran.
// Through a real `airlock dev`, with the agent's own credential and the
// services' own permissions: the cancel lands, the agent reads it, and the
// policy, resumed, decides nothing and the executor runs nothing.
func TestACallWithdrawnBeforeThePolicyDecidedItNeverRuns(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	_, js := dev.Admin(t)
	def := config.Default()
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A first call, to know the policy serves before it is paused.
	if out, err := bot.Do(ctx, airlock.Call{Server: "demo", Tool: "echo", Args: map[string]any{"text": "warm"}}); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("a first echo: %+v %v", out, err)
	}
	if _, err := js.PauseConsumer(ctx, def.Intake.Name, "policy", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := bot.Submit(ctx, airlock.Call{ID: "gave-up", Server: "demo", Tool: "echo", Args: map[string]any{"text": "late"}}); err != nil {
		t.Fatal(err)
	}
	const reason = "the MCP client gave up on the request"
	if err := bot.Cancel(ctx, "gave-up", reason); err != nil {
		t.Fatalf("withdrawing a call the policy has not decided: %v", err)
	}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	out, err := bot.Await(actx, "gave-up")
	acancel()
	if err != nil || out.Status != airlock.StatusCanceled || out.Reason != reason {
		t.Fatalf("the agent read %+v, %v; want canceled with its reason", out, err)
	}

	if _, err := js.ResumeConsumer(ctx, def.Intake.Name, "policy"); err != nil {
		t.Fatal(err)
	}
	testenv.Settled(t, js, def.Intake.Name, "policy", 30*time.Second)
	// The next call is decided and run: the policy did reach the request.
	if out, err := bot.Do(ctx, airlock.Call{Server: "demo", Tool: "echo", Args: map[string]any{"text": "after"}}); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("a call after the policy resumed: %+v %v", out, err)
	}
	if got := strings.Join(testenv.SubjectTypes(t, js, subject.OfCall("bot", "gave-up")), " "); got != subject.Canceled {
		t.Fatalf("the withdrawn call's events: %s; want only canceled (nothing decided, nothing run)", got)
	}
}
