package teams_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

const (
	appID        = "8c4b1d3e-app-id"
	appPassword  = "bot-client-secret"
	publicURL    = "https://airlock.example.com"
	conversation = "19:ops@thread.tacv2"
)

// connectorCall is one request the Bot Connector fake received.
type connectorCall struct {
	Method       string // POST (post or reply) or PUT (update)
	Conversation string
	Activity     string // the activity replied to or updated; "" for a post
	ID           string // the id the fake gave a posted activity
	Body         map[string]any
}

// Card is the Adaptive Card the call carried, as JSON text.
func (c connectorCall) Card(t *testing.T) string {
	t.Helper()
	atts, _ := c.Body["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("activity carries %d attachments, want one card: %v", len(atts), c.Body)
	}
	a := atts[0].(map[string]any)
	if a["contentType"] != airlockteams.ContentType {
		t.Fatalf("attachment type %v", a["contentType"])
	}
	b, _ := json.Marshal(a["content"])
	return string(b)
}

// fakeConnector is the Bot Connector REST API and the token endpoint, as
// far as airlock uses them. Every activity it accepts is pushed onto a
// channel per kind ("post", "reply", "update") so tests wait for it.
type fakeConnector struct {
	*httptest.Server
	mu     sync.Mutex
	seq    int
	tokens map[string]bool
	log    []connectorCall
	calls  map[string]chan connectorCall
}

func startFakeConnector(t *testing.T) *fakeConnector {
	t.Helper()
	f := &fakeConnector{tokens: map[string]bool{}, calls: map[string]chan connectorCall{
		"post": make(chan connectorCall, 1000), "reply": make(chan connectorCall, 1000), "update": make(chan connectorCall, 1000)}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", f.token)
	mux.HandleFunc("POST /v3/conversations/{conv}/activities", f.activity("post"))
	mux.HandleFunc("POST /v3/conversations/{conv}/activities/{id}", f.activity("reply"))
	mux.HandleFunc("PUT /v3/conversations/{conv}/activities/{id}", f.activity("update"))
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// token answers a client-credentials grant for the bot, as Entra does.
func (f *fakeConnector) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("client_id") != appID ||
		r.Form.Get("client_secret") != appPassword || r.Form.Get("scope") != "https://api.botframework.com/.default" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
		return
	}
	f.mu.Lock()
	f.seq++
	tok := fmt.Sprintf("bot-token-%d", f.seq)
	f.tokens[tok] = true
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (f *fakeConnector) activity(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		authorized := f.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		f.mu.Unlock()
		if !authorized {
			http.Error(w, `{"error":{"code":"Unauthorized"}}`, http.StatusUnauthorized)
			return
		}
		c := connectorCall{Method: r.Method, Conversation: r.PathValue("conv"), Activity: r.PathValue("id")}
		if err := json.NewDecoder(r.Body).Decode(&c.Body); err != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.seq++
		c.ID = c.Activity
		if kind != "update" {
			c.ID = fmt.Sprintf("1:act-%d", f.seq)
		}
		f.log = append(f.log, c)
		f.mu.Unlock()
		f.calls[kind] <- c
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"id": c.ID})
	}
}

// saw reports whether an accepted call of kind matches.
func (f *fakeConnector) saw(kind string, match func(connectorCall) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.log {
		k := map[bool]string{true: "update", false: "post"}[c.Method == http.MethodPut]
		if c.Method == http.MethodPost && c.Activity != "" {
			k = "reply"
		}
		if k == kind && match(c) {
			return true
		}
	}
	return false
}

func (f *fakeConnector) next(t *testing.T, kind string) connectorCall {
	t.Helper()
	select {
	case c := <-f.calls[kind]:
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("the Bot Connector received no %s within 10s", kind)
		return connectorCall{}
	}
}

// none fails if a call of kind is queued (the endpoint answers only once
// its work is done, so a caller checks after the answer).
func (f *fakeConnector) none(t *testing.T, kind string) {
	t.Helper()
	select {
	case c := <-f.calls[kind]:
		t.Fatalf("unexpected %s: %v", kind, c.Body)
	default:
	}
}

// issuer is a local stand-in for the Bot Framework's token issuer: OpenID
// metadata and a JWKS with an RSA key the test generates, and tokens
// signed as the Bot Framework signs them (RS256, kid in the header,
// iss https://api.botframework.com, aud = the bot's app id, serviceurl).
type issuer struct {
	*httptest.Server
	key          *rsa.PrivateKey
	kid          string
	endorsements []string
}

func startIssuer(t *testing.T, endorsements ...string) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "bf-key-1", endorsements: endorsements}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/.well-known/openidconfiguration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": airlockteams.Issuer, "jwks_uri": is.URL + "/v1/.well-known/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /v1/.well-known/keys", func(w http.ResponseWriter, r *http.Request) {
		raw, err := jose.JSONWebKey{Key: &is.key.PublicKey, KeyID: is.kid, Use: "sig", Algorithm: "RS256"}.MarshalJSON()
		if err != nil {
			t.Error(err)
		}
		var k map[string]any
		_ = json.Unmarshal(raw, &k)
		if is.endorsements != nil {
			k["endorsements"] = is.endorsements
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{k}})
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Close)
	return is
}

func (is *issuer) metadataURL() string { return is.URL + "/v1/.well-known/openidconfiguration" }

// claims of a token; zero fields get the genuine values.
type claims struct {
	Issuer, Audience, ServiceURL string
	Expiry, NotBefore            time.Time
	Key                          *rsa.PrivateKey // the signing key; default the issuer's
}

// token signs c as the Bot Framework does.
func (is *issuer) token(t *testing.T, c claims) string {
	t.Helper()
	now := time.Now()
	if c.Issuer == "" {
		c.Issuer = airlockteams.Issuer
	}
	if c.Audience == "" {
		c.Audience = appID
	}
	if c.Expiry.IsZero() {
		c.Expiry = now.Add(time.Hour)
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = now.Add(-5 * time.Minute)
	}
	if c.Key == nil {
		c.Key = is.key
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: c.Key, KeyID: is.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": c.Issuer, "aud": c.Audience, "exp": c.Expiry.Unix(), "nbf": c.NotBefore.Unix(), "serviceurl": c.ServiceURL,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// config is the test configuration: Teams pointed at the fakes, alice (by
// Entra object id) and bob (by Teams id) mapped, carol not.
func config(t *testing.T, natsURL string, f *fakeConnector, is *issuer) svc.Deps {
	cfg := testenv.Config(natsURL)
	cfg.HTTP.PublicURL = publicURL
	cfg.Teams.AppID = appID
	cfg.Teams.AppPassword = appPassword
	cfg.Teams.TokenURL = f.URL + "/token"
	cfg.Teams.ServiceURL = f.URL + "/"
	cfg.Teams.Conversation = conversation
	if is != nil {
		cfg.Teams.OpenIDMetadataURL = is.metadataURL()
	}
	cfg.Teams.Users = map[string]string{"aad-alice": "alice", "29:bob": "bob"}
	return testenv.Deps(t, cfg)
}

var fastRetry = airlockteams.WithRetry(airlockteams.Retry{Attempts: 4, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond})

// pendingRecord is a call waiting for alice (or bob) in the ops channel.
func pendingRecord(t *testing.T, callID string) *airlockv1.ApprovalRecord {
	t.Helper()
	args, err := structpb.NewStruct(map[string]any{
		"path":    "/srv/app/config.yaml",
		"content": "**bold** [click](https://evil.example) \u202eevil",
		"mode":    420,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &airlockv1.ApprovalRecord{
		Call: &airlockv1.ToolCall{
			CallId: callID, AgentId: "bot-1", ThreadId: "thread-9", Server: "fs", Tool: "write_file",
			Arguments: args, Revision: 1, Reason: "update config _now_ <at>everyone</at>",
		},
		Decision: &airlockv1.Decision{
			Action: airlockv1.Action_ACTION_ASK, Reason: "tools that change things need a person's approval",
			RuleId: "write", Risk: airlockv1.Risk_RISK_HIGH, Approvers: []string{"alice", "bob"},
			Notify: []string{"console", "teams"}, Timeout: durationpb.New(5 * time.Minute),
		},
		State:    airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		Deadline: timestamppb.New(time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)),
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// postActivity sends an activity to the endpoint with the bearer token
// (none when token is "") and returns the status and body.
func postActivity(t *testing.T, endpoint, token string, activity map[string]any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(activity)
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(string(body)))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submit is the activity Teams sends when a user presses an Action.Submit
// of a posted card: the action's data (taken from the card, never written
// by the test) with the inputs, in reply to the card.
func submit(t *testing.T, serviceURL string, posted connectorCall, from map[string]any, verb, reason string) map[string]any {
	t.Helper()
	data := actionData(t, posted.Card(t), verb)
	if reason != "" {
		data[airlockteams.InputReason] = reason
	}
	return map[string]any{
		"type": "message", "id": "f:" + url.QueryEscape(fmt.Sprint(time.Now().UnixNano())), "channelId": "msteams",
		"serviceUrl": serviceURL, "from": from, "conversation": map[string]any{"id": posted.Conversation},
		"recipient": map[string]any{"id": "28:" + appID}, "replyToId": posted.ID, "value": data,
	}
}

// actionData finds the data of the card's action for verb, in the card's
// actions or inside a ShowCard's form.
func actionData(t *testing.T, card, verb string) map[string]any {
	t.Helper()
	var c map[string]any
	must(t, json.Unmarshal([]byte(card), &c))
	var find func(actions []any) map[string]any
	find = func(actions []any) map[string]any {
		for _, a := range actions {
			m := a.(map[string]any)
			if d, ok := m["data"].(map[string]any); ok && d["airlock"] == verb {
				return d
			}
			if sub, ok := m["card"].(map[string]any); ok {
				if sa, ok := sub["actions"].([]any); ok {
					if d := find(sa); d != nil {
						return d
					}
				}
			}
		}
		return nil
	}
	acts, _ := c["actions"].([]any)
	d := find(acts)
	if d == nil {
		t.Fatalf("the card has no %s action: %s", verb, card)
	}
	return d
}

var (
	alice = map[string]any{"id": "29:alice", "name": "Alice", "aadObjectId": "aad-alice"}
	bob   = map[string]any{"id": "29:bob", "name": "Bob"}
	carol = map[string]any{"id": "29:carol", "name": "Carol", "aadObjectId": "aad-carol"}
)
