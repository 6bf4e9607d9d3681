package main

import (
	"context"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestConsoleAuditRowsSayWhatKindOfActorActed: the audit page notes an
// agent's own cancel "(agent)" from the row's actor type, so the adapter
// must carry it from the audit's rows.
func TestConsoleAuditRowsSayWhatKindOfActorActed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ev := &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"},
		Body: &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{Reason: "the user changed their mind"}}}
	if _, err := deps.Publisher("test").Publish(ctx, ev, ""); err != nil {
		t.Fatal(err)
	}
	rows, err := newConsoleAudit(deps).Search(ctx, console.AuditQuery{Agent: "bot", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Type != "canceled" || rows[0].Actor != "bot" || rows[0].ActorType != "agent" {
		t.Fatalf("rows %+v, want the agent's cancel with actor type agent", rows)
	}
}
