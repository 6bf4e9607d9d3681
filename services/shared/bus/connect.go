// Package bus connects to NATS and provisions the stream and buckets.
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// MaxPingsOutstanding is how many pings a server may leave unanswered
// before the connection gives it up and reconnects (to another node of a
// cluster): a hung server is left after about this many ping intervals.
const MaxPingsOutstanding = 2

// Connect dials NATS and keeps reconnecting forever, so a server restart or
// a cluster node's loss is ridden out instead of ending the service. It
// fails when the first connection cannot be made within ctx, and at once
// when TLS refuses it (cfg.TLS: a certificate no retry will change).
func Connect(ctx context.Context, cfg config.NATS, name string, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		// Without it nats.go closes the connection for good after the same
		// authorisation error twice from one server (a credential being
		// rotated, a server restarting with its accounts not yet loaded).
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.PingInterval(cfg.PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOutstanding),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("NATS async error", "subject", subj, "err", err)
		}),
	}
	if cfg.Credentials != "" {
		opts = append(opts, nats.UserCredentials(cfg.Credentials))
	}
	if cfg.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("NATS credentials: %w (nats.nkey_seed_file names a file holding an nkey seed)", err)
		}
		opts = append(opts, o)
	}
	if o, err := TLSOption(cfg.TLS, "nats.tls"); err != nil {
		return nil, err
	} else if o != nil {
		opts = append(opts, o)
	}
	var lastErr error
	for {
		nc, err := nats.Connect(cfg.URL, opts...)
		if err == nil {
			return nc, nil
		}
		if tlsErr := ExplainTLS(err, "nats.tls"); tlsErr != nil {
			return nil, fmt.Errorf("connect to NATS at %s: %w", Redact(cfg.URL), tlsErr)
		}
		lastErr = err
		if Refused(err) && cfg.Credentials == "" && cfg.NkeySeedFile == "" && !carriesCredentials(cfg.URL) {
			// A server that requires credentials refuses a connection
			// without any every time: trying again only fills its log.
			return nil, fmt.Errorf("connect to NATS at %s: %w (the server answered and requires credentials, and none were given: nats.credentials or nats.nkey_seed_file)", Redact(cfg.URL), err)
		}
		select {
		case <-ctx.Done():
			if Refused(lastErr) {
				return nil, fmt.Errorf("connect to NATS at %s: %w (the server answered and refused the connection's credentials: give credentials it accepts, nats.credentials or nats.nkey_seed_file)", Redact(cfg.URL), lastErr)
			}
			return nil, fmt.Errorf("connect to NATS at %s: %w (is the server running? `airlock dev` starts one)", Redact(cfg.URL), lastErr)
		case <-time.After(cfg.ReconnectWait):
		}
	}
}

// Refused reports whether a NATS server answered a connection and refused
// its credentials (none, wrong, expired or revoked), where trying again
// with the same ones cannot help.
func Refused(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked)
}

// Redact hides any password in a NATS URL list, for logs and messages.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// carriesCredentials reports whether any of urls names a user or token
// (nats://user:pass@host, nats://token@host), which nats.go sends.
func carriesCredentials(urls string) bool {
	for _, p := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// Drain lets in-flight messages finish, flushes publishes and closes nc,
// waiting at most timeout.
func Drain(nc *nats.Conn, timeout time.Duration) error {
	if nc == nil || nc.IsClosed() {
		return nil
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("drain NATS connection: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		nc.Close()
		return fmt.Errorf("drain NATS connection: not done after %s, closed it", timeout)
	}
}
