package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"time"

	slackgo "github.com/slack-go/slack"
)

// Retry says how Slack Web API calls are retried. Each call retries in its
// own goroutine, so a rate-limited channel never holds up another one.
type Retry struct {
	// Attempts in total (first try included).
	Attempts int
	// Base is the first backoff after a transient error; it doubles each
	// time up to Max. A 429 waits for its Retry-After instead.
	Base, Max time.Duration
}

// DefaultRetry is used unless WithRetry changes it: five attempts, backing
// off 250 ms, 500 ms, 1 s, 2 s after transient errors (a 429 waits for its
// Retry-After instead), all within DefaultBudget.
func DefaultRetry() Retry {
	return Retry{Attempts: 5, Base: 250 * time.Millisecond, Max: 8 * time.Second}
}

// api is the part of the Slack Web API airlock uses, with retries.
type api struct {
	c     *slackgo.Client
	retry Retry
	log   *slog.Logger
}

func newAPI(token, apiURL string, retry Retry, log *slog.Logger) *api {
	opts := []slackgo.Option{slackgo.OptionHTTPClient(&http.Client{Timeout: 15 * time.Second})}
	if apiURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(apiURL))
	}
	return &api{c: slackgo.New(token, opts...), retry: retry, log: log}
}

// post sends a message and returns the channel id and ts Slack assigned.
func (a *api) post(ctx context.Context, channel string, opts ...slackgo.MsgOption) (ch, ts string, err error) {
	err = a.do(ctx, "chat.postMessage to "+channel, func(ctx context.Context) error {
		var err error
		ch, ts, err = a.c.PostMessageContext(ctx, channel, opts...)
		return err
	})
	return ch, ts, err
}

// update redraws a message in t's turn (nil: outside any order); it fails
// with errSuperseded once a newer update of the message has begun.
func (a *api) update(ctx context.Context, t *turn, channel, ts string, opts ...slackgo.MsgOption) error {
	return a.inTurn(ctx, t, "chat.update of "+channel+"/"+ts, func(ctx context.Context) error {
		_, _, _, err := a.c.UpdateMessageContext(ctx, channel, ts, opts...)
		return err
	})
}

// inTurn is do for a call in t's turn: each attempt is sent in turn, and
// the call stops (errSuperseded) before an attempt or during a wait once a
// newer turn has begun.
func (a *api) inTurn(ctx context.Context, t *turn, what string, f func(context.Context) error) error {
	return a.doUntil(ctx, what, t.superseded(), func(ctx context.Context) error { return t.send(ctx, f) })
}

func (a *api) ephemeral(ctx context.Context, channel, user, text string) error {
	return a.do(ctx, "chat.postEphemeral to "+user, func(ctx context.Context) error {
		_, err := a.c.PostEphemeralContext(ctx, channel, user, slackgo.MsgOptionText(text, false))
		return err
	})
}

// openView is tried once more at most: the trigger id it needs is valid for
// only 3 seconds after the click.
func (a *api) openView(ctx context.Context, triggerID string, view slackgo.ModalViewRequest) error {
	r := a.retry
	r.Attempts = min(r.Attempts, 2)
	return (&api{c: a.c, retry: r, log: a.log}).do(ctx, "views.open", func(ctx context.Context) error {
		_, err := a.c.OpenViewContext(ctx, triggerID, view)
		return err
	})
}

// do runs f until it succeeds, fails permanently, runs out of attempts or
// ctx ends. A rate limit waits for Slack's Retry-After (at least Base);
// transient errors back off exponentially with jitter.
func (a *api) do(ctx context.Context, what string, f func(context.Context) error) error {
	return a.doUntil(ctx, what, nil, f)
}

// doUntil is do that also stops, without sleeping out its wait, once
// stale is closed (nil: never).
func (a *api) doUntil(ctx context.Context, what string, stale <-chan struct{}, f func(context.Context) error) error {
	backoff := a.retry.Base
	var err error
	for attempt := 1; ; attempt++ {
		err = f(ctx)
		if err == nil {
			return nil
		}
		wait, retryable := retryAfter(err, backoff)
		if !retryable || attempt >= a.retry.Attempts || ctx.Err() != nil {
			break
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("%s: %w (Slack asks to wait %s, more than the time left)", what, err, wait)
		}
		a.log.Warn("Slack call failed; retrying", "call", what, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (gave up waiting to retry: %v)", what, err, ctx.Err())
		case <-stale:
			return fmt.Errorf("%s: %w (instead of retrying after: %v)", what, errSuperseded, err)
		case <-time.After(wait):
		}
		if _, ok := errors.AsType[*slackgo.RateLimitedError](err); !ok {
			backoff = min(2*backoff, a.retry.Max)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// retryAfter classifies a Slack client error: how long to wait and whether
// trying again can help.
func retryAfter(err error, backoff time.Duration) (time.Duration, bool) {
	jitter := func(d time.Duration) time.Duration { return d + rand.N(d/4+1) }
	if rl, ok := errors.AsType[*slackgo.RateLimitedError](err); ok {
		return max(rl.RetryAfter, backoff), true
	}
	if sc, ok := errors.AsType[slackgo.StatusCodeError](err); ok {
		return jitter(backoff), sc.Retryable()
	}
	if se, ok := errors.AsType[slackgo.SlackErrorResponse](err); ok {
		switch se.Err {
		case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return jitter(backoff), true
		}
		return 0, false
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return jitter(backoff), true
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return jitter(backoff), true
	}
	return 0, false
}

// slackErrorCode is Slack's error string ("message_not_found", ...) or "".
func slackErrorCode(err error) string {
	if se, ok := errors.AsType[slackgo.SlackErrorResponse](err); ok {
		return se.Err
	}
	return ""
}
