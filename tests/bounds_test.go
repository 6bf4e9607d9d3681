package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
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
	// evil's budget at the policy's intake
	// (limits.agent_request_bytes_per_minute), which services/policy
	// TestOneAgentCannotFillTheEventsStream holds, and its byte share of
	// the approvals bucket (approval.max_bytes_per_agent), which
	// services/approval
	// TestAnAgentFloodingTheApprovalsBucketIsRefusedAtItsShareWhileOthersStillAsk
	// holds, are raised out of the way: here the approval service's share
	// of waiting calls is what is tested.
	p := startProdLayoutWith(t, "dana", "  max_bytes_per_agent: 536870912\n", "limits:\n  agent_request_bytes_per_minute: 1073741824\n  agent_calls_per_minute: 100000\n", "bot", "evil")
	url := p.nats.Server.URL()
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	api := p.frontend(t)
	share := config.Default().Approval.MaxPendingPerAgent
	// As many as the intake holds of one agent at once
	// (intake.max_pending_per_agent), so that none is refused there
	// whatever the policy's pace.
	flood := int(config.Default().Intake.MaxPendingPerAgent)
	if flood <= share {
		t.Fatalf("setup: a flood of %d calls is within approval.max_pending_per_agent (%d)", flood, share)
	}

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
// connection after connection. The server refuses the publish by its size,
// and bot's connections past limits.agent_connections, which `airlock
// call` then names; another agent — added while dev runs, so its account
// came with a reload — still connects and its call completes, and a
// service's user still connects, as a service reconnecting does. Before
// every agent had an account of its own, bot could open connections up to
// limits.bus_connections, and there every new connection was refused,
// other agents' and services' alike.
func TestAnAgentsUseOfTheBusIsBoundedUnderAirlockDev(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	victim := dev.Agent(t, "victim") // added while dev runs
	def := config.Default()
	bound := def.Limits.AgentConnections

	raw := testenv.RawAgent(t, dev.NATSURL, dev.Creds("bot"))
	largest := natsauth.AgentLimits(def).MaxPayload
	fmt.Fprintf(raw, "PUB %s %d\r\n", subject.AgentCancel("bot"), largest+1)
	_, _ = raw.Write(append(make([]byte, largest+1), "\r\n"...)) // the server may close it before the end
	if answer, _ := io.ReadAll(raw); !strings.Contains(string(answer), "Maximum Payload Violation") {
		t.Fatalf("dev's NATS answered %q to a %d-byte publish by agent bot; want it refused (Maximum Payload Violation)", answer, largest+1)
	}
	_ = raw.Close()

	bot, err := natsauth.ReadCredential(dev.Creds("bot"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for open := 1; open <= bound; open++ {
		nc, err := airlock.Dial(ctx, bot, dev.NATSURL)
		if err != nil {
			t.Fatalf("bot's connection %d of %d (limits.agent_connections) was refused: %v", open, bound, err)
		}
		t.Cleanup(nc.Close)
	}
	if nc, err := airlock.Dial(ctx, bot, dev.NATSURL); err == nil {
		nc.Close()
		t.Fatalf("dev's NATS admitted bot's connection %d, past limits.agent_connections (%d): one agent could hold every connection up to limits.bus_connections and lock out every other agent and service", bound+1, bound)
	}
	if _, code, stderr := airlockCall(t, dev, "--tool", "demo__echo", "--args", `{"text":"one more"}`); code == 0 || !strings.Contains(stderr, "limits.agent_connections") {
		t.Fatalf("airlock call as bot, at its bound: exit %d, %q; want it refused with a sentence naming limits.agent_connections", code, stderr)
	}

	out, err := victim.Do(ctx, airlock.Call{Tool: "demo__echo", Args: map[string]any{"text": "still here"}})
	if err != nil || out.Status != airlock.StatusCompleted || !strings.Contains(string(out.Result), "still here") {
		t.Fatalf("with bot at its bound, victim's call: %+v, %v; want it completed", out, err)
	}
	gateway, err := nats.NkeyOptionFromSeed(natsauth.Dev{DataDir: dev.DataDir}.SeedFile(natsauth.RoleGateway))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(dev.NATSURL, gateway, nats.NoReconnect())
	if err != nil {
		t.Fatalf("with bot at its bound, the gateway's service user was refused a connection: %v", err)
	}
	nc.Close()

	// One connection awaits more calls waiting for a person than it may
	// hold subscriptions: the SDK follows them all over one (R9 F2: with a
	// subscription per awaited call, limits.agent_subscriptions had to be
	// 512, and the awaits past it heard nothing).
	admin := adminToken(t, dev)
	waiting := def.Limits.AgentSubscriptions + 8
	dctx, dcancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer dcancel()
	cred, err := natsauth.ReadCredential(dev.Creds("victim"))
	if err != nil {
		t.Fatal(err)
	}
	vnc, err := airlock.Dial(dctx, cred, dev.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer vnc.Close()
	// A subscription past the bound is refused with an error on the
	// connection; the SDK's periodic re-read would still end the call.
	refused := make(chan error, 1)
	vnc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case refused <- err:
		default:
		}
	})
	victim, err = airlock.New(vnc, "victim")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan string, waiting)
	for i := range waiting {
		id := fmt.Sprintf("many-%d", i)
		go func() {
			out, err := victim.Do(dctx, airlock.Call{ID: id, Tool: "demo__write_file", Args: map[string]any{"path": id + ".txt", "content": "x"}})
			if err != nil || out.Status != airlock.StatusCompleted {
				ended <- fmt.Sprintf("%s: %+v, %v", id, out, err)
				return
			}
			ended <- ""
		}()
	}
	for i := range waiting {
		id := fmt.Sprintf("many-%d", i)
		testenv.Eventually(t, 30*time.Second, "victim's call "+id+" approved", func() bool {
			status, _ := apiPost(t, dev.HTTPURL+"/api/v1/approvals/victim/"+id+"/approve", admin, `{"revision":1}`)
			return status == http.StatusOK
		})
	}
	for range waiting {
		if failed := <-ended; failed != "" {
			t.Errorf("victim awaits %d calls on one connection (limits.agent_subscriptions %d); a call approved did not complete: %s", waiting, def.Limits.AgentSubscriptions, failed)
		}
	}
	select {
	case err := <-refused:
		t.Errorf("victim awaiting %d calls on one connection was refused by the server: %v; want the SDK within limits.agent_subscriptions (%d)", waiting, err, def.Limits.AgentSubscriptions)
	default:
	}
}
