// Package rpc is the one place request/reply endpoints encode messages and
// errors: protojson bodies, and apierr codes carried in the nats.go/micro
// error headers (Nats-Service-Error-Code holds the apierr code,
// Nats-Service-Error the sentence).
package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-gate/airlock/services/shared/apierr"
)

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}

// Handle adapts a typed function to a micro handler: it decodes the request
// into a new Req, calls fn, and replies with the protojson of its result or
// with the error's code and sentence.
func Handle[Req, Resp proto.Message](log *slog.Logger, newReq func() Req, fn func(context.Context, Req) (Resp, error)) micro.HandlerFunc {
	return func(r micro.Request) {
		req := newReq()
		if len(r.Data()) > 0 {
			if err := unmarshal.Unmarshal(r.Data(), req); err != nil {
				respondErr(log, r, apierr.Wrap(apierr.InvalidRequest, err, "request does not decode as %s", req.ProtoReflect().Descriptor().FullName()))
				return
			}
		}
		ctx := context.Background()
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
			log.Warn("reply failed", "subject", r.Subject(), "err", err)
		}
	}
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

// Call sends req to subject and decodes the reply into resp. Error replies
// come back as *apierr.Error with their code; no responder is Unavailable.
func Call(ctx context.Context, nc *nats.Conn, subject string, req, resp proto.Message) error {
	data, err := protojson.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request for %s: %w", subject, err)
	}
	msg, err := nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return apierr.New(apierr.Unavailable, "no service answers on %s: is it running?", subject)
	}
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "request %s", subject)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return apierr.FromCode(code, msg.Header.Get(micro.ErrorHeader))
	}
	if err := unmarshal.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("decode reply from %s: %w", subject, err)
	}
	return nil
}
