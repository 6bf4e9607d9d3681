package console

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// Principal is who a request acts for, after authentication.
// How a principal signed in (Principal.Via).
const (
	ViaSession = "session"
	ViaToken   = "token"
)

type Principal struct {
	Name   string
	Roles  []string
	Groups []string
	// Via is ViaSession (console cookie) or ViaToken (bearer).
	Via string
	// TokenKind and AgentID are set for bearer tokens.
	TokenKind string
	AgentID   string
	// OnBehalfOf is the agent token's binding (agent tokens only).
	OnBehalfOf string
	// CSRF is the session's anti-forgery token (sessions only).
	CSRF string
	// sso marks a person who signed in by single sign-on (their roles are
	// those of their last sign-in, people.*, never a local user's of the
	// same name), and a personal token made in such a session.
	sso bool
}

// Has reports whether p holds role; admin holds every role.
func (p Principal) Has(role string) bool {
	return slices.Contains(p.Roles, role) || slices.Contains(p.Roles, config.RoleAdmin)
}

// mayDecide reports whether p may send decisions about rec: reviewers may
// (the approval service still checks they are among its approvers), and so
// may the person the call acts for, whatever their role, when its rule asks
// them to confirm their own call and airlock verified who they are
// (self-confirmation).
func mayDecide(p Principal, rec *airlockv1.ApprovalRecord) bool {
	return p.CanDecide() || calls.RequesterMayDecide(rec.GetCall(), rec.GetDecision(), p.Name)
}

// CanRead reports whether p may read every call: reviewers, auditors and
// admins. A person with no role signs in only to confirm the calls made for
// them (self-confirmation) and reads only those (mayRead).
func (p Principal) CanRead() bool {
	return p.Has(config.RoleReviewer) || p.Has(config.RoleAuditor)
}

// mayRead reports whether p may read rec: anyone who can read every call,
// or the verified person the call is made for.
func mayRead(p Principal, rec *airlockv1.ApprovalRecord) bool {
	c := rec.GetCall()
	return p.CanRead() || (p.Name != "" && c.GetOnBehalfOf() == p.Name && c.GetOnBehalfOfVerified())
}

// CanDecide reports whether p may send decisions to the approval service
// (which still checks that p is among the call's approvers).
func (p Principal) CanDecide() bool { return p.Has(config.RoleReviewer) }

// Actor is p as the approval service sees it, with the approver groups the
// console vouches for (a single sign-on's mapped groups, or a local user's
// configured ones, which the approval service also reads from its configuration).
func (p Principal) Actor(channel string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: p.Name, Channel: channel, Groups: p.Groups}
}

// Operator reports whether p holds airlock's operator role (admin): the
// console vouches for it on a cancel (Actor.operator), and the approval
// service then lets p withdraw any pending call.
func (p Principal) Operator() bool { return slices.Contains(p.Roles, config.RoleAdmin) }

// channel names where a decision came from: "console" for the web pages,
// "api" for REST (the CLI sets X-Airlock-Channel: cli on its requests).
// cli and api share the same token, so that part is the client's own
// word: a label for the trail, never an authority.
func channel(c echo.Context) string {
	if strings.HasPrefix(c.Path(), "/api/") {
		if c.Request().Header.Get("X-Airlock-Channel") == "cli" {
			return "cli"
		}
		return "api"
	}
	return "console"
}

const (
	sessionCookie    = "airlock_session"
	loginCSRFCookie  = "airlock_login"
	csrfField        = "_csrf"
	csrfHeader       = "X-CSRF-Token"
	principalKey     = "airlock.principal"
	contentSecPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// access says who may reach a route.
type access int

const (
	public       access = iota // no sign-in (sign-in page, static assets)
	signedIn                   // any console user or personal token
	reviewerOnly               // reviewer or admin
	deciders                   // reviewers, and anyone deciding their own self-confirmed call (checked per call: mayDecide) or canceling a call made for them (useCases.cancel)
	auditorOnly                // auditor or admin
	adminOnly                  // admin
	agentOnly                  // an agent token
)

func (a access) allows(p Principal) bool {
	switch a {
	case public:
		return true
	case agentOnly:
		return p.TokenKind == TokenAgent
	}
	if p.TokenKind == TokenAgent {
		return false // agent tokens only submit and await calls
	}
	switch a {
	case reviewerOnly:
		return p.Has(config.RoleReviewer)
	case deciders:
		return p.Name != ""
	case auditorOnly:
		return p.Has(config.RoleAuditor)
	case adminOnly:
		return p.Has(config.RoleAdmin)
	}
	return p.Name != ""
}

func (a access) need() string {
	switch a {
	case reviewerOnly:
		return "the reviewer role"
	case auditorOnly:
		return "the auditor role"
	case adminOnly:
		return "the admin role"
	case agentOnly:
		return "an agent token"
	}
	return "a signed-in user"
}

// securityHeaders sets the strict content security policy and friends on every console response.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		return next(c)
	}
}

// authenticate resolves the principal (bearer token or session cookie),
// enforces the route's access and, for cookie-authenticated state changes,
// the CSRF token. Bearer-token requests are exempt from CSRF: a browser never
// attaches them by itself.
func (con *Console) authenticate(a access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if a == public {
				return next(c)
			}
			ctx := c.Request().Context()
			var p Principal
			if auth := c.Request().Header.Get(echo.HeaderAuthorization); auth != "" {
				secret, ok := strings.CutPrefix(auth, "Bearer ")
				if !ok {
					return apierr.New(apierr.Unauthenticated, "use Authorization: Bearer <token>")
				}
				tok, err := con.store.token(ctx, strings.TrimSpace(secret))
				if err != nil {
					return err
				}
				p = Principal{Name: tok.Owner, Via: ViaToken, TokenKind: tok.Kind, AgentID: tok.AgentID, OnBehalfOf: tok.OnBehalfOf}
				if tok.Kind == TokenAgent {
					// Never the admin who created it: an agent token speaks only for its agent.
					p.Name = "agent:" + tok.AgentID
				}
				if tok.Kind == TokenPersonal {
					// The way the session that made it resolved its owner, and no other.
					lookup := con.store.user
					if tok.OwnerSSO {
						if con.sso == nil {
							return apierr.New(apierr.Unauthenticated, "the API token's owner %s signs in by single sign-on, which is turned off: ask an admin", tok.Owner)
						}
						lookup = con.store.person
					}
					u, ok, err := lookup(ctx, tok.Owner)
					if err != nil {
						return err
					}
					if !ok {
						return apierr.New(apierr.Unauthenticated, "the API token's user %s no longer exists or no longer has access: ask an admin", tok.Owner)
					}
					p.Roles, p.Groups, p.sso = u.Roles, u.Groups, tok.OwnerSSO
				}
			} else {
				ck, err := c.Cookie(sessionCookie)
				if err != nil {
					return con.signInFirst(c)
				}
				sess, err := con.store.session(ctx, ck.Value)
				if err != nil {
					if apierr.CodeOf(err) == apierr.Unauthenticated {
						return con.signInFirst(c)
					}
					return err
				}
				if sess.SSO && con.sso == nil {
					return con.signInFirst(c) // single sign-on was turned off since
				}
				lookup := con.store.user
				if sess.SSO {
					lookup = con.store.person
				}
				u, ok, err := lookup(ctx, sess.User)
				if err != nil {
					return err
				}
				if !ok {
					return con.signInFirst(c)
				}
				p = Principal{Name: u.Name, Roles: u.Roles, Groups: u.Groups, Via: ViaSession, CSRF: sess.CSRF, sso: sess.SSO}
				if unsafeMethod(c.Request().Method) {
					if err := checkCSRF(c, sess.CSRF); err != nil {
						return err
					}
				}
			}
			if !a.allows(p) {
				err := apierr.New(apierr.NotAuthorized, "%s may not do this: it needs %s", p.Name, a.need())
				con.recordRefused(c, p, err.Error())
				return err
			}
			c.Set(principalKey, p)
			if a == deciders && !p.CanDecide() {
				// Whether this person may decide is known only once the
				// call is read: a refusal then is recorded like any other.
				return con.refusedIf(c, next(c))
			}
			return next(c)
		}
	}
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

func checkCSRF(c echo.Context, want string) error {
	got := c.Request().Header.Get(csrfHeader)
	if got == "" {
		got = c.FormValue(csrfField)
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return apierr.New(apierr.NotAuthorized, "the form's anti-forgery token is missing or stale: reload the page and try again")
	}
	return nil
}

// signInFirst sends a browser to the sign-in page and an API client a 401.
func (con *Console) signInFirst(c echo.Context) error {
	if isAPI(c) || c.Request().Method != http.MethodGet {
		return apierr.New(apierr.Unauthenticated, "sign in first (console) or send Authorization: Bearer <token> (API)")
	}
	return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
}

func isAPI(c echo.Context) bool {
	return strings.HasPrefix(c.Request().URL.Path, "/api/")
}

func principal(c echo.Context) Principal {
	p, _ := c.Get(principalKey).(Principal)
	return p
}

// secure reports whether cookies should carry the Secure attribute.
func (con *Console) secure(c echo.Context) bool {
	return con.cfg.Console.SecureCookies || c.Scheme() == "https" ||
		strings.HasPrefix(con.cfg.HTTP.PublicURL, "https://")
}

func (con *Console) setCookie(c echo.Context, name, value string, maxAge time.Duration) {
	ck := &http.Cookie{
		Name: name, Value: value, Path: "/", HttpOnly: true, Secure: con.secure(c),
		SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge.Seconds()),
	}
	if maxAge < 0 {
		ck.MaxAge = -1
	}
	c.SetCookie(ck)
}
