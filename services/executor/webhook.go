package executor

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"syscall"
)

// Webhook request headers. The body is the call's arguments as JSON.
const (
	// HeaderSignature is "sha256=" + hex(HMAC-SHA256(secret, body)).
	HeaderSignature = "X-Airlock-Signature"
	// HeaderIdempotencyKey is the same on every attempt of one call revision.
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderCallID         = "X-Airlock-Call-Id"
	HeaderTool           = "X-Airlock-Tool"
	HeaderAttempt        = "X-Airlock-Attempt"
	// HeaderPreview is "1" on a request to a tool's preview endpoint: say
	// what the call would do, do not do it.
	HeaderPreview = "X-Airlock-Preview"
)

// webhookMaxResponse bounds the body read from a webhook (the executor
// truncates results further to executor.max_result_bytes).
const webhookMaxResponse = 8 << 20

// WebhookOptions configure a Webhook adapter.
type WebhookOptions struct {
	// Secret is the HMAC-SHA256 key the receiver verifies the body with.
	Secret []byte
	// URLs maps each tool name to the URL it is POSTed to.
	URLs map[string]string
	// PreviewURLs maps the tools that serve a preview to their preview endpoint.
	PreviewURLs map[string]string
	Headers     map[string]string
	// Client defaults to an http.Client without a timeout (the call's
	// context carries the per-tool timeout).
	Client *http.Client
}

// Webhook runs tools that are HTTP endpoints: each call is a POST of the
// arguments as JSON, signed with HMAC-SHA256 over the body, with an
// Idempotency-Key header that stays the same across retries of one call
// revision. A 2xx answer is success and its body the result (JSON as is,
// anything else as a JSON string); any other status is a tool error.
type Webhook struct {
	o WebhookOptions
}

// NewWebhook returns a webhook adapter.
func NewWebhook(o WebhookOptions) *Webhook {
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	return &Webhook{o: o}
}

// Sign returns the signature header value for body: "sha256=" + hex HMAC.
// Receivers recompute it and compare with hmac.Equal.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Tools implements Adapter.
func (w *Webhook) Tools(context.Context) ([]string, error) {
	out := make([]string, 0, len(w.o.URLs))
	for t := range w.o.URLs {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// Call implements Adapter.
func (w *Webhook) Call(ctx context.Context, req Request) (json.RawMessage, error) {
	url, ok := w.o.URLs[req.Tool]
	if !ok {
		return nil, fmt.Errorf("webhook server %s has no tool %q: %w", req.Server, req.Tool, ErrUnknownTool)
	}
	return w.post(ctx, url, req, nil)
}

// post sends req's arguments to url, signed, with extra headers, and reads the answer.
func (w *Webhook) post(ctx context.Context, url string, req Request, extra map[string]string) (json.RawMessage, error) {
	args := req.Arguments
	if args == nil {
		args = map[string]any{}
	}
	body, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode arguments: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, toolErrorf("webhook %s: %v", url, err)
	}
	for k, v := range w.o.Headers {
		hr.Header.Set(k, os.ExpandEnv(v))
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(HeaderSignature, Sign(w.o.Secret, body))
	hr.Header.Set(HeaderIdempotencyKey, req.IdempotencyKey)
	hr.Header.Set(HeaderCallID, req.CallID)
	hr.Header.Set(HeaderTool, req.Server+"__"+req.Tool)
	hr.Header.Set(HeaderAttempt, strconv.Itoa(int(req.Attempt)))
	for k, v := range extra {
		hr.Header.Set(k, v)
	}

	resp, err := w.o.Client.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("webhook %s: %w", url, ctx.Err())
		}
		// A refused connection never reached the tool; anything later
		// (reset, EOF mid-answer) may have, after the side effect.
		return nil, &ToolError{Message: fmt.Sprintf("webhook %s: %v", url, err), Indeterminate: !errors.Is(err, syscall.ECONNREFUSED)}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, webhookMaxResponse))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("webhook %s: %w", url, ctx.Err())
		}
		return nil, &ToolError{Message: fmt.Sprintf("webhook %s: reading the answer: %v", url, err), Indeterminate: true}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &ToolError{
			Message: fmt.Sprintf("webhook %s answered %s: %s", url, resp.Status, excerpt(out, 300)),
			// A 5xx may come after the side effect; a 4xx is a refusal.
			Indeterminate: resp.StatusCode >= 500,
		}
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return json.RawMessage(`null`), nil
	}
	if json.Valid(out) {
		return json.RawMessage(out), nil
	}
	return json.Marshal(string(out))
}

// Close implements Adapter.
func (w *Webhook) Close() error {
	w.o.Client.CloseIdleConnections()
	return nil
}

func excerpt(b []byte, n int) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
