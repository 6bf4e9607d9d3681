package slack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// TestTheCardSaysWhetherTheMCPClientWaits: a pending call's card says
// whether the agent's MCP client still waits for the outcome, as the
// gateway records it in the client-waits bucket, and a decided card no
// longer does.
func TestTheCardSaysWhetherTheMCPClientWaits(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	f := startFakeSlack(t)
	deps := config(t, n.URL(), f)
	notifier, err := airlockslack.NewNotifier(context.Background(), deps, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clients, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	hold := func(rec *airlockv1.ApprovalRecord, until time.Time) {
		t.Helper()
		if err := clients.Lease("bot-1", rec.GetCall().GetCallId(), "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	gone := time.Date(2026, 11, 20, 14, 7, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		hold    func(rec *airlockv1.ApprovalRecord)
		want    string
		wantNot string
	}{
		{"no_gateway_client_ever_waited", func(*airlockv1.ApprovalRecord) {}, "", "MCP client"},
		{"a_client_waits", func(rec *airlockv1.ApprovalRecord) { hold(rec, time.Now().Add(time.Minute)) },
			"The agent's MCP client is waiting for the outcome.", "stopped waiting"},
		{"the_client_went_away", func(rec *airlockv1.ApprovalRecord) { hold(rec, gone) },
			"The agent's MCP client stopped waiting at 14:07 UTC; it gets the outcome when it calls the tool again (gateway endpoint claude).", "is waiting"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRecord(t, "call_client_"+tt.name)
			tt.hold(rec)
			ref, err := notifier.Announce(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			text := cardStrings(t, f.next(t, "chat.postMessage").Blocks())
			if tt.want != "" && !strings.Contains(text, tt.want) || strings.Contains(text, tt.wantNot) {
				t.Fatalf("the card should say %q and not %q:\n%s", tt.want, tt.wantNot, text)
			}
			// Redrawn while pending, it says it again; decided, no longer.
			if err := notifier.Update(ctx, rec, ref); err != nil {
				t.Fatal(err)
			}
			if text := cardStrings(t, f.next(t, "chat.update").Blocks()); tt.want != "" && !strings.Contains(text, tt.want) {
				t.Fatalf("the redrawn card lacks %q:\n%s", tt.want, text)
			}
			done := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			done.State = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
			if err := notifier.Update(ctx, done, ref); err != nil {
				t.Fatal(err)
			}
			if text := cardStrings(t, f.next(t, "chat.update").Blocks()); strings.Contains(text, "MCP client") {
				t.Fatalf("a decided card still speaks of the client:\n%s", text)
			}
		})
	}
}
