package config

import (
	"fmt"
	"net/url"
	"time"
)

// Console configures the web console and REST API.
type Console struct {
	// Users who may sign in. Users created at run time (the first admin that
	// `airlock dev` creates) live in the console bucket; a user named here
	// takes precedence over one of the same name in the bucket.
	Users []User `yaml:"users"`
	// SessionTTL is how long a console session lasts without activity.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// SessionMaxAge bounds a session whatever its activity.
	SessionMaxAge time.Duration `yaml:"session_max_age"`
	// TokenTTL is the default lifetime of a personal API token created in the
	// console; 0 means tokens do not expire.
	TokenTTL time.Duration `yaml:"token_ttl"`
	// SecureCookies forces the cookies' Secure attribute. Without it, cookies
	// are Secure when the request came over https (directly or, behind a
	// proxy, with X-Forwarded-Proto: https) or http.public_url is https.
	SecureCookies bool `yaml:"secure_cookies"`
	// MaxWait caps ?wait= on GET /api/v1/calls/{id}.
	MaxWait time.Duration `yaml:"max_wait"`
	// SignIn limits failed sign-ins, per user name and per client address.
	SignIn SignInLimit `yaml:"sign_in"`
	// TrustedProxies are the addresses or CIDRs of reverse proxies whose
	// X-Forwarded-For names the client; from anywhere else the connection's
	// address is the client's (the header is ignored).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// OIDC signs people in with an OpenID Connect provider (single sign-on).
	OIDC OIDC `yaml:"oidc"`
	// WebPush lets reviewers turn on notifications on their devices (phones).
	WebPush WebPush `yaml:"webpush"`
}

// WebPush is Web Push (VAPID, RFC 8292; payloads encrypted per RFC 8291):
// a reviewer subscribes each device from the console and is told there of
// the calls they may decide, reminders and escalations. Off while
// VAPIDPrivateKeyFile is empty (`airlock dev` creates one in its data dir).
type WebPush struct {
	// VAPIDPrivateKeyFile holds the VAPID private key: the P-256 scalar,
	// base64url, on one line (`airlock dev` writes one, mode 0600). The
	// public key, which browsers subscribe with, is derived from it; a new
	// key orphans every existing subscription.
	VAPIDPrivateKeyFile string `yaml:"vapid_private_key_file"`
	// Subject is the VAPID "sub" claim push services contact you by: a
	// mailto: or https: URL (default: http.public_url when https, else
	// mailto:airlock@localhost, which some push services refuse).
	Subject string `yaml:"subject"`
	// Timeout bounds one delivery to one device (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// AllowLoopbackHTTP lets subscriptions point at http:// endpoints on a
	// loopback address (tests with a local push endpoint). Without it only
	// https endpoints on public addresses are accepted.
	AllowLoopbackHTTP bool `yaml:"allow_loopback_http"`
}

// Enabled reports whether Web Push is configured.
func (w WebPush) Enabled() bool { return w.VAPIDPrivateKeyFile != "" }

// SignInLimit bounds failed sign-ins: past either count within Window,
// further attempts are refused until the window has passed, whether or not
// the user exists. StartsPerAddress bounds single sign-ons started from one
// client address within Window (each stores a pending sign-in); 0 means
// no bound. An IPv6 client's address counts as its /64 network.
type SignInLimit struct {
	FailuresPerUser    int           `yaml:"failures_per_user"`
	FailuresPerAddress int           `yaml:"failures_per_address"`
	StartsPerAddress   int           `yaml:"sso_starts_per_address"`
	Window             time.Duration `yaml:"window"`
}

// User is a local console account.
type User struct {
	// Name is the principal the user decides as (what policies list as approvers).
	Name string `yaml:"name"`
	// PasswordHash is a bcrypt hash (`airlock users hash-password` prints one).
	PasswordHash string `yaml:"password_hash"`
	// Roles: reviewer (decide calls), auditor (read everything, decide
	// nothing), admin (everything, plus rules, grants and agent tokens).
	Roles []string `yaml:"roles"`
	// Groups the user belongs to, shown in the console; the approval service
	// resolves "group:x" approvers from approval.groups.
	Groups []string `yaml:"groups"`
}

// OIDC is single sign-on with an OpenID Connect provider: the authorization
// code flow with PKCE, state and nonce, the ID token verified against the
// provider's discovery document and keys. A person's roles and approver
// groups come from their groups at each sign-in, through Groups.
type OIDC struct {
	// Issuer is the provider's issuer URL (its discovery document is
	// <issuer>/.well-known/openid-configuration); empty turns SSO off.
	Issuer string `yaml:"issuer"`
	// ClientID and ClientSecret are the console's registration with the
	// provider (a public client leaves the secret empty and relies on PKCE).
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// RedirectURL is where the provider sends the browser back; register it
	// with the provider. Default: http.public_url + /login/sso/callback.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes asked for besides openid.
	Scopes []string `yaml:"scopes"`
	// NameClaim is the claim that names the person: the principal that
	// approvers lists, rules, slack.users and the audit trail use.
	NameClaim string `yaml:"name_claim"`
	// GroupsClaim is the claim that lists the person's groups.
	GroupsClaim string `yaml:"groups_claim"`
	// Groups maps a provider group to airlock roles and approver groups.
	// A person none of whose groups is listed here cannot sign in.
	Groups map[string]OIDCGroup `yaml:"groups"`
	// AllowedDomains, when set, admits only people whose email claim is at
	// one of these domains and whom the provider says verified it
	// (email_verified: true).
	AllowedDomains []string `yaml:"allowed_domains"`
	// DisablePasswords turns the password form off: people sign in only
	// through the provider (API tokens keep working).
	DisablePasswords bool `yaml:"disable_passwords"`
	// DisplayName names the provider on the sign-in button ("Sign in with …").
	DisplayName string `yaml:"display_name"`
}

// OIDCGroup is what one provider group gives its members.
type OIDCGroup struct {
	// Roles: reviewer, auditor, admin.
	Roles []string `yaml:"roles"`
	// Groups are approver groups: "reviewers" lets the member decide what
	// a rule asks of group:reviewers.
	Groups []string `yaml:"groups"`
}

// Enabled reports whether single sign-on is configured.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

func (o OIDC) validate() []error {
	if !o.Enabled() {
		if o.DisablePasswords {
			return []error{fmt.Errorf("console.oidc.disable_passwords is set but console.oidc.issuer is empty: nobody could sign in; set the issuer or drop disable_passwords")}
		}
		return nil
	}
	var errs []error
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("console.oidc.issuer %q is not a URL such as https://login.example.com", o.Issuer))
	}
	if o.ClientID == "" {
		errs = append(errs, fmt.Errorf("console.oidc.client_id is empty: register the console with the provider and copy its client id"))
	}
	if o.NameClaim == "" || o.GroupsClaim == "" {
		errs = append(errs, fmt.Errorf("console.oidc.name_claim and groups_claim must name claims, e.g. email and groups"))
	}
	if len(o.Groups) == 0 {
		errs = append(errs, fmt.Errorf("console.oidc.groups is empty: map at least one provider group to roles, or nobody could sign in"))
	}
	for g, m := range o.Groups {
		for _, r := range m.Roles {
			if r != RoleReviewer && r != RoleAuditor && r != RoleAdmin {
				errs = append(errs, fmt.Errorf("console.oidc.groups.%s: unknown role %q: use reviewer, auditor or admin", g, r))
			}
		}
	}
	return errs
}

// Console roles.
const (
	RoleReviewer = "reviewer"
	RoleAuditor  = "auditor"
	RoleAdmin    = "admin"
)

func defaultConsole() Console {
	return Console{
		SessionTTL:    12 * time.Hour,
		SessionMaxAge: 7 * 24 * time.Hour,
		TokenTTL:      90 * 24 * time.Hour,
		MaxWait:       60 * time.Second,
		SignIn:        SignInLimit{FailuresPerUser: 5, FailuresPerAddress: 20, StartsPerAddress: 60, Window: 15 * time.Minute},
		OIDC:          OIDC{Scopes: []string{"email", "profile"}, NameClaim: "email", GroupsClaim: "groups", DisplayName: "single sign-on"},
	}
}
