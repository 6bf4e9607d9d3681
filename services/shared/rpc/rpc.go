// Package rpc is the one place request/reply endpoints encode messages and
// errors: protojson bodies, and apierr codes carried in the nats.go/micro
// error headers (Nats-Service-Error-Code holds the apierr code,
// Nats-Service-Error the sentence). It is also where front-end requests are
// sealed (Caller) and where endpoints that act for a person check the seal
// (HandleSealed).
package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// Handle adapts a typed function to a micro handler: it decodes the request
// into a new Req, calls fn, and replies with the protojson of its result or
// with the error's code and sentence.
func Handle[Req, Resp proto.Message](log *slog.Logger, newReq func() Req, fn func(context.Context, Req) (Resp, error)) micro.HandlerFunc {
	return handle(log, nil, newReq, fn)
}

// Gate checks the front-end seal of requests to endpoints that act for a
// person (decide, cancel, grants, rule changes).
type Gate struct {
	Key seal.Key
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Refused records a request that was not sealed (an unauthorized_attempt).
	Refused func(subject string, data []byte, err error)
}

type frontendKey struct{}

// Frontend is the front-end that sealed the request being handled ("" when
// the endpoint does not require a seal).
func Frontend(ctx context.Context) string {
	s, _ := ctx.Value(frontendKey{}).(string)
	return s
}

// HandleSealed is Handle for an endpoint that acts only on requests a
// front-end sealed: any other request, however it was delivered, changes
// nothing, is answered not_authorized and is recorded through g.Refused.
func HandleSealed[Req, Resp proto.Message](log *slog.Logger, g *Gate, newReq func() Req, fn func(context.Context, Req) (Resp, error)) micro.HandlerFunc {
	return handle(log, g, newReq, fn)
}

// replyOK reports whether a reply subject is an inbox: NATS lets a
// requester name any reply subject, and a reply must never be published on
// a stream's or a service's subject on its say-so.
func replyOK(reply string) bool {
	return strings.HasPrefix(reply, "_INBOX.") || strings.HasPrefix(reply, "_R_.")
}

// Recover wraps h so that a fault in one request's handling (checking its
// seal, recording a refusal, decoding, the endpoint's own work) does not
// take the service down with it (a panic in a micro handler ends the
// process): the caller is answered internal, the fault is logged (its
// stack at most once a minute per endpoint), and the service goes on with
// the next request. Handle and HandleSealed apply it; an endpoint that
// reads its requests itself (the agents' cancel) wraps its handler in it.
func Recover(log *slog.Logger, h micro.HandlerFunc) micro.HandlerFunc {
	stacks := newStackLimit(time.Minute, time.Now)
	return func(r micro.Request) {
		defer func() {
			if p := recover(); p != nil {
				attrs := []any{"subject", r.Subject(), "panic", p}
				if ok, skipped := stacks.allow(); ok {
					attrs = append(attrs, "stack", string(debug.Stack()), "panics_without_stack", skipped)
				}
				log.Error("request handler panicked", attrs...)
				respondErr(log, r, apierr.New(apierr.Internal, "%s failed on this request (an internal fault, recorded in the service's log); try again, and report it if it persists", r.Subject()))
			}
		}()
		h(r)
	}
}

func handle[Req, Resp proto.Message](log *slog.Logger, g *Gate, newReq func() Req, fn func(context.Context, Req) (Resp, error)) micro.HandlerFunc {
	return Recover(log, func(r micro.Request) {
		if !replyOK(r.Reply()) {
			log.Warn("request with a reply subject that is not an inbox ignored", "subject", r.Subject(), "reply", r.Reply())
			return
		}
		ctx := context.Background()
		if g != nil {
			now := time.Now
			if g.Now != nil {
				now = g.Now
			}
			fe, err := g.Key.VerifyRequest(r.Subject(), nats.Header(r.Headers()), r.Data(), now())
			if err != nil {
				if g.Refused != nil {
					g.Refused(r.Subject(), r.Data(), err)
				}
				respondErr(log, r, apierr.Wrap(apierr.NotAuthorized, err, "%s acts only on requests from an airlock front-end (console, Slack, REST, gateway)", r.Subject()))
				return
			}
			ctx = context.WithValue(ctx, frontendKey{}, fe)
		}
		req := newReq()
		if len(r.Data()) > 0 {
			if err := envelope.JSONRead.Unmarshal(r.Data(), req); err != nil {
				respondErr(log, r, apierr.Wrap(apierr.InvalidRequest, err, "request does not decode as %s", req.ProtoReflect().Descriptor().FullName()))
				return
			}
		}
		resp, err := fn(ctx, req)
		if err != nil {
			respondErr(log, r, err)
			return
		}
		data, err := protojson.Marshal(resp)
		if err != nil {
			respondErr(log, r, fmt.Errorf("encode reply: %w", err))
			return
		}
		if err := r.Respond(data); err != nil {
			// Most often a reply over the server's max_payload: the caller
			// is told so at once instead of waiting for its deadline.
			log.Warn("reply failed", "subject", r.Subject(), "bytes", len(data), "err", err)
			respondErr(log, r, apierr.Wrap(apierr.Internal, err, "the reply to %s (%d bytes) could not be sent", r.Subject(), len(data)))
		}
	})
}

// stackLimit lets an endpoint log a panic's stack at most once a period:
// a fault every request hits would otherwise write a full stack at request
// rate. One per endpoint (not per subject: the agents' cancel endpoint has
// a subject for every agent), so it holds no map. It counts the panics
// whose stack it held back, so the next stack logged says how many there
// were.
type stackLimit struct {
	period  time.Duration
	now     func() time.Time
	mu      sync.Mutex
	at      time.Time // when a stack was last logged; zero before the first
	skipped int       // panics since, logged without their stack
}

func newStackLimit(period time.Duration, now func() time.Time) *stackLimit {
	return &stackLimit{period: period, now: now}
}

// allow reports whether a panic may log its stack, and if so how many
// panics went without one since the last stack.
func (l *stackLimit) allow() (ok bool, skipped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.at.IsZero() && now.Sub(l.at) < l.period {
		l.skipped++
		return false, 0
	}
	skipped, l.at, l.skipped = l.skipped, now, 0
	return true, skipped
}

func respondErr(log *slog.Logger, r micro.Request, err error) {
	code := apierr.CodeOf(err)
	if code == apierr.Internal {
		log.Error("request failed", "subject", r.Subject(), "err", err)
	}
	if rerr := r.Error(string(code), err.Error(), nil); rerr != nil {
		log.Warn("error reply failed", "subject", r.Subject(), "err", rerr)
	}
}

// DefaultTimeout bounds a Call whose Caller sets no Timeout: beyond the
// services' own bound on the work behind one request (15 s), so that a
// slow answer still arrives, and short enough that no page or command
// waits on a service that will not answer.
const DefaultTimeout = 20 * time.Second

// Caller sends requests, sealed as Frontend with Key when Key is valid.
type Caller struct {
	NC       *nats.Conn
	Key      seal.Key
	Frontend string
	// Timeout bounds each call (DefaultTimeout when 0); a context with an
	// earlier deadline keeps it.
	Timeout time.Duration
}

// Call sends req to subject and decodes the reply into resp, unsealed.
func Call(ctx context.Context, nc *nats.Conn, subject string, req, resp proto.Message) error {
	return Caller{NC: nc}.Call(ctx, subject, req, resp)
}

// Call sends req to subject and decodes the reply into resp. Error replies
// come back as *apierr.Error with their code; no responder, and no answer
// within the timeout, are Unavailable.
func (c Caller) Call(ctx context.Context, subject string, req, resp proto.Message) error {
	data, err := protojson.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request for %s: %w", subject, err)
	}
	out := nats.NewMsg(subject)
	out.Data = data
	if c.Key.Valid() {
		c.Key.Request(out, c.Frontend, time.Now())
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := c.NC.RequestMsgWithContext(cctx, out)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return apierr.New(apierr.Unavailable, "no service answers on %s: is it running?", subject)
	case err != nil && ctx.Err() == nil && cctx.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, err, "%s did not answer within %s: the service is busy or cannot reply; try again, and tell the operator if it persists", subject, timeout)
	case err != nil:
		return apierr.Wrap(apierr.Unavailable, err, "request %s", subject)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return apierr.FromCode(code, msg.Header.Get(micro.ErrorHeader))
	}
	if err := envelope.JSONRead.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("decode reply from %s: %w", subject, err)
	}
	return nil
}
