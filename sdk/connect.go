package airlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// Connect reads an agent credential file (what `airlock agents add` and
// `airlock dev` write: agent id, NATS URL, nkey seed, and optionally
// "tls": {"ca_file", "cert_file", "key_file"}), connects as that agent and
// returns its Client. url, when not empty, overrides the credential's; a
// WithTLS option overrides its tls. Close the client's connection with
// Client.Close.
func Connect(ctx context.Context, credentialFile, url string, opts ...Option) (*Client, error) {
	cred, err := natsauth.ReadCredential(credentialFile)
	if err != nil {
		return nil, err
	}
	if url == "" {
		url = cred.URL
	}
	var given Client
	for _, o := range opts {
		o(&given)
	}
	if given.tls != nil {
		cred.TLS = *given.tls
	}
	nc, err := Dial(ctx, cred, url)
	if err != nil {
		return nil, err
	}
	c, err := New(nc, cred.Agent, opts...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Dial opens the NATS connection of an agent credential: authenticated with
// its nkey and with the agent's own inbox prefix, which is the only reply
// subject its permissions let it receive on. cred.TLS secures it as
// nats.tls does a service's: its CA file alone turns TLS on and verifies
// the server; its certificate and key answer a server that requires mutual
// TLS. A server TLS refuses is not retried.
func Dial(ctx context.Context, cred natsauth.Credential, url string) (*nats.Conn, error) {
	kp, err := cred.KeyPair()
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	opts := []nats.Option{
		nats.Name("airlock-agent-" + cred.Agent),
		nats.Nkey(pub, kp.Sign),
		nats.CustomInboxPrefix(natsauth.InboxPrefix(cred.Agent)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// A node that stops answering (hung, paused) is left for another
		// within a few seconds instead of the library's minutes.
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(bus.MaxPingsOutstanding),
	}
	if o, err := bus.TLSOption(cred.TLS, credTLS); err != nil {
		return nil, fmt.Errorf("agent %s: %w", cred.Agent, err)
	} else if o != nil {
		opts = append(opts, o)
	}
	if deadline, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(deadline)))
	}
	nc, err := nats.Connect(url, opts...)
	if tlsErr := bus.ExplainTLS(err, credTLS); tlsErr != nil {
		return nil, fmt.Errorf("connect to airlock's NATS at %s as agent %s: %w", url, cred.Agent, tlsErr)
	}
	if errors.Is(err, nats.ErrMaxAccountConnectionsExceeded) {
		return nil, fmt.Errorf("connect to airlock's NATS at %s as agent %s: %w: the agent already holds every connection airlock allows one agent "+
			"(limits.agent_connections, counted over all its processes and hooks): close one of them, or have the operator raise the setting", url, cred.Agent, err)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to airlock's NATS at %s as agent %s: %w (is airlock running? is the credential current?)", url, cred.Agent, err)
	}
	return nc, nil
}

// pingInterval is how often an agent's connection checks the server answers.
const pingInterval = 2 * time.Second

// Close closes the client's connection.
func (c *Client) Close() { c.nc.Close() }

// credTLS names an agent's TLS settings in sentences.
const credTLS = "the credential's tls"
