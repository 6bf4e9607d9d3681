package config

import "time"

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
}

// SignInLimit bounds failed sign-ins: past either count within Window,
// further attempts are refused until the window has passed, whether or not
// the user exists.
type SignInLimit struct {
	FailuresPerUser    int           `yaml:"failures_per_user"`
	FailuresPerAddress int           `yaml:"failures_per_address"`
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
		SignIn:        SignInLimit{FailuresPerUser: 5, FailuresPerAddress: 20, Window: 15 * time.Minute},
	}
}
