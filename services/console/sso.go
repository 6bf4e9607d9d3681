package console

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// Single sign-on (console.oidc): the authorization code flow with PKCE,
// state and nonce, the ID token verified by go-oidc against the provider's
// discovery document and keys.
//
// A sign-in in progress lives in the console bucket, not in this process:
// GET /login/sso stores sso.pending.<sha256(state)> (nonce, PKCE verifier,
// where to go next, and the hash of a random value it sets in an HttpOnly,
// SameSite=Lax cookie) and sends the browser to the provider; the callback,
// on whichever replica the provider sends the browser to, purges that key
// with compare-and-set before it uses it — so a state counts once, and no
// revision of it stays in the bucket's history — and
// refuses it without the cookie that started it (a sign-in cannot be
// finished in another browser) or after pendingTTL.
//
// Roles and approver groups come from the person's groups at every sign-in
// (console.oidc.groups) and are kept in people.<b64 name>; every session
// and personal token of that person reads them there, so a person removed
// from a group loses what it gave at their next sign-in, and a person
// removed from every mapped group loses everything at once.
//
// A name is one account: people.<b64 name> is bound to the issuer and
// subject that first signed in as it, and a sign-in with the same name
// from another subject is refused without touching the record; a name
// that is a local user's never signs in by single sign-on (and a local
// user is never created with an SSO person's name), so a principal's roles
// always come from one record.

const (
	ssoCookie   = "airlock_sso"
	ssoStart    = "/login/sso"
	ssoCallback = "/login/sso/callback"
	// pendingTTL bounds how long a person may take at the provider.
	pendingTTL = 10 * time.Minute
)

// sso signs people in with an OpenID Connect provider.
type sso struct {
	cfg      config.OIDC
	redirect string
	kv       jetstream.KeyValue
	store    *store // to refuse local users' names
	now      func() time.Time
	client   *http.Client

	mu       sync.Mutex
	provider *oidc.Provider // discovered at the first sign-in, then kept
}

// pendingLogin is a sign-in between GET /login/sso and the callback.
type pendingLogin struct {
	Browser  string    `json:"browser"` // sha256 of the ssoCookie value
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"` // the PKCE code verifier
	Next     string    `json:"next"`
	Created  time.Time `json:"created"`
}

// personRecord is what a person's last single sign-on gave them.
type personRecord struct {
	Name string `json:"name"`
	// Issuer and Subject are the account the name belongs to (the ID
	// token's iss and sub at its first sign-in).
	Issuer  string   `json:"iss,omitempty"`
	Subject string   `json:"sub,omitempty"`
	Roles   []string `json:"roles"`
	Groups  []string `json:"groups,omitempty"`
	// Removed: their last sign-in was refused because none of their groups
	// is mapped any more; their sessions and tokens act for nobody.
	Removed    bool      `json:"removed,omitempty"`
	SignedInAt time.Time `json:"signed_in_at"`
}

func newSSO(cfg config.Config, kv jetstream.KeyValue, st *store, now func() time.Time) *sso {
	o := cfg.Console.OIDC
	if !o.Enabled() {
		return nil
	}
	redirect := o.RedirectURL
	if redirect == "" {
		redirect = strings.TrimSuffix(cfg.HTTP.PublicURL, "/") + ssoCallback
	}
	return &sso{cfg: o, redirect: redirect, kv: kv, store: st, now: now, client: &http.Client{Timeout: 15 * time.Second}}
}

// discover reads the provider's discovery document once; until it has
// succeeded, every sign-in tries again (the console starts while the
// provider is down).
func (s *sso) discover() (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	// Not the request's context: the provider keeps it to fetch its keys later.
	p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), s.client), s.cfg.Issuer)
	if err != nil {
		return nil, apierr.Wrap(apierr.Unavailable, err, "the sign-in provider %s does not answer: try again in a moment, or sign in with a password if your admin allows it", s.cfg.Issuer)
	}
	s.provider = p
	return p, nil
}

func (s *sso) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.redirect, Scopes: append([]string{oidc.ScopeOpenID}, s.cfg.Scopes...)}
}

// oauthErrorCode is the shape of an OAuth error code (access_denied, login_required, ...).
var oauthErrorCode = regexp.MustCompile(`^[a-z_]{1,40}$`)

func pendingKey(state string) string { return "sso.pending." + hashSecret(state) }

func personKey(name string) string {
	return "people." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// ssoStartPage stores a pending sign-in and sends the browser to the provider.
func (con *Console) ssoStartPage(c echo.Context) error {
	if con.sso == nil {
		return apierr.New(apierr.NotFound, "single sign-on is not configured: sign in with your user name and password")
	}
	// Each start stores a pending sign-in: an address may start only so many.
	if wait, err := con.logins.started(c.Request().Context(), limitedAddr(con.clientAddr(c))); err != nil {
		return err
	} else if wait > 0 {
		return con.loginAgain(c, http.StatusTooManyRequests, fmt.Sprintf("Too many sign-ins were started from this address: try again in %s.", wait.Round(time.Second)))
	}
	p, err := con.sso.discover()
	if err != nil {
		return err
	}
	state, browser := randomSecret(32), randomSecret(32)
	rec := pendingLogin{Browser: hashSecret(browser), Nonce: randomSecret(32), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(c.QueryParam("next")), Created: con.sso.now().UTC()}
	data, _ := json.Marshal(rec)
	// Kept as long as it may be finished (where the bucket takes TTLs, the
	// sweep is only for sign-ins started before it did).
	if err := con.store.write(c.Request().Context(), pendingKey(state), data, 0, pendingTTL+time.Minute); err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "sign-in is unavailable for a moment: try again")
	}
	con.setCookie(c, ssoCookie, browser, pendingTTL)
	return c.Redirect(http.StatusSeeOther, con.sso.oauth(p).AuthCodeURL(state, oidc.Nonce(rec.Nonce), oauth2.S256ChallengeOption(rec.Verifier)))
}

// ssoRefusal is a sign-in the callback refused: Why is for the person's
// page and the trail, Name is who it was when the token said so.
type ssoRefusal struct {
	Name, Why string
	Status    int
}

func (r *ssoRefusal) Error() string { return r.Why }

func refuse(status int, format string, args ...any) *ssoRefusal {
	return &ssoRefusal{Why: fmt.Sprintf(format, args...), Status: status}
}

// ssoCallbackPage finishes a sign-in: the pending record (once), the code
// exchanged with the PKCE verifier, the ID token verified, the person
// admitted and given roles by their groups, and a session started.
func (con *Console) ssoCallbackPage(c echo.Context) error {
	if con.sso == nil {
		return apierr.New(apierr.NotFound, "single sign-on is not configured: sign in with your user name and password")
	}
	ctx := c.Request().Context()
	next, person, err := con.sso.finish(ctx, c)
	con.setCookie(c, ssoCookie, "", -1)
	var r *ssoRefusal
	if errors.As(err, &r) {
		con.recordSignInBy(c, "oidc", r.Name, false, r.Why)
		return con.loginAgain(c, r.Status, r.Why)
	}
	if err != nil {
		return err
	}
	secret, _, err := con.store.newSessionFor(ctx, person.Name, true)
	if err != nil {
		return err
	}
	con.setCookie(c, sessionCookie, secret, con.cfg.Console.SessionMaxAge)
	con.log.Info("signed in", "user", person.Name, "method", "oidc")
	con.recordSignInBy(c, "oidc", person.Name, true, "")
	return c.Redirect(http.StatusSeeOther, next)
}

// finish checks everything the callback carries and returns where to go
// and who signed in; a refusal is an *ssoRefusal.
func (s *sso) finish(ctx context.Context, c echo.Context) (string, personRecord, error) {
	q := c.Request().URL.Query()
	if e := q.Get("error"); e != "" {
		// Only the error code, when it is one: anyone can send a browser
		// here with any error_description, which is no text for this page.
		if !oauthErrorCode.MatchString(e) {
			e = "an error"
		}
		return "", personRecord{}, refuse(http.StatusUnauthorized, "The sign-in provider did not sign you in (%s): sign in again.", e)
	}
	pending, err := s.take(ctx, q.Get("state"))
	if err != nil {
		return "", personRecord{}, err
	}
	ck, err := c.Cookie(ssoCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(hashSecret(ck.Value)), []byte(pending.Browser)) != 1 {
		return "", personRecord{}, refuse(http.StatusUnauthorized, "This sign-in was started in another browser, or this browser refused its cookie: sign in again from this browser.")
	}
	p, err := s.discover()
	if err != nil {
		return "", personRecord{}, err
	}
	tok, err := s.oauth(p).Exchange(oidc.ClientContext(ctx, s.client), q.Get("code"), oauth2.VerifierOption(pending.Verifier))
	if err != nil {
		return "", personRecord{}, refuse(http.StatusUnauthorized, "The sign-in provider did not accept the sign-in code (%v): sign in again.", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", personRecord{}, refuse(http.StatusUnauthorized, "The sign-in provider sent no ID token: ask an admin to check that console.oidc.scopes works with the provider.")
	}
	idt, err := p.VerifierContext(oidc.ClientContext(context.Background(), s.client), &oidc.Config{ClientID: s.cfg.ClientID, Now: s.now}).Verify(ctx, raw)
	if err != nil {
		return "", personRecord{}, refuse(http.StatusUnauthorized, "%s: sign in again; if this keeps happening, an admin should check console.oidc.", tokenProblem(err))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(pending.Nonce)) != 1 {
		return "", personRecord{}, refuse(http.StatusUnauthorized, "The ID token was not issued for this sign-in (its nonce does not match): sign in again.")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", personRecord{}, refuse(http.StatusUnauthorized, "The ID token's claims could not be read: sign in again.")
	}
	person, mapped, err := s.admit(claims)
	if err != nil {
		return "", personRecord{}, err
	}
	person.Issuer, person.Subject, person.SignedInAt = idt.Issuer, idt.Subject, s.now().UTC()
	if err := s.keep(ctx, person, mapped); err != nil {
		return "", personRecord{}, err
	}
	if !mapped {
		return "", personRecord{}, &ssoRefusal{Name: person.Name, Status: http.StatusForbidden, Why: fmt.Sprintf(
			"You are signed in at the provider as %s, but none of your groups gives access to airlock: ask an admin to add one of them to console.oidc.groups.", person.Name)}
	}
	return pending.Next, person, nil
}

// keep stores what this sign-in gave p in people.<b64 name>, with
// compare-and-set: refused when the name is a local user's or belongs to
// another account (issuer and subject), and, when none of p's groups is
// mapped (!mapped), with no roles or groups and marked removed, so that
// every earlier session and token of theirs loses them too.
func (s *sso) keep(ctx context.Context, p personRecord, mapped bool) error {
	busy := func(err error) error {
		return apierr.Wrap(apierr.Unavailable, err, "sign-in is unavailable for a moment: try again")
	}
	if _, local, err := s.store.user(ctx, p.Name); err != nil {
		return err
	} else if local {
		return &ssoRefusal{Name: p.Name, Status: http.StatusForbidden, Why: fmt.Sprintf(
			"%s is a local user of this console, so no one signs in as %s by single sign-on: sign in with that user's password, or ask an admin to rename the local user.", p.Name, p.Name)}
	}
	if !mapped {
		p.Roles, p.Groups, p.Removed = nil, nil, true
	}
	for range 10 {
		var rev uint64
		e, err := s.kv.Get(ctx, personKey(p.Name))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if !mapped {
				return nil // a stranger: nothing to take away, no name to claim
			}
		case err != nil:
			return busy(err)
		default:
			var old personRecord
			// A record from before accounts were bound (no subject) is bound by its next sign-in.
			if json.Unmarshal(e.Value(), &old) == nil && old.Subject != "" && (old.Issuer != p.Issuer || old.Subject != p.Subject) {
				return &ssoRefusal{Name: p.Name, Status: http.StatusForbidden, Why: fmt.Sprintf(
					"Another account already signs in as %s: ask an admin to check console.oidc.name_claim (it should name each person once).", p.Name)}
			}
			rev = e.Revision()
		}
		data, _ := json.Marshal(p)
		if rev == 0 {
			_, err = s.kv.Create(ctx, personKey(p.Name), data)
		} else {
			_, err = s.kv.Update(ctx, personKey(p.Name), data, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return busy(err)
		}
	}
	return apierr.New(apierr.Unavailable, "sign-in is busy: try again")
}

// take reads the pending sign-in of state and purges it with
// compare-and-set: of two callbacks with the same state (a replay, or the
// same link opened twice), on any replicas, one gets it.
func (s *sso) take(ctx context.Context, state string) (pendingLogin, error) {
	used := refuse(http.StatusUnauthorized, "This sign-in link was already used or has expired: sign in again.")
	if state == "" {
		return pendingLogin{}, used
	}
	e, err := s.kv.Get(ctx, pendingKey(state))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return pendingLogin{}, used
	}
	if err != nil {
		return pendingLogin{}, apierr.Wrap(apierr.Unavailable, err, "sign-in is unavailable for a moment: try again")
	}
	if err := s.store.remove(ctx, pendingKey(state), jetstream.LastRevision(e.Revision())); err != nil {
		return pendingLogin{}, used
	}
	var p pendingLogin
	if json.Unmarshal(e.Value(), &p) != nil || s.now().Sub(p.Created) > pendingTTL {
		return pendingLogin{}, used
	}
	return p, nil
}

// tokenProblem says in words why go-oidc refused an ID token.
func tokenProblem(err error) string {
	var expired *oidc.TokenExpiredError
	switch msg := err.Error(); {
	case errors.As(err, &expired):
		return "The ID token has expired"
	case strings.Contains(msg, "audience"):
		return "The ID token was issued for another application (wrong audience)"
	case strings.Contains(msg, "signature"):
		return "The ID token's signature does not match the provider's keys (a forged token)"
	case strings.Contains(msg, "issuer"):
		return "The ID token was issued by another provider"
	}
	return "The ID token could not be verified"
}

// admit checks the claims against console.oidc (a principal name, a
// verified email when the name is one or domains are restricted, the
// allowed domains) and returns the person with the roles and approver
// groups their groups give, and whether any of their groups is mapped.
func (s *sso) admit(claims map[string]any) (personRecord, bool, error) {
	name, _ := claims[s.cfg.NameClaim].(string)
	name = strings.TrimSpace(name)
	if name == "" {
		return personRecord{}, false, refuse(http.StatusForbidden, "The sign-in provider did not say who you are (no %q claim): ask an admin to check console.oidc.name_claim and scopes.", s.cfg.NameClaim)
	}
	if !plainPrincipal(name) {
		return personRecord{}, false, refuse(http.StatusForbidden, "The name the provider gave you cannot be an airlock principal: ask an admin to choose another console.oidc.name_claim.")
	}
	// An address is a name only when the provider vouches for it: anyone
	// can type any address into an account at most providers.
	if s.cfg.NameClaim == "email" || strings.Contains(name, "@") || len(s.cfg.AllowedDomains) > 0 {
		if verified, _ := claims["email_verified"].(bool); !verified {
			return personRecord{}, false, &ssoRefusal{Name: name, Status: http.StatusForbidden, Why: "The sign-in provider has not verified your email address: verify it there, then sign in again."}
		}
	}
	if len(s.cfg.AllowedDomains) > 0 {
		email, _ := claims["email"].(string)
		_, domain, _ := strings.Cut(strings.ToLower(email), "@")
		if domain == "" || !slices.ContainsFunc(s.cfg.AllowedDomains, func(d string) bool { return strings.EqualFold(strings.TrimPrefix(d, "@"), domain) }) {
			return personRecord{}, false, &ssoRefusal{Name: name, Status: http.StatusForbidden, Why: "Your email address is not at a domain this console admits: sign in with your work account."}
		}
	}
	var theirs []string
	switch g := claims[s.cfg.GroupsClaim].(type) {
	case string:
		theirs = []string{g}
	case []any:
		for _, v := range g {
			if s, ok := v.(string); ok {
				theirs = append(theirs, s)
			}
		}
	}
	p := personRecord{Name: name}
	known := false
	for _, g := range theirs {
		m, ok := s.cfg.Groups[g]
		if !ok {
			continue
		}
		known = true
		p.Roles = appendNew(p.Roles, m.Roles...)
		p.Groups = appendNew(p.Groups, m.Groups...)
	}
	return p, known, nil
}

// plainPrincipal reports whether name can stand for a person everywhere a
// principal appears: printable text of a sane length, and none of the words
// that mean something else in approvers lists (requester, group:…) or in the
// console (agent:… is an agent token).
func plainPrincipal(name string) bool {
	if len(name) > 256 || !utf8.ValidString(name) || name == calls.Requester ||
		strings.HasPrefix(name, "group:") || strings.HasPrefix(name, "agent:") {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

func appendNew(to []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(to, it) {
			to = append(to, it)
		}
	}
	return to
}

// person returns what name's last single sign-on gave them; not found for
// a person removed from every mapped group, and for a name that is (now) a
// local user's: an SSO session or token never acts with a local user's name.
func (s *store) person(ctx context.Context, name string) (userRecord, bool, error) {
	if name == "" {
		return userRecord{}, false, nil
	}
	if _, local, err := s.user(ctx, name); err != nil || local {
		return userRecord{}, false, err
	}
	e, err := s.kv.Get(ctx, personKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return userRecord{}, false, nil
	}
	if err != nil {
		return userRecord{}, false, apierr.Wrap(apierr.Unavailable, err, "read person %s", name)
	}
	var p personRecord
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return userRecord{}, false, fmt.Errorf("decode person %s: %w", name, err)
	}
	if p.Removed {
		return userRecord{}, false, nil
	}
	return userRecord{Name: p.Name, Roles: p.Roles, Groups: p.Groups}, true, nil
}

// VouchedGroups returns the approver groups name's last single sign-on
// gave them (none when console.oidc is not configured or they never signed
// in that way): for a front-end in this process that maps its own users to
// the same principals, Slack's clicks.
func (con *Console) VouchedGroups(ctx context.Context, name string) ([]string, error) {
	if con.sso == nil {
		return nil, nil
	}
	p, _, err := con.store.person(ctx, name)
	return p.Groups, err
}

// sweepPending purges sign-ins that were started and never finished.
func (s *sso) sweepPending(ctx context.Context) error {
	return s.store.purgeStale(ctx, "sso.pending.*", "pending sign-ins", func(value []byte) bool {
		var p pendingLogin
		return json.Unmarshal(value, &p) != nil || s.now().Sub(p.Created) > pendingTTL
	})
}
