package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Issue 22: one agent submitted 600 calls of 200 KB each, every one waiting
// for a person; all were accepted and held, and the approval service and
// console grew by gigabytes. An agent keeps only its share of calls
// waiting for a person (approval.max_pending_per_agent, 100 by default):
// past it a call is canceled at once with a sentence the agent reads, and
// other agents' calls still reach reviewers.
func TestAnAgentsFloodOfPendingCallsStopsAtItsShare(t *testing.T) {
	p := startProdLayout(t, "bot", "evil")
	url := p.nats.Server.URL()
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	api := p.frontend(t)
	share := config.Default().Approval.MaxPendingPerAgent
	const flood = 600

	content := strings.Repeat("x", 200<<10)
	for i := range flood {
		evil.mustSubmit(airlock.Call{ID: fmt.Sprintf("flood-%d", i), Tool: writeTool, Args: map[string]any{"path": fmt.Sprintf("f%d.txt", i), "content": content}})
	}
	var canceled []*airlockv1.ApprovalRecord
	testenv.Eventually(t, 120*time.Second, fmt.Sprintf("%d of evil's calls pending and %d canceled", share, flood-share), func() bool {
		canceled = listAll(t, api, "evil", airlockv1.ApprovalState_APPROVAL_STATE_CANCELED)
		return len(listAll(t, api, "evil", pendingState)) == share && len(canceled) == flood-share
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := evil.client.Await(ctx, canceled[0].GetCall().GetCallId())
	if err != nil || out.Status != airlock.StatusCanceled || !strings.Contains(out.Reason, "approval.max_pending_per_agent") {
		t.Fatalf("the agent read %q (%q, %v): want canceled, saying it is over its share of pending calls", out.Status, out.Reason, err)
	}
	waitApproval(t, api, "bot", bot.mustSubmit(airlock.Call{Tool: writeTool, Args: map[string]any{"path": "b.txt", "content": "b"}}), 1, pendingState)
}

// listAll pages through the approval service's list of agent's records in state.
func listAll(t *testing.T, api *approvalapi.Client, agent string, st airlockv1.ApprovalState) []*airlockv1.ApprovalRecord {
	t.Helper()
	var out []*airlockv1.ApprovalRecord
	req := &airlockv1.ListRequest{AgentId: agent, States: []airlockv1.ApprovalState{st}}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := api.List(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("list %s's %v calls: %v", agent, st, err)
		}
		out = append(out, resp.GetRecords()...)
		if resp.GetNextPageToken() == "" {
			return out
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
