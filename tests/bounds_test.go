package tests

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
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

// Against `airlock dev`, an agent holding its real credential publishes a
// message larger than anything airlock stores from an agent to the cancel
// endpoint (150 of 8 MB once reset the services' connections), and opens
// connection after connection. The server refuses the publish by its size;
// past the 32 connections that once locked every other agent out (16 per
// agent, counted over the account), another agent still connects; and the
// server refuses connections past limits.bus_connections, so they cannot
// take the process's file descriptors — at that bound every new connection
// is refused, another agent's too (the gap ARCHITECTURE.md names).
func TestAnAgentsUseOfTheBusIsBoundedUnderAirlockDev(t *testing.T) {
	const busConnections = 96
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, fmt.Sprintf("limits:\n  bus_connections: %d\n", busConnections))
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	dev.Agent(t, "victim") // dev has two agents, as in the report
	def := config.Default()

	raw := testenv.RawAgent(t, dev.NATSURL, dev.Creds("bot"))
	largest := int(def.Intake.MaxMsgSize)
	fmt.Fprintf(raw, "PUB %s %d\r\n", subject.AgentCancel("bot"), largest+1)
	_, _ = raw.Write(append(make([]byte, largest+1), "\r\n"...)) // the server may close it before the end
	if answer, _ := io.ReadAll(raw); !strings.Contains(string(answer), "Maximum Payload Violation") {
		t.Fatalf("dev's NATS answered %q to a %d-byte publish by agent bot; want it refused (Maximum Payload Violation)", answer, largest+1)
	}
	_ = raw.Close()

	connect := func(agent string) (*nats.Conn, error) {
		pub, kp := testenv.AgentKey(t, dev.Creds(agent))
		nc, err := nats.Connect(dev.NATSURL, nats.Nkey(pub, kp.Sign), nats.NoReconnect())
		if err == nil {
			t.Cleanup(nc.Close)
		}
		return nc, err
	}
	const formerBound = 2 * 16
	for open := 1; ; open++ {
		_, err := connect("bot")
		if open == formerBound+1 {
			if _, verr := connect("victim"); verr != nil {
				t.Fatalf("with bot holding %d connections, victim's was refused: %v; want one agent unable to lock another out below limits.bus_connections", open, verr)
			}
		}
		if err == nil {
			if open > busConnections {
				t.Fatalf("dev's NATS admitted bot's connection %d, past limits.bus_connections (%d)", open, busConnections)
			}
			continue
		}
		// The server answers "maximum connections exceeded" and closes the
		// connection; the client may read that, or find it closed first.
		if open <= formerBound+1 {
			t.Fatalf("bot's connection %d answered %v; want it admitted below limits.bus_connections (%d)", open, err, busConnections)
		}
		if _, verr := connect("victim"); verr == nil {
			t.Fatalf("bot's connection %d was refused (%v), but victim's was admitted: want the server full at limits.bus_connections (%d)", open, err, busConnections)
		}
		break
	}
}
