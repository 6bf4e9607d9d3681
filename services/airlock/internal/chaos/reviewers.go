package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

// consoles reaches the console replicas as a load balancer would: each
// request goes to the next replica, and a request that finds a replica down
// (connection refused, 5xx) is sent to the next one until ctx ends.
type consoles struct {
	bases []string
	next  atomic.Uint64
	http  *http.Client
	// retried counts requests sent again to another replica.
	retried atomic.Int64
}

func newConsoles(bases []string) *consoles {
	return &consoles{bases: bases, http: &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// errUnreachable: no replica answered before ctx ended.
var errUnreachable = errors.New("no console replica answered")

// do sends the request built by mk to the replicas in turn until one
// answers with a status below 500; it returns that status and body.
func (c *consoles) do(ctx context.Context, mk func(base string) (*http.Request, error)) (int, []byte, error) {
	var last error
	for attempt := 0; ; attempt++ {
		base := c.bases[int(c.next.Add(1))%len(c.bases)]
		req, err := mk(base)
		if err != nil {
			return 0, nil, err
		}
		resp, err := c.http.Do(req.WithContext(ctx))
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode < 500 {
				return resp.StatusCode, body, nil
			}
			last = fmt.Errorf("%s answered %d: %.200s", base, resp.StatusCode, body)
		} else {
			last = err
		}
		if attempt > 0 {
			c.retried.Add(1)
		}
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("%w: %v", errUnreachable, last)
		case <-time.After(time.Duration(min(attempt+1, 10)) * 100 * time.Millisecond):
		}
	}
}

// api sends a JSON API request with a bearer token.
func (c *consoles) api(ctx context.Context, method, path, token string, body any) (int, []byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	return c.do(ctx, func(base string) (*http.Request, error) {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	})
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// personalToken signs user in to the console (the sign-in form) and creates
// a personal API token, as a reviewer does once on the Tokens page.
func (c *consoles) personalToken(ctx context.Context, user, password string) (string, error) {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := c.bases[0]
	get := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	page, err := get("/login")
	if err != nil {
		return "", fmt.Errorf("open the sign-in page: %w", err)
	}
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		return "", errors.New("the sign-in page has no _csrf field")
	}
	form := url.Values{"user": {user}, "password": {password}, "_csrf": {m[1]}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("sign in as %s: %w", user, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return "", fmt.Errorf("sign in as %s: status %d", user, resp.StatusCode)
	}
	page, err = get("/tokens")
	if err != nil {
		return "", fmt.Errorf("open the tokens page: %w", err)
	}
	if m = csrfInput.FindStringSubmatch(page); m == nil {
		return "", errors.New("the tokens page has no _csrf field")
	}
	raw, _ := json.Marshal(map[string]any{"name": "airlock chaos", "kind": "personal"})
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/tokens", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", m[1])
	resp, err = client.Do(req)
	if err != nil {
		return "", fmt.Errorf("create a token for %s: %w", user, err)
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.Token == "" {
		return "", fmt.Errorf("create a token for %s: status %d (%v)", user, resp.StatusCode, err)
	}
	return out.Token, nil
}

// record reads a call revision's approval record through the REST API;
// nil (no error) while the approval service does not know it yet.
func (c *consoles) record(ctx context.Context, token, agent, call string, rev uint32) (*airlockv1.ApprovalRecord, error) {
	status, body, err := c.api(ctx, http.MethodGet, fmt.Sprintf("/api/v1/approvals/%s/%s?rev=%d", agent, call, rev), token, nil)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound {
		return nil, nil
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("get %s/%s: status %d: %.200s", agent, call, status, body)
	}
	var resp airlockv1.GetResponse
	if err := envelope.JSONRead.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", agent, call, err)
	}
	return resp.GetRecord(), nil
}

// pending lists the calls of agent waiting for a person, through the REST API.
func (c *consoles) pending(ctx context.Context, token, agent string) ([]*airlockv1.ApprovalRecord, error) {
	status, body, err := c.api(ctx, http.MethodGet, "/api/v1/approvals?agent="+agent, token, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("list %s's pending calls: status %d: %.200s", agent, status, body)
	}
	var list struct {
		Records []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("list %s's pending calls: %w", agent, err)
	}
	var out []*airlockv1.ApprovalRecord
	for _, raw := range list.Records {
		rec := &airlockv1.ApprovalRecord{}
		if err := envelope.JSONRead.Unmarshal(raw, rec); err != nil {
			return nil, fmt.Errorf("list %s's pending calls: %w", agent, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// decideREST posts a decision (approve, reject, changes) as the token's
// owner and returns the approval service's answer.
func (c *consoles) decideREST(ctx context.Context, token, agent, call, action string, body map[string]any) (*airlockv1.DecideResponse, error) {
	status, raw, err := c.api(ctx, http.MethodPost, fmt.Sprintf("/api/v1/approvals/%s/%s/%s", agent, call, action), token, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s %s/%s: status %d: %.300s", action, agent, call, status, raw)
	}
	var resp airlockv1.DecideResponse
	if err := envelope.JSONRead.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", action, agent, call, err)
	}
	return &resp, nil
}

// slackPost sends a signed interaction post to a console replica; a replay
// answer (409: the signature was seen, e.g. by a replica that died before
// answering) is returned like any other status for the caller to click again.
func (c *consoles) slackPost(ctx context.Context, secret string, payload any) (int, error) {
	status, _, err := c.do(ctx, func(base string) (*http.Request, error) {
		return slackfake.SignedPost(base+airlockslack.InteractionsPath, secret, payload, time.Now())
	})
	return status, err
}

// cloneArgs copies a call's arguments (reviewers edit copies).
func cloneArgs(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
