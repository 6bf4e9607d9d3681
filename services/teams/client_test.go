package teams_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// TestTheCardSaysWhetherTheMCPClientWaits: a pending call's card says
// whether the agent's MCP client still waits for the outcome, as the
// gateway records it, and a decided card no longer does.
func TestTheCardSaysWhetherTheMCPClientWaits(t *testing.T) {
	n := testenv.StartNATS(t)
	f := startFakeConnector(t)
	deps := config(t, n.URL(), f, nil)
	notifier, err := airlockteams.NewNotifier(context.Background(), deps)
	must(t, err)
	ctx := context.Background()
	clients, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	must(t, err)
	for _, tt := range []struct {
		name, want, wantNot string
		until               time.Time
	}{
		{"a_client_waits", "The agent's MCP client is waiting for the outcome.", "stopped waiting", time.Now().Add(time.Minute)},
		{"the_client_went_away", "The agent's MCP client stopped waiting at 14:07 UTC; it gets the outcome when it calls the tool again (gateway endpoint claude).", "is waiting",
			time.Date(2026, 11, 20, 14, 7, 0, 0, time.UTC)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRecord(t, "call_client_"+tt.name)
			must(t, clients.Lease("bot-1", rec.GetCall().GetCallId(), "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: tt.until}))
			ref, err := notifier.Announce(ctx, rec)
			must(t, err)
			if card := f.next(t, "post").Card(t); !strings.Contains(card, tt.want) || strings.Contains(card, tt.wantNot) {
				t.Fatalf("the card should say %q and not %q:\n%s", tt.want, tt.wantNot, card)
			}
			done := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			done.State = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
			must(t, notifier.Update(ctx, done, ref))
			if card := f.next(t, "update").Card(t); strings.Contains(card, "MCP client") {
				t.Fatalf("a decided card still speaks of the client:\n%s", card)
			}
		})
	}
}
