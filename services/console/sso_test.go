package console_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// signer is the OpenID provider these tests run when they need a token no
// real provider would issue (a forged signature, an expired token, another
// audience, another nonce): discovery, keys, an authorization endpoint that
// signs in whoever the test says at once, and a token endpoint that checks
// the PKCE verifier and signs the ID token the test shaped. The happy path
// against a real provider (oidc-provider) in real Chromium is in tests/.
type signer struct {
	t      *testing.T
	srv    *httptest.Server
	key    *rsa.PrivateKey // the provider's published key
	forger *rsa.PrivateKey // a key the provider never published

	mu     sync.Mutex
	claims map[string]any // the next person's claims
	shape  func(claims map[string]any) *rsa.PrivateKey
	codes  map[string]grant
}

type grant struct{ nonce, challenge string }

func newSigner(t *testing.T) *signer {
	t.Helper()
	s := &signer{t: t, codes: map[string]grant{}}
	var err error
	if s.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if s.forger, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": s.srv.URL, "authorization_endpoint": s.srv.URL + "/auth", "token_endpoint": s.srv.URL + "/token",
			"jwks_uri": s.srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &s.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
			http.Error(w, "the console must send PKCE (S256), state and nonce", http.StatusBadRequest)
			return
		}
		code := base64.RawURLEncoding.EncodeToString([]byte(q.Get("state")))
		s.mu.Lock()
		s.codes[code] = grant{nonce: q.Get("nonce"), challenge: q.Get("code_challenge")}
		s.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		s.mu.Lock()
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		claims, shape := map[string]any{}, s.shape
		for k, v := range s.claims {
			claims[k] = v
		}
		s.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": "unknown code or PKCE verifier"})
			return
		}
		now := time.Now()
		claims["iss"], claims["aud"], claims["nonce"] = s.srv.URL, "airlock-console", g.nonce
		claims["iat"], claims["exp"] = now.Unix(), now.Add(5*time.Minute).Unix()
		key := s.key
		if shape != nil {
			key = shape(claims)
		}
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
		if err != nil {
			t.Error(err)
			return
		}
		raw, err := jwt.Signed(sig).Claims(claims).Serialize()
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": raw, "expires_in": 300})
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// next makes the provider sign in a person with claims, the ID token shaped by shape (nil: as issued).
func (s *signer) next(claims map[string]any, shape func(map[string]any) *rsa.PrivateKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims, s.shape = claims, shape
}

// ssoEnv is a console with single sign-on through a signer.
func ssoEnv(t *testing.T, tweak func(*config.OIDC), more ...func(*config.Config)) (*env, *signer) {
	t.Helper()
	s := newSigner(t)
	e := newEnvWith(t, func(c *config.Config) {
		c.Console.OIDC = config.OIDC{Issuer: s.srv.URL, ClientID: "airlock-console", ClientSecret: "s3cret",
			RedirectURL: "http://console.example/login/sso/callback", Scopes: []string{"email", "groups"},
			NameClaim: "email", GroupsClaim: "groups", DisplayName: "Example SSO",
			Groups: map[string]config.OIDCGroup{
				"eng-reviewers": {Roles: []string{config.RoleReviewer}, Groups: []string{"reviewers"}},
				"eng-admins":    {Roles: []string{config.RoleAdmin}},
			}}
		if tweak != nil {
			tweak(&c.Console.OIDC)
		}
		for _, f := range more {
			f(c)
		}
	})
	return e, s
}

func person(email string, groups ...string) map[string]any {
	g := []any{}
	for _, x := range groups {
		g = append(g, x)
	}
	return map[string]any{"sub": "id-" + email, "email": email, "email_verified": true, "groups": g}
}

// ssoSignIn runs a sign-in from b's console to the provider and back to
// the callback on finish (a console's base URL), and returns the callback's
// answer and the callback path (to replay it).
func (b *browser) ssoSignIn(finish string) (page, string) {
	b.t.Helper()
	start := b.get("/login/sso?next=/history")
	if start.Status != http.StatusSeeOther {
		b.t.Fatalf("GET /login/sso: %d\n%s", start.Status, start.Body)
	}
	at := b.visit(start.Header.Get("Location"))
	if at.Status != http.StatusFound {
		b.t.Fatalf("the provider did not send the browser back: %d %s", at.Status, at.Body)
	}
	back, err := url.Parse(at.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	return b.visit(finish + back.RequestURI()), back.RequestURI()
}

// visit gets an absolute URL with b's cookies.
func (b *browser) visit(u string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

func (b *browser) whoami() page {
	b.t.Helper()
	return b.get("/api/v1/whoami")
}

func TestSingleSignOn(t *testing.T) {
	e, s := ssoEnv(t, nil)

	t.Run("a person in a mapped group signs in with the roles it gives", func(t *testing.T) {
		s.next(person("carol@example.com", "eng-reviewers", "marketing"), nil)
		b := e.browser()
		p, _ := b.ssoSignIn(e.srv.URL)
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/history" {
			t.Fatalf("callback: %d %q\n%s", p.Status, p.Header.Get("Location"), p.Body)
		}
		who := b.whoami()
		if who.Status != http.StatusOK || !strings.Contains(who.Body, `"name":"carol@example.com"`) ||
			!strings.Contains(who.Body, `"roles":["reviewer"]`) || !strings.Contains(who.Body, `"groups":["reviewers"]`) {
			t.Fatalf("whoami after single sign-on: %d %s", who.Status, who.Body)
		}
	})

	refused := []struct {
		name   string
		claims map[string]any
		shape  func(map[string]any) *rsa.PrivateKey
		status int
		says   string
	}{
		{"a token signed with a key the provider never published is refused", person("mallory@example.com", "eng-admins"),
			func(map[string]any) *rsa.PrivateKey { return s.forger }, http.StatusUnauthorized, "signature does not match the provider&#39;s keys"},
		{"an expired token is refused", person("carol@example.com", "eng-admins"),
			func(c map[string]any) *rsa.PrivateKey {
				c["iat"], c["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
				return s.key
			}, http.StatusUnauthorized, "The ID token has expired"},
		{"a token issued for another application is refused", person("carol@example.com", "eng-admins"),
			func(c map[string]any) *rsa.PrivateKey { c["aud"] = "another-app"; return s.key }, http.StatusUnauthorized, "wrong audience"},
		{"a token issued for another sign-in is refused", person("carol@example.com", "eng-admins"),
			func(c map[string]any) *rsa.PrivateKey { c["nonce"] = "a-nonce-from-another-sign-in"; return s.key }, http.StatusUnauthorized, "its nonce does not match"},
		{"a person none of whose groups is mapped is refused", person("dave@example.com", "marketing", "sales"), nil,
			http.StatusForbidden, "none of your groups gives access to airlock"},
		{"a person without groups is refused", map[string]any{"sub": "x", "email": "erin@example.com", "email_verified": true}, nil,
			http.StatusForbidden, "none of your groups gives access to airlock"},
		{"a name that means something else to airlock is refused", person("group:reviewers", "eng-admins"), nil,
			http.StatusForbidden, "cannot be an airlock principal"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			s.next(tc.claims, tc.shape)
			b := e.browser()
			p, _ := b.ssoSignIn(e.srv.URL)
			if p.Status != tc.status || !strings.Contains(p.Body, tc.says) || !strings.Contains(p.Body, `id="sign-in-sso"`) {
				t.Fatalf("callback: want %d with %q and the sign-in button, got %d\n%s", tc.status, tc.says, p.Status, p.Body)
			}
			if who := b.whoami(); who.Status != http.StatusUnauthorized {
				t.Fatalf("a refused sign-in left a session: %d %s", who.Status, who.Body)
			}
		})
	}

	t.Run("a provider's refusal is shown by its code alone", func(t *testing.T) {
		b := e.browser()
		p := b.get("/login/sso/callback?" + url.Values{"error": {"access_denied"}, "error_description": {"Your account is locked: call +1 555 0100"}}.Encode())
		if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "did not sign you in (access_denied)") || strings.Contains(p.Body, "555 0100") {
			t.Fatalf("callback with an error: %d\n%s", p.Status, p.Body)
		}
	})

	t.Run("a state is used once", func(t *testing.T) {
		s.next(person("carol@example.com", "eng-reviewers"), nil)
		b := e.browser()
		if p, callback := b.ssoSignIn(e.srv.URL); p.Status != http.StatusSeeOther {
			t.Fatalf("first use: %d\n%s", p.Status, p.Body)
		} else {
			// The same browser, the same cookie, the same link: nothing but the state's single use refuses it.
			again := e.browser()
			again.c.Jar = b.c.Jar
			if p := again.visit(e.srv.URL + callback); p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "already used or has expired") {
				t.Fatalf("replayed state: %d\n%s", p.Status, p.Body)
			}
		}
	})

	t.Run("a sign-in is finished only in the browser that started it", func(t *testing.T) {
		s.next(person("carol@example.com", "eng-reviewers"), nil)
		victim := e.browser()
		start := victim.get("/login/sso")
		at := victim.visit(start.Header.Get("Location"))
		back, _ := url.Parse(at.Header.Get("Location"))
		attacker := e.browser()
		if p := attacker.visit(e.srv.URL + back.RequestURI()); p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "started in another browser") {
			t.Fatalf("callback from another browser: %d\n%s", p.Status, p.Body)
		}
	})

	t.Run("a sign-in started on one replica finishes on another", func(t *testing.T) {
		_, other := e.startConsole()
		s.next(person("carol@example.com", "eng-reviewers"), nil)
		b := e.browser()
		if p, _ := b.ssoSignIn(other.URL); p.Status != http.StatusSeeOther {
			t.Fatalf("callback on the second replica: %d\n%s", p.Status, p.Body)
		}
		if who := b.whoami(); !strings.Contains(who.Body, `"name":"carol@example.com"`) {
			t.Fatalf("whoami on the first replica: %d %s", who.Status, who.Body)
		}
	})

	t.Run("a person removed from a group loses its role at their next sign-in", func(t *testing.T) {
		s.next(person("frank@example.com", "eng-admins", "eng-reviewers"), nil)
		laptop := e.browser()
		laptop.ssoSignIn(e.srv.URL)
		if who := laptop.whoami(); !strings.Contains(who.Body, `"roles":["admin","reviewer"]`) {
			t.Fatalf("before: %s", who.Body)
		}
		s.next(person("frank@example.com", "eng-reviewers"), nil)
		phone := e.browser()
		phone.ssoSignIn(e.srv.URL)
		for name, b := range map[string]*browser{"the new session": phone, "the earlier session": laptop} {
			if who := b.whoami(); !strings.Contains(who.Body, `"roles":["reviewer"]`) {
				t.Fatalf("%s after the group was removed: %s", name, who.Body)
			}
		}
	})

	t.Run("sign-out ends the session", func(t *testing.T) {
		s.next(person("carol@example.com", "eng-reviewers"), nil)
		b := e.browser()
		b.ssoSignIn(e.srv.URL)
		if p := b.submit("/logout", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("sign out: %d %s", p.Status, p.Body)
		}
		if who := b.whoami(); who.Status != http.StatusUnauthorized {
			t.Fatalf("after sign-out: %d %s", who.Status, who.Body)
		}
	})
}

func TestSingleSignOnAdmitsOnlyVerifiedEmailsAtAllowedDomains(t *testing.T) {
	e, s := ssoEnv(t, func(o *config.OIDC) { o.AllowedDomains = []string{"example.com"} })
	unverified := person("carol@example.com", "eng-reviewers")
	unverified["email_verified"] = false
	for _, tc := range []struct {
		name   string
		claims map[string]any
		says   string
	}{
		{"an email at another domain is refused", person("carol@example.org", "eng-reviewers"), "not at a domain this console admits"},
		{"an unverified email is refused", unverified, "has not verified your email address"},
		{"a verified email at the domain is admitted", person("carol@example.com", "eng-reviewers"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.next(tc.claims, nil)
			p, _ := e.browser().ssoSignIn(e.srv.URL)
			if tc.says == "" {
				if p.Status != http.StatusSeeOther {
					t.Fatalf("callback: %d\n%s", p.Status, p.Body)
				}
				return
			}
			if p.Status != http.StatusForbidden || !strings.Contains(p.Body, tc.says) {
				t.Fatalf("callback: %d\n%s", p.Status, p.Body)
			}
		})
	}
}

func TestPasswordsCanBeTurnedOffWithSingleSignOn(t *testing.T) {
	e, s := ssoEnv(t, func(o *config.OIDC) { o.DisablePasswords = true })
	b := e.browser()
	page := b.get("/login")
	if !strings.Contains(page.Body, `id="sign-in-sso"`) || strings.Contains(page.Body, `id="password"`) {
		t.Fatalf("the sign-in page should offer only single sign-on:\n%s", page.Body)
	}
	if p := b.post("/login", url.Values{"user": {"alice"}, "password": {password}}); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "Password sign-in is turned off") {
		t.Fatalf("password sign-in: %d\n%s", p.Status, p.Body)
	}
	s.next(person("carol@example.com", "eng-reviewers"), nil)
	if p, _ := b.ssoSignIn(e.srv.URL); p.Status != http.StatusSeeOther {
		t.Fatalf("single sign-on: %d\n%s", p.Status, p.Body)
	}
}

// newToken creates a personal token in b's session and returns its secret.
func (b *browser) newToken() string {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+"/api/v1/tokens", strings.NewReader(`{"name":"laptop"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", b.csrf("/"))
	p := b.do(req)
	if p.Status != http.StatusCreated {
		b.t.Fatalf("create a token: %d %s", p.Status, p.Body)
	}
	var out struct{ Token string }
	_ = json.Unmarshal([]byte(p.Body), &out)
	return out.Token
}

// signedInWithToken signs in the person of claims in a new browser and
// makes a personal token in that session.
func signedInWithToken(t *testing.T, e *env, s *signer, claims map[string]any) (*browser, string) {
	t.Helper()
	s.next(claims, nil)
	b := e.browser()
	if p, _ := b.ssoSignIn(e.srv.URL); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in as %v: %d\n%s", claims["email"], p.Status, p.Body)
	}
	return b, b.newToken()
}

// refusedSignIn runs the provider's next sign-in in a new browser and
// checks that the console refused it saying says and started no session.
func refusedSignIn(t *testing.T, e *env, says string) {
	t.Helper()
	b := e.browser()
	if p, _ := b.ssoSignIn(e.srv.URL); p.Status != http.StatusForbidden || !strings.Contains(p.Body, says) {
		t.Fatalf("callback: want 403 saying %q, got %d\n%s", says, p.Status, p.Body)
	}
	if who := b.whoami(); who.Status != http.StatusUnauthorized {
		t.Fatalf("a refused sign-in left a session: %d %s", who.Status, who.Body)
	}
}

// tokenWhoami is whoami with a bearer token.
func tokenWhoami(t *testing.T, base, token string) page {
	t.Helper()
	return apiCall(t, base, token, http.MethodGet, "/api/v1/whoami", "")
}

func TestSingleSignOnNeverActsAsAnotherAccount(t *testing.T) {
	e, s := ssoEnv(t, nil)

	unverified := person("alice@example.com", "eng-reviewers")
	unverified["email_verified"] = false
	for _, tc := range []struct {
		name   string
		claims map[string]any
		says   string
	}{
		// root is a local admin: a provider that lets anyone name themselves root must not make them root.
		{"a provider account named like a local user is refused",
			map[string]any{"sub": "id-mallory", "email": "root", "email_verified": true, "groups": []any{"eng-reviewers"}}, "root is a local user of this console"},
		{"an unverified address is refused even when no domain is restricted", unverified, "has not verified your email address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.next(tc.claims, nil)
			refusedSignIn(t, e, tc.says)
		})
	}

	t.Run("a second account with a person's name is refused and changes nothing of theirs", func(t *testing.T) {
		zoe, tok := signedInWithToken(t, e, s, person("zoe@example.com", "eng-reviewers"))
		s.next(map[string]any{"sub": "id-imposter", "email": "zoe@example.com", "email_verified": true, "groups": []any{"eng-admins"}}, nil)
		refusedSignIn(t, e, "Another account already signs in as zoe@example.com")
		for name, who := range map[string]page{"zoe's session": zoe.whoami(), "zoe's token": tokenWhoami(t, e.srv.URL, tok)} {
			if who.Status != http.StatusOK || !strings.Contains(who.Body, `"roles":["reviewer"]`) {
				t.Fatalf("%s after the second account tried: %d %s", name, who.Status, who.Body)
			}
		}
		s.next(person("zoe@example.com", "eng-reviewers"), nil)
		if p, _ := e.browser().ssoSignIn(e.srv.URL); p.Status != http.StatusSeeOther {
			t.Fatalf("zoe signs in again: %d\n%s", p.Status, p.Body)
		}
	})

	t.Run("a token made by single sign-on never takes a local user's roles", func(t *testing.T) {
		dana, tok := signedInWithToken(t, e, s, person("dana@example.com", "eng-reviewers"))
		if who := tokenWhoami(t, e.srv.URL, tok); !strings.Contains(who.Body, `"roles":["reviewer"]`) {
			t.Fatalf("the token before: %d %s", who.Status, who.Body)
		}
		// Another replica where an admin has since made dana@example.com a local admin.
		before := e.deps
		e.deps.Config.Console.Users = append(slices.Clone(before.Config.Console.Users),
			config.User{Name: "dana@example.com", PasswordHash: hash(t), Roles: []string{config.RoleAdmin}})
		_, srv := e.startConsole()
		e.deps = before
		if who := tokenWhoami(t, srv.URL, tok); who.Status != http.StatusUnauthorized {
			t.Fatalf("the SSO token on a console where its name is a local admin's: %d %s", who.Status, who.Body)
		}
		dana.base = srv.URL
		if who := dana.whoami(); who.Status != http.StatusUnauthorized {
			t.Fatalf("the SSO session on a console where its name is a local admin's: %d %s", who.Status, who.Body)
		}
	})
}

func TestSingleSignOnRemovedFromEveryGroupLosesEverything(t *testing.T) {
	e, s := ssoEnv(t, nil)
	laptop, tok := signedInWithToken(t, e, s, person("gina@example.com", "eng-reviewers"))
	if who := tokenWhoami(t, e.srv.URL, tok); !strings.Contains(who.Body, `"roles":["reviewer"]`) {
		t.Fatalf("the token before: %d %s", who.Status, who.Body)
	}
	s.next(person("gina@example.com", "marketing"), nil)
	refusedSignIn(t, e, "none of your groups gives access")
	for name, who := range map[string]page{"the earlier session": laptop.whoami(), "the token": tokenWhoami(t, e.srv.URL, tok)} {
		if who.Status != http.StatusUnauthorized {
			t.Fatalf("%s after gina left every mapped group: %d %s", name, who.Status, who.Body)
		}
	}
	if groups, err := e.con.VouchedGroups(context.Background(), "gina@example.com"); err != nil || len(groups) != 0 {
		t.Fatalf("vouched groups after gina left every mapped group: %v %v", groups, err)
	}
}

func TestStartingSingleSignOnsIsBoundedAndLeavesNothingBehind(t *testing.T) {
	e, s := ssoEnv(t, nil, func(c *config.Config) { c.Console.SignIn.StartsPerAddress = 3 })
	ctx := context.Background()
	kv, err := e.deps.JS.KeyValue(ctx, e.deps.Config.Buckets.Console)
	if err != nil {
		t.Fatal(err)
	}
	values := func() uint64 {
		t.Helper()
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Values()
	}

	t.Run("a finished sign-in leaves no revision of its pending record", func(t *testing.T) {
		s.next(person("carol@example.com", "eng-reviewers"), nil)
		b := e.browser()
		start := b.get("/login/sso")
		state, _ := url.Parse(start.Header.Get("Location"))
		sum := sha256.Sum256([]byte(state.Query().Get("state")))
		key := "sso.pending." + hex.EncodeToString(sum[:]) // as the console names it
		at := b.visit(start.Header.Get("Location"))
		back, _ := url.Parse(at.Header.Get("Location"))
		if p := b.visit(e.srv.URL + back.RequestURI()); p.Status != http.StatusSeeOther {
			t.Fatalf("callback: %d\n%s", p.Status, p.Body)
		}
		history, err := bus.History(ctx, kv, key)
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("history of %s: %v", key, err)
		}
		for _, h := range history {
			if len(h.Value()) > 0 || h.Operation() != jetstream.KeyValuePurge {
				t.Fatalf("the used pending sign-in left %s (%d bytes) in the bucket", h.Operation(), len(h.Value()))
			}
		}
		// Nor its marker, a moment later (it expires: an unauthenticated
		// client starts sign-ins, and each marker stayed for ever).
		testenv.Eventually(t, 10*time.Second, "the used pending sign-in's marker gone", func() bool {
			_, err := bus.History(ctx, kv, key)
			return errors.Is(err, jetstream.ErrKeyNotFound)
		})
	})

	t.Run("past the limit an address is told to wait and nothing is written", func(t *testing.T) {
		b := e.browser()
		for range 2 { // the third start: one was used above
			if p := b.get("/login/sso"); p.Status != http.StatusSeeOther {
				t.Fatalf("a start within the limit: %d\n%s", p.Status, p.Body)
			}
		}
		before := values()
		p := b.get("/login/sso")
		if p.Status != http.StatusTooManyRequests || !strings.Contains(p.Body, "Too many sign-ins were started from this address: try again in") {
			t.Fatalf("a start past the limit: %d\n%s", p.Status, p.Body)
		}
		if after := values(); after != before {
			t.Fatalf("a refused start wrote %d values to the console bucket", after-before)
		}
	})
}
