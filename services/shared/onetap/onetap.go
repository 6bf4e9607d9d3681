// Package onetap is the one-tap decision link of an approval mail: a token
// that names one revision of one agent's call, the digest of the arguments
// the mail showed, the approver it was mailed to, the action (approve or
// deny) and an expiry no later than the call's deadline, MAC'd with a key
// the mailer and the console share (email.one_tap).
//
// A token is never a credential on its own. The console decides with it
// only in a signed-in session of the very approver it names (single
// sign-on or a local user), after a same-origin form POST with the
// session's anti-forgery token; opening the link (GET) only shows the call.
// So a forwarded mail, a leaked link or a mail scanner that opens every
// link decides nothing, and a link for a revision or arguments that changed
// since is refused. Each approver's links for a revision are used once, on
// every console replica: the use is a KV create (UseKey).
package onetap

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// Actions a link takes.
const (
	Approve = "approve"
	Deny    = "deny"
)

// PathPrefix starts the console path of every link: PathPrefix + token.
const PathPrefix = "/one-tap/"

// maxToken bounds the text Parse looks at: a real token is a few hundred
// bytes; anything longer is refused before any decoding.
const maxToken = 4 << 10

// Token is what a link binds.
type Token struct {
	Agent    string    `json:"a"`
	Call     string    `json:"c"`
	Revision uint32    `json:"r"`
	Digest   string    `json:"d"`
	Approver string    `json:"p"`
	Action   string    `json:"x"`
	Expires  time.Time `json:"e"`
}

// Ref is the call revision t names.
func (t Token) Ref() callref.Ref {
	return callref.Ref{Agent: t.Agent, Call: t.Call, Rev: max(t.Revision, 1)}
}

// UseKey is the console bucket key that records the use of t: the same for
// both of an approver's links (approve and deny) of one revision and for
// the links of every mail about it (request, reminder, escalation), so the
// approver decides through a link once per revision. It includes the agent
// (callref) and a hash of the approver, whose name may hold characters a
// key cannot.
func (t Token) UseKey() string {
	h := sha256.Sum256([]byte(t.Approver))
	return "onetap." + t.Ref().Key() + "." + hex.EncodeToString(h[:16])
}

// Errors Parse returns; each wraps ErrRefused.
var (
	// ErrRefused is any link that cannot be used.
	ErrRefused = errors.New("this decision link cannot be used")
	// ErrInvalid: the link was altered, cut, or made with another key.
	ErrInvalid = fmt.Errorf("%w: it is not a link airlock made (altered, cut short, or made with another key)", ErrRefused)
	// ErrExpired: the link's time (the call's deadline at the latest) passed.
	ErrExpired = fmt.Errorf("%w: it has expired", ErrRefused)
)

// Key is the MAC key of the links.
type Key struct{ k seal.Key }

// LoadKey reads the key cfg.Email.OneTap names: its hex value, else its
// file (refused when others may read it). It is refused when it is the
// decision or the front-end key (those of cfg.Security this process can
// read): the console, which must hold the one-tap key, must never hold the
// decision key, and a front-end key that makes links would let any
// front-end mint them.
func LoadKey(cfg config.Config) (Key, error) {
	c := cfg.Email.OneTap
	if c.Key == "" && c.KeyFile == "" {
		return Key{}, errors.New("email.one_tap is enabled without a key: set email.one_tap.key_file (make one with `airlock keys generate FILE`) or AIRLOCK_EMAIL_ONE_TAP_KEY; mailer and console need the same key")
	}
	k, err := seal.Load("email.one_tap.key", c.Key, c.KeyFile)
	if err != nil {
		return Key{}, err
	}
	s := cfg.Security
	for _, other := range []struct{ what, inline, file string }{
		{"security.decision_key", s.DecisionKey, s.DecisionKeyFile},
		{"security.frontend_key", s.FrontendKey, s.FrontendKeyFile},
	} {
		// A key this process does not hold (not configured, not mounted)
		// cannot be compared here; the process that holds it compares.
		if o, err := seal.Load(other.what, other.inline, other.file); err == nil && k.Same(o) {
			return Key{}, fmt.Errorf("email.one_tap's key is %s: give the one-tap links a key of their own (`airlock keys generate FILE`)", other.what)
		}
	}
	return Key{k: k}, nil
}

// NewKey wraps a seal key (tests, and callers that load it themselves).
func NewKey(k seal.Key) Key { return Key{k: k} }

// Mint returns t as a token string: base64url(JSON) "." MAC. It refuses a
// token that does not name a valid call, approver and action.
func (k Key) Mint(t Token) (string, error) {
	if err := t.valid(); err != nil {
		return "", err
	}
	if !k.k.Valid() {
		return "", errors.New("one-tap links: no key")
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("one-tap link: %w", err)
	}
	body := base64.RawURLEncoding.EncodeToString(raw)
	return body + "." + k.k.Sign("onetap/v1", body), nil
}

// Parse verifies s at now and returns the token it carries: ErrInvalid for
// anything the key did not MAC as it is, ErrExpired (with the token, so the
// refusal can name its call) once its expiry passed.
func (k Key) Parse(s string, now time.Time) (Token, error) {
	if len(s) > maxToken {
		return Token{}, ErrInvalid
	}
	body, mac, ok := strings.Cut(s, ".")
	if !ok || !k.k.Verify(mac, "onetap/v1", body) {
		return Token{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil {
		return Token{}, ErrInvalid
	}
	var t Token
	if err := json.Unmarshal(raw, &t); err != nil || t.valid() != nil {
		return Token{}, ErrInvalid
	}
	if !now.Before(t.Expires) {
		return t, ErrExpired
	}
	return t, nil
}

func (t Token) valid() error {
	if _, err := callref.New(t.Agent, t.Call, t.Revision); err != nil {
		return fmt.Errorf("one-tap link: %w", err)
	}
	switch {
	case t.Revision == 0:
		return errors.New("one-tap link: no revision")
	case t.Digest == "":
		return errors.New("one-tap link: no arguments digest")
	case t.Approver == "":
		return errors.New("one-tap link: no approver")
	case t.Action != Approve && t.Action != Deny:
		return fmt.Errorf("one-tap link: action %q is neither approve nor deny", t.Action)
	case t.Expires.IsZero():
		return errors.New("one-tap link: no expiry")
	}
	return nil
}

// URL is the link to token on the console at publicURL.
func URL(publicURL, token string) string {
	return strings.TrimRight(publicURL, "/") + PathPrefix + url.PathEscape(token)
}
