package natsauth_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/lastevents"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// agentConn connects with agent's real credential as the SDK does (its
// inbox prefix), without reconnecting, and reports the server's
// asynchronous errors and the connection's end on errs.
func agentConn(t *testing.T, n *testenv.SecureNATS, agent string) (*nats.Conn, <-chan error, error) {
	t.Helper()
	pub, kp := testenv.AgentKey(t, n.CredentialFile(agent))
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	nc, err := nats.Connect(n.Server.URL(), nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(natsauth.InboxPrefix(agent)),
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { report(err) }),
		nats.ClosedHandler(func(c *nats.Conn) { report(fmt.Errorf("connection closed: %v", c.LastError())) }))
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, errs, err
}

// awaitErr waits for the server to tell the connection what it refused.
func awaitErr(t *testing.T, errs <-chan error, want, what string) {
	t.Helper()
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), want) {
			t.Fatalf("%s: the server answered %v, want %q", what, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the server accepted it (no %q within 10s)", what, want)
	}
}

// An agent holding a real credential publishes messages larger than its
// largest request (limits.max_request_bytes and its headers) to the cancel
// endpoint (which decodes its whole body): among them one of
// intake.max_msg_size (1 MiB), which the server once let through, so that
// one agent could queue a GiB of requests in the intake that the policy
// would only refuse for their size (R9 F0). The server closes the
// connection at the publish's size, before any service reads a byte of
// it; a message of the largest size the account admits still gets through.
func TestAnAgentCannotPublishMoreThanItsLargestRequest(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot")
	service, _ := n.Connect(natsauth.RoleAdmin)
	got, err := service.SubscribeSync(subject.AgentCancel("bot"))
	if err != nil {
		t.Fatal(err)
	}
	if err := service.Flush(); err != nil {
		t.Fatal(err)
	}
	largest := natsauth.AgentLimits(n.Config).MaxPayload

	for _, size := range []int{int(n.Config.Intake.MaxMsgSize), largest + 1} {
		// The agent's library may already know the limit (the server
		// tells it) and refuse locally: a hostile agent speaks the
		// protocol itself.
		raw := testenv.RawAgent(t, n.Server.URL(), n.CredentialFile("bot"))
		fmt.Fprintf(raw, "PUB %s %d\r\n", subject.AgentCancel("bot"), size)
		if _, err := raw.Write(append(make([]byte, size), "\r\n"...)); err != nil && !isClosed(err) {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(raw)
		if !strings.Contains(string(answer), "Maximum Payload Violation") {
			t.Fatalf("the server answered %q to a %d-byte publish, want it to refuse it (Maximum Payload Violation) and close the connection", answer, size)
		}
	}
	if want := n.Config.Limits.MaxRequestBytes + config.RequestHeadroom; largest != want {
		t.Fatalf("an agent's account admits publishes of %d bytes, want limits.max_request_bytes and its headers (%d)", largest, want)
	}

	nc, _, err := agentConn(t, n, "bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject.AgentCancel("bot"), make([]byte, largest)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("a publish of limits.max_request_bytes and its headers (%d bytes) was refused: %v", largest, err)
	}
	m, err := got.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) != largest {
		t.Fatalf("the service read a %d-byte message first: the server let a larger publish of the agent's through", len(m.Data))
	}
}

// The largest request an SDK sends — limits.max_request_bytes of body,
// with the headers the Go SDK sets (the most any SDK sets) and the
// longest agent and call ids — fits in the agent's max_payload: the
// intake stores it from the agent's own credential.
func TestAnAgentsLargestRequestIsStored(t *testing.T) {
	agent, call := strings.Repeat("a", ids.MaxLen), strings.Repeat("c", ids.MaxLen)
	n := testenv.StartSecureNATS(t, agent)
	limit := n.Config.Limits.MaxRequestBytes
	msg := largestRequest(t, agent, call, limit)
	headers := len("NATS/1.0\r\n\r\n")
	for k, vs := range msg.Header {
		for _, v := range vs {
			headers += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	t.Logf("the largest request: %d bytes of body and %d of headers (config.RequestHeadroom: %d)", len(msg.Data), headers, config.RequestHeadroom)
	if headers > config.RequestHeadroom {
		t.Fatalf("a request's headers are %d bytes, over config.RequestHeadroom (%d): raise it", headers, config.RequestHeadroom)
	}

	nc, _, err := agentConn(t, n, agent)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.PublishSync(ctx, js, msg); err != nil {
		t.Fatalf("the intake refused a request of limits.max_request_bytes (%d bytes of body, %d of headers) from the agent's credential: %v", len(msg.Data), headers, err)
	}
}

// largestRequest is the request the SDK encodes for agent's call, its
// arguments padded until the body is exactly limit bytes.
func largestRequest(t *testing.T, agent, call string, limit int) *nats.Msg {
	t.Helper()
	pad := limit
	for range 8 {
		args, err := structpb.NewStruct(map[string]any{"pad": strings.Repeat("x", pad)})
		if err != nil {
			t.Fatal(err)
		}
		ev := &airlockv1.Event{
			AgentId: agent, CallId: call, Revision: 1,
			Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: agent},
			Body:  &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{CallId: call, AgentId: agent, Tool: "demo__echo", Revision: 1, Arguments: args}}},
		}
		msg, err := bus.EncodeRequest(ev, "agent/"+agent, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Data) == limit {
			return msg
		}
		pad += limit - len(msg.Data)
	}
	t.Fatalf("setup: no padding makes a request of exactly %d bytes", limit)
	return nil
}

// An agent holding a real credential subscribes to distinct subjects of
// its own inbox one after another: the server refuses the subscription
// past limits.agent_subscriptions, so they cannot grow its memory without
// bound.
func TestAnAgentsSubscriptionsAreBounded(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot")
	lim := natsauth.AgentLimits(n.Config)

	nc, errs, err := agentConn(t, n, "bot")
	if err != nil {
		t.Fatal(err)
	}
	for i := range lim.MaxSubscriptions {
		if _, err := nc.Subscribe(fmt.Sprintf("%s.%d", natsauth.InboxPrefix("bot"), i), func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatalf("%d subscriptions (limits.agent_subscriptions) were refused: %v", lim.MaxSubscriptions, err)
	default:
	}
	if _, err := nc.Subscribe(natsauth.InboxPrefix("bot")+".one-more", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	awaitErr(t, errs, "maximum subscriptions exceeded", fmt.Sprintf("subscription %d", lim.MaxSubscriptions+1))
}

// An agent holding a real credential opens connections until the server
// refuses one (on main it could open them up to the server's bound,
// limits.bus_connections, and then every new connection was refused,
// another agent's and a service's alike): it holds exactly
// limits.agent_connections, the next is refused as its account's, and
// another agent and a service still connect; one it closes is its to
// open again.
func TestAnAgentsConnectionsAreBoundedOnItsOwn(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot", "victim")
	bound := natsauth.AgentLimits(n.Config).MaxConnections
	var held []*nats.Conn
	for i := range bound {
		nc, _, err := agentConn(t, n, "bot")
		if err != nil {
			t.Fatalf("bot's connection %d of %d (limits.agent_connections) was refused: %v", i+1, bound, err)
		}
		held = append(held, nc)
	}
	if _, _, err := agentConn(t, n, "bot"); !errors.Is(err, nats.ErrMaxAccountConnectionsExceeded) {
		t.Fatalf("bot's connection %d answered %v; want it refused past limits.agent_connections (%d) as its account's (%v)", bound+1, err, bound, nats.ErrMaxAccountConnectionsExceeded)
	}
	if _, _, err := agentConn(t, n, "victim"); err != nil {
		t.Fatalf("with bot at its bound, victim's connection was refused: %v; want one agent unable to lock another out", err)
	}
	if err := connectService(n, natsauth.RolePolicy); err != nil {
		t.Fatalf("with bot at its bound, a service's (re)connection was refused: %v", err)
	}
	held[0].Close()
	testenv.Eventually(t, 10*time.Second, "bot connects again once it closed one of its connections", func() bool {
		_, _, err := agentConn(t, n, "bot")
		return err == nil
	})
}

// connectService connects as a service role without reconnecting, as a
// service's connection comes back after the server dropped it.
func connectService(n *testenv.SecureNATS, role string) error {
	o, err := nats.NkeyOptionFromSeed(n.SeedFile(role))
	if err != nil {
		return err
	}
	nc, err := nats.Connect(n.Server.URL(), o, nats.NoReconnect())
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}

// isClosed: the server closed the connection while the test still wrote.
func isClosed(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// An agent added while the server runs (as `airlock agents add` adds one to
// `airlock dev`, which reloads without a restart) gets an account of its
// own on the reload, in which every path an agent uses works across the
// account boundary — the intake's acknowledgement of a request, an event
// republished on its outcome subject, the read of its stored events and a cancel's
// reply, each answered on its own inbox prefix — and which bounds its
// connections; an agent connected before the reload keeps every path.
func TestAnAgentAddedWhileTheServerRunsGetsAWorkingBoundedAccount(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot")
	bot, _, err := agentConn(t, n, "bot")
	if err != nil {
		t.Fatal(err)
	}
	botOut, err := bot.SubscribeSync(subject.OutPrefix + ".bot.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.Flush(); err != nil {
		t.Fatal(err)
	}
	const added = "new-agent" // a dash, which the account's name keeps
	n.AddAgent(added)
	newcomer, _, err := agentConn(t, n, added)
	if err != nil {
		t.Fatalf("the agent added at runtime could not connect after the reload: %v", err)
	}
	newcomerOut, err := newcomer.SubscribeSync(subject.OutPrefix + "." + added + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := newcomer.Flush(); err != nil {
		t.Fatal(err)
	}

	_, adminJS := n.Connect(natsauth.RoleAdmin)
	approval, _ := n.Connect(natsauth.RoleApproval)
	if _, err := approval.Subscribe(subject.AgentCancel("*"), func(m *nats.Msg) { _ = m.Respond([]byte("canceled " + m.Subject)) }); err != nil {
		t.Fatal(err)
	}
	testenv.ServeAgentReads(t, approval, n.Config.Stream.Name)
	if err := approval.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent string
		nc    *nats.Conn
		out   *nats.Subscription
	}{
		{"bot", bot, botOut},
		{added, newcomer, newcomerOut},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			js, err := jetstream.New(tc.nc)
			if err != nil {
				t.Fatal(err)
			}
			ack, err := js.Publish(ctx, subject.AgentRequests(tc.agent)+".c1", []byte(`{}`))
			if err != nil || ack.Stream != n.Config.Intake.Name {
				t.Fatalf("%s's request: ack %+v, %v; want the intake stream's acknowledgement through the import", tc.agent, ack, err)
			}
			event := subject.EventsPrefix + "." + tc.agent + ".c1.requested"
			if _, err := adminJS.Publish(ctx, event, []byte(tc.agent)); err != nil {
				t.Fatal(err)
			}
			if m, err := tc.out.NextMsg(10 * time.Second); err != nil || string(m.Data) != tc.agent {
				t.Fatalf("%s's outcome subject: %v, %v; want the stored event republished into its account", tc.agent, m, err)
			}
			if got, err := lastevents.Read(ctx, tc.nc, tc.agent, "c1", []string{subject.Requested}); err != nil || len(got) != 1 || string(got[0].Data) != tc.agent {
				t.Fatalf("%s's read of %s: %v, %v; want the stored event", tc.agent, event, got, err)
			}
			if m, err := tc.nc.RequestWithContext(ctx, subject.AgentCancel(tc.agent), []byte(`{}`)); err != nil || string(m.Data) != "canceled "+subject.AgentCancel(tc.agent) {
				t.Fatalf("%s's cancel: %v, %v; want the approval service's reply", tc.agent, m, err)
			}
		})
	}

	bound := natsauth.AgentLimits(n.Config).MaxConnections
	for i := 1; i < bound; i++ { // newcomer holds one already
		if _, _, err := agentConn(t, n, added); err != nil {
			t.Fatalf("%s's connection %d of %d was refused: %v", added, i+1, bound, err)
		}
	}
	if _, _, err := agentConn(t, n, added); !errors.Is(err, nats.ErrMaxAccountConnectionsExceeded) {
		t.Fatalf("%s's connection %d answered %v; want it refused past limits.agent_connections", added, bound+1, err)
	}
}

// TestOnlyThePolicyServiceTellsAnAgentItIsOverBudget: the policy service's
// over-budget notice (core NATS on airlock.out.<agent>.<call>.over_budget)
// reaches the agent through its own account's import, and no agent can
// publish one, for another agent's call or its own.
func TestOnlyThePolicyServiceTellsAnAgentItIsOverBudget(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot", "evil")
	bot, _, err := agentConn(t, n, "bot")
	if err != nil {
		t.Fatal(err)
	}
	notices, err := bot.SubscribeSync(subject.OverBudgetNotice("bot", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.Flush(); err != nil {
		t.Fatal(err)
	}
	evil, refusals, err := agentConn(t, n, "evil")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{subject.OverBudgetNotice("bot", "c1"), subject.OverBudgetNotice("evil", "c1")} {
		if err := evil.Publish(target, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		awaitErr(t, refusals, "permissions violation", "evil publishing "+target)
	}
	policy, _ := n.Connect(natsauth.RolePolicy)
	if err := policy.Publish(subject.OverBudgetNotice("bot", "c1"), []byte("from the policy")); err != nil {
		t.Fatal(err)
	}
	m, err := notices.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("bot did not receive the policy service's notice: %v", err)
	}
	if string(m.Data) != "from the policy" {
		t.Fatalf("bot received %q first; want only the policy service's notice", m.Data)
	}
}
