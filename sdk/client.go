// Package airlock is the Go SDK for agents: submit a tool call, await its
// outcome (even after the agent restarted), cancel it.
//
//	c, _ := airlock.New(nc, "my-agent")
//	id, err := c.Submit(ctx, airlock.Call{Tool: "fs__read_file", Args: map[string]any{"path": "README.md"}})
//	out, err := c.Await(ctx, id)
//	if out.Status == airlock.StatusCompleted { use(out.Result) }
package airlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Client submits and follows one agent's calls. It is safe for concurrent use.
type Client struct {
	agent    string
	js       jetstream.JetStream
	nc       *nats.Conn
	pub      *envelope.Publisher
	stream   string
	maxBytes int
}

// Option adjusts a Client.
type Option func(*Client)

// WithStream names the events stream (default AIRLOCK_EVENTS).
func WithStream(name string) Option { return func(c *Client) { c.stream = name } }

// WithMaxRequestBytes matches the server's limits.max_request_bytes, so an
// oversized call is refused before it is sent.
func WithMaxRequestBytes(n int) Option { return func(c *Client) { c.maxBytes = n } }

// New returns a client that acts as agentID over nc.
func New(nc *nats.Conn, agentID string, opts ...Option) (*Client, error) {
	if err := ids.Validate("agent id", agentID); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	def := config.Default()
	c := &Client{agent: agentID, js: js, nc: nc, stream: def.Stream.Name, maxBytes: def.Limits.MaxRequestBytes}
	for _, o := range opts {
		o(c)
	}
	c.pub = envelope.NewPublisher(js, "agent/"+agentID)
	return c, nil
}

// Call is what an agent asks to run.
type Call struct {
	// ID of the call; generated when empty. Reuse it with Revision+1 to
	// submit a revised call after changes were requested.
	ID       string
	Revision uint32
	// Tool as "server__tool", or Server and Tool separately.
	Server, Tool string
	Args         map[string]any
	Thread       string
	// OnBehalfOf is the person the agent acts for; they cannot approve it.
	OnBehalfOf     string
	Reason         string
	IdempotencyKey string
}

// ErrInvalid is returned when airlock refused a request as malformed.
var ErrInvalid = errors.New("airlock refused the request as invalid")

// Submit validates and publishes the call and returns its id. Publishing the
// same call id and revision again is harmless: the stream stores it once.
func (c *Client) Submit(ctx context.Context, call Call) (string, error) {
	tc, err := c.toolCall(call)
	if err != nil {
		return "", err
	}
	ev := &airlockv1.Event{
		EventId: envelope.EventID(tc.CallId, tc.Revision, subject.Requested),
		AgentId: c.agent, CallId: tc.CallId, Revision: tc.Revision, ThreadId: tc.ThreadId,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: c.agent},
		Body:  &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: tc}},
	}
	if size := proto.Size(ev); size > c.maxBytes {
		return "", fmt.Errorf("%w: request is %d bytes, over the %d-byte limit: pass large inputs by reference", ErrInvalid, size, c.maxBytes)
	}
	if _, err := c.pub.Publish(ctx, ev, ""); err != nil {
		return "", fmt.Errorf("submit call %s: %w", tc.CallId, err)
	}
	return tc.CallId, nil
}

func (c *Client) toolCall(call Call) (*airlockv1.ToolCall, error) {
	if call.ID == "" {
		call.ID = ids.New("call")
	}
	args, err := structpb.NewStruct(call.Args)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments must be a JSON object of plain values: %v", ErrInvalid, err)
	}
	key := call.IdempotencyKey
	if key == "" {
		key = fmt.Sprintf("%s.%d", call.ID, max(call.Revision, 1))
	}
	tc := &airlockv1.ToolCall{
		CallId: call.ID, AgentId: c.agent, ThreadId: call.Thread, OnBehalfOf: call.OnBehalfOf,
		Server: call.Server, Tool: call.Tool, Arguments: args, Reason: call.Reason,
		IdempotencyKey: key, Revision: call.Revision, CreatedAt: timestamppb.Now(),
	}
	if r := ingress.Call(tc); r != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, r.Reason)
	}
	return tc, nil
}

// Cancel withdraws a pending call. Only the agent that submitted it can.
func (c *Client) Cancel(ctx context.Context, callID, reason string) error {
	body, _ := json.Marshal(map[string]string{"call_id": callID, "reason": reason})
	msg, err := c.nc.RequestWithContext(ctx, subject.AgentCancel(c.agent), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("cancel call %s: no approval service is running to take the request", callID)
	}
	if err != nil {
		return fmt.Errorf("cancel call %s: %w", callID, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" && code != "200" {
		return fmt.Errorf("cancel call %s: %s", callID, msg.Header.Get("Nats-Service-Error"))
	}
	return nil
}

// Do submits call and awaits its outcome.
func (c *Client) Do(ctx context.Context, call Call) (Outcome, error) {
	id, err := c.Submit(ctx, call)
	if err != nil {
		return Outcome{}, err
	}
	return c.Await(ctx, id)
}

// heartbeat bounds one wait for the next message of an awaited call.
const heartbeat = time.Second

// requestTimeout bounds one JetStream API request.
const requestTimeout = 5 * time.Second

// idleRecreate is how long Await waits on a quiet call before recreating
// its consumer, in case it stalled unnoticed.
const idleRecreate = 10 * time.Second
