package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// botFrameworkScope is what the bot's token is asked for: the Bot
// Connector API.
const botFrameworkScope = "https://api.botframework.com/.default"

// Retry says how Bot Connector calls are retried.
type Retry struct {
	// Attempts in total (first try included).
	Attempts int
	// Base is the first backoff after a transient error; it doubles each
	// time up to Max. A 429 waits for its Retry-After instead.
	Base, Max time.Duration
}

// DefaultRetry: five attempts, backing off 250 ms, 500 ms, 1 s, 2 s after
// transient errors (a 429 waits for its Retry-After).
func DefaultRetry() Retry {
	return Retry{Attempts: 5, Base: 250 * time.Millisecond, Max: 8 * time.Second}
}

// connector is the part of the Bot Connector REST API airlock uses, with
// the bot's client-credentials token (fetched and renewed by oauth2) and
// retries.
type connector struct {
	http  *http.Client
	retry Retry
	log   *slog.Logger
}

func newConnector(appID, password, tokenURL string, retry Retry, log *slog.Logger) *connector {
	base := &http.Client{Timeout: 15 * time.Second}
	cc := clientcredentials.Config{ClientID: appID, ClientSecret: password, TokenURL: tokenURL, Scopes: []string{botFrameworkScope},
		AuthStyle: oauth2.AuthStyleInParams}
	// The token source outlives any one request: it renews the token itself.
	ts := cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, base))
	return &connector{http: &http.Client{Timeout: 15 * time.Second, Transport: &oauth2.Transport{Source: ts, Base: http.DefaultTransport}}, retry: retry, log: log}
}

// activity is the part of a Bot Framework activity airlock writes.
type outActivity struct {
	Type        string       `json:"type"`
	Text        string       `json:"text,omitempty"`
	TextFormat  string       `json:"textFormat,omitempty"`
	Summary     string       `json:"summary,omitempty"`
	ReplyToID   string       `json:"replyToId,omitempty"`
	Attachments []attachment `json:"attachments,omitempty"`
}

type attachment struct {
	ContentType string `json:"contentType"`
	Content     any    `json:"content"`
}

// activitiesURL is {serviceUrl}/v3/conversations/{id}/activities[/{activityId}].
func activitiesURL(serviceURL, conversation, activity string) string {
	u := strings.TrimRight(serviceURL, "/") + "/v3/conversations/" + url.PathEscape(conversation) + "/activities"
	if activity != "" {
		u += "/" + url.PathEscape(activity)
	}
	return u
}

// post sends an activity to a conversation and returns its id.
func (c *connector) post(ctx context.Context, serviceURL, conversation string, a outActivity) (string, error) {
	return c.send(ctx, http.MethodPost, activitiesURL(serviceURL, conversation, ""), a)
}

// reply sends an activity in reply to another (in its thread).
func (c *connector) reply(ctx context.Context, serviceURL, conversation, to string, a outActivity) error {
	a.ReplyToID = to
	_, err := c.send(ctx, http.MethodPost, activitiesURL(serviceURL, conversation, to), a)
	return err
}

// update replaces an activity the bot posted.
func (c *connector) update(ctx context.Context, serviceURL, conversation, id string, a outActivity) error {
	_, err := c.send(ctx, http.MethodPut, activitiesURL(serviceURL, conversation, id), a)
	return err
}

// statusError is a Bot Connector answer other than 2xx.
type statusError struct {
	Status     int
	Body       string
	RetryAfter time.Duration
}

func (e *statusError) Error() string {
	return fmt.Sprintf("Bot Connector answered %d: %.200s", e.Status, e.Body)
}

// gone reports answers meaning the activity cannot be touched again
// (deleted, conversation gone, bot removed from the team).
func gone(err error) bool {
	se, ok := errors.AsType[*statusError](err)
	return ok && (se.Status == http.StatusNotFound || se.Status == http.StatusForbidden)
}

// send runs one call until it succeeds, fails permanently, runs out of
// attempts or ctx ends; 429 and 5xx and network errors are retried.
func (c *connector) send(ctx context.Context, method, u string, a outActivity) (string, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encode activity: %w", err)
	}
	backoff := c.retry.Base
	for attempt := 1; ; attempt++ {
		id, err := c.once(ctx, method, u, body)
		if err == nil {
			return id, nil
		}
		wait, retryable := backoff+rand.N(backoff/4+1), true
		if se, ok := errors.AsType[*statusError](err); ok {
			retryable = se.Status == http.StatusTooManyRequests || se.Status >= 500
			wait = max(wait, se.RetryAfter)
		}
		if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && re.Response != nil && re.Response.StatusCode < 500 {
			return "", fmt.Errorf("the token endpoint refused the bot's credentials (check teams.app_id, teams.app_password and teams.tenant_id): %w", err)
		}
		if !retryable || attempt >= c.retry.Attempts || ctx.Err() != nil {
			return "", fmt.Errorf("%s %s: %w", method, u, err)
		}
		c.log.Warn("Bot Connector call failed; retrying", "method", method, "url", u, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s %s: %w (gave up waiting to retry: %v)", method, u, err, ctx.Err())
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.retry.Max)
	}
}

func (c *connector) once(ctx context.Context, method, u string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return "", &statusError{Status: resp.StatusCode, Body: string(raw), RetryAfter: time.Duration(secs) * time.Second}
	}
	var out struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &out) // an update may answer with an empty body
	return out.ID, nil
}
