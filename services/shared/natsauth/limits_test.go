package natsauth_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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

// An agent holding a real credential publishes messages far larger than
// anything airlock stores from an agent to the cancel endpoint (which
// decodes its whole body). The server closes the connection at the
// publish's size, before any service reads a byte of it; a request of the
// largest size airlock stores still gets through.
func TestAnAgentCannotPublishMoreThanTheIntakeStores(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot")
	service, _ := n.Connect(natsauth.RoleAdmin)
	got, err := service.SubscribeSync(subject.AgentCancel("bot"))
	if err != nil {
		t.Fatal(err)
	}
	if err := service.Flush(); err != nil {
		t.Fatal(err)
	}
	largest := int(n.Config.Intake.MaxMsgSize)

	// The agent's library may already know the limit (the server tells
	// it) and refuse locally: a hostile agent speaks the protocol itself.
	raw := testenv.RawAgent(t, n.Server.URL(), n.CredentialFile("bot"))
	fmt.Fprintf(raw, "PUB %s %d\r\n", subject.AgentCancel("bot"), largest+1)
	if _, err := raw.Write(append(make([]byte, largest+1), "\r\n"...)); err != nil && !isClosed(err) {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(raw)
	if !strings.Contains(string(answer), "Maximum Payload Violation") {
		t.Fatalf("the server answered %q to a %d-byte publish, want it to refuse it (Maximum Payload Violation) and close the connection", answer, largest+1)
	}

	nc, _, err := agentConn(t, n, "bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject.AgentCancel("bot"), make([]byte, largest)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("a publish of intake.max_msg_size (%d bytes) was refused: %v", largest, err)
	}
	m, err := got.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) != largest {
		t.Fatalf("the service read a %d-byte message first: the server let the agent's %d-byte publish through", len(m.Data), largest+1)
	}
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

// An agent holding a real credential opens more connections than two
// agents' share of a per-account bound would have been (a reviewer's
// program with bot's credential held all 32 and every other agent's calls
// were refused): another agent still connects, as the account sets no
// connection count its agents share.
func TestOneAgentsConnectionsLockNoOtherAgentOut(t *testing.T) {
	n := testenv.StartSecureNATS(t, "bot", "victim")
	const held = 2*16 + 1 // past the former bound, 16 per agent
	for i := range held {
		if _, _, err := agentConn(t, n, "bot"); err != nil {
			t.Fatalf("bot's connection %d was refused: %v", i+1, err)
		}
	}
	if _, _, err := agentConn(t, n, "victim"); err != nil {
		t.Fatalf("with bot holding %d connections, victim's was refused: %v; want one agent unable to lock another out", held, err)
	}
}

// isClosed: the server closed the connection while the test still wrote.
func isClosed(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
