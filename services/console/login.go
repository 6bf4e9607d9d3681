package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// Sign-in: a double-submit CSRF token on the form (there is no session
// yet), bcrypt against the user's hash — or against a dummy hash of the same
// cost for a name that does not exist, so that both take the same time —
// and a limit on failed attempts per user name and per client address, kept
// in the console bucket so that every replica enforces the same count.
// Nothing about the attempt but the user name of a successful sign-in is
// logged: a password typed into the wrong field must not reach a log.

func (con *Console) loginPage(c echo.Context) error {
	return con.loginForm(c, http.StatusOK, "", c.QueryParam("next"))
}

// loginAgain shows the sign-in form again with a sentence and status.
func (con *Console) loginAgain(c echo.Context, status int, msg string) error {
	return con.loginForm(c, status, msg, c.FormValue("next"))
}

// loginForm renders the sign-in page: the single sign-on button when
// console.oidc is configured, the password form unless it turns passwords off.
func (con *Console) loginForm(c echo.Context, status int, msg, next string) error {
	v := &loginView{layout: layout{Title: "Sign in", Error: msg}, Next: safeNext(next), Passwords: !con.cfg.Console.OIDC.DisablePasswords}
	if con.sso != nil {
		v.SSO = con.sso.cfg.DisplayName
	}
	if v.Passwords {
		v.Login = randomSecret(24)
		con.setCookie(c, loginCSRFCookie, v.Login, 30*time.Minute)
	}
	return con.render(c, status, "login", v)
}

func (con *Console) login(c echo.Context) error {
	ctx := c.Request().Context()
	if con.cfg.Console.OIDC.DisablePasswords {
		return con.loginAgain(c, http.StatusForbidden, "Password sign-in is turned off on this console: sign in with "+con.sso.cfg.DisplayName+".")
	}
	ck, err := c.Cookie(loginCSRFCookie)
	if err != nil || ck.Value == "" || c.FormValue(csrfField) != ck.Value {
		return apierr.New(apierr.NotAuthorized, "the sign-in form expired or came from another site: open the sign-in page again")
	}
	name, addr := strings.TrimSpace(c.FormValue("user")), limitedAddr(con.clientAddr(c))
	if wait, err := con.logins.blocked(ctx, name, addr); err != nil {
		return err
	} else if wait > 0 {
		con.recordSignIn(c, name, false, "too many failed sign-ins for this user or from this address")
		return con.loginAgain(c, http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins for this user or from this address: try again in %s, or ask an admin to check the account.", wait.Round(time.Minute)))
	}
	u, err := con.store.checkPassword(ctx, name, c.FormValue("password"))
	if err != nil {
		if apierr.CodeOf(err) != apierr.Unauthenticated {
			return err
		}
		con.recordSignIn(c, name, false, "wrong user name or password")
		if err := con.logins.failed(ctx, name, addr); err != nil {
			return err
		}
		return con.loginAgain(c, http.StatusUnauthorized, "Wrong user name or password.")
	}
	if err := con.logins.succeeded(ctx, name); err != nil {
		return err
	}
	secret, _, err := con.store.newSession(ctx, u.Name)
	if err != nil {
		return err
	}
	con.setCookie(c, loginCSRFCookie, "", -1)
	con.setCookie(c, sessionCookie, secret, con.cfg.Console.SessionMaxAge)
	con.log.Info("signed in", "user", u.Name)
	con.recordSignIn(c, u.Name, true, "")
	return c.Redirect(http.StatusSeeOther, safeNext(c.FormValue("next")))
}

func (con *Console) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if err := con.store.endSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	con.setCookie(c, sessionCookie, "", -1)
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps a post-sign-in redirect on this site: a path that starts
// with one "/", with no scheme, host, backslash or control character (a
// browser drops tabs and newlines from a URL, so "/\t/evil.example" would be
// "//evil.example"), re-encoded as it was parsed. Anything else is "/".
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || len(next) > 2048 {
		return "/"
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	p := u.EscapedPath()
	// The decoded path must not start a second slash either ("/%2F/evil").
	if !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.HasPrefix(p, "//") {
		return "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// clientAddr is the client's address: the connection's, or, from a
// trusted proxy (console.trusted_proxies), the last address in
// X-Forwarded-For that is not itself a trusted proxy.
func (con *Console) clientAddr(c echo.Context) string {
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	if !con.trusted(host) {
		return host
	}
	hops := strings.Split(c.Request().Header.Get("X-Forwarded-For"), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" {
			continue
		}
		if !con.trusted(h) {
			return h
		}
	}
	return host
}

// limitedAddr is what sign-in limits count an address as (loginLimiter):
// an IPv4 address itself, an IPv6 address's /64 network. One IPv6 client
// holds a whole /64 (a home or cloud host gets one, SLAAC and privacy
// addresses rotate within it), so counted address by address it had 2^64
// fresh starts: console.sign_in's failures_per_address did not bound its
// guesses, and every address it used left counters in the console bucket.
// Anything that is not an address (a proxy's odd X-Forwarded-For) is
// counted as written, at most 64 bytes of it.
func limitedAddr(addr string) string {
	ip := net.ParseIP(addr)
	switch {
	case ip == nil:
		return addr[:min(len(addr), 64)]
	case ip.To4() != nil:
		return ip.To4().String()
	default:
		return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
}

func (con *Console) trusted(addr string) bool {
	ip := net.ParseIP(addr)
	for _, n := range con.proxies {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// parseProxies reads console.trusted_proxies: addresses or CIDRs.
func parseProxies(list []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, p := range list {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "/") {
			if ip := net.ParseIP(p); ip != nil && ip.To4() != nil {
				p += "/32"
			} else {
				p += "/128"
			}
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return nil, fmt.Errorf("console.trusted_proxies: %q is not an address or CIDR such as 10.0.0.0/8", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// loginLimiter counts failed sign-ins per user name and per client address
// and single sign-ons started per client address in the console bucket
// (logins.user.<name>, logins.addr.<address>, logins.sso.<address>), with
// compare-and-set so that replicas count together.
//
// A counter is written with its window's end as its TTL, and cleared with a
// purge whose marker expires too, where the bucket takes per-key TTLs
// (bus.TakesKeyTTLs): an unauthenticated client makes counters (each new
// user name it tries, each network it tries from), and a counter the sweep
// only deleted left its marker in the bucket for ever. A bucket provisioned
// before it took TTLs (store.keyTTLs false) keeps the sweep's purges.
type loginLimiter struct {
	store *store
	limit config.SignInLimit
	now   func() time.Time
}

func newLoginLimiter(st *store, limit config.SignInLimit, now func() time.Time) *loginLimiter {
	if limit.Window <= 0 {
		limit.Window = 15 * time.Minute
	}
	return &loginLimiter{store: st, limit: limit, now: now}
}

// failures is one counter: failures since the window began.
type failures struct {
	Count int       `json:"count"`
	Since time.Time `json:"since"`
}

func limiterKey(kind, s string) string {
	return "logins." + kind + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(s)))
}

func (l *loginLimiter) read(ctx context.Context, key string) (failures, uint64, error) {
	e, err := l.store.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return failures{}, 0, nil
	}
	if err != nil {
		return failures{}, 0, apierr.Wrap(apierr.Unavailable, err, "sign-in is unavailable for a moment: try again")
	}
	return l.current(e.Value()), e.Revision(), nil
}

// current is the counter stored as value: none once its window has
// passed, nor when it does not decode (a damaged counter starts again).
func (l *loginLimiter) current(value []byte) failures {
	var f failures
	if json.Unmarshal(value, &f) != nil || l.now().Sub(f.Since) >= l.limit.Window {
		return failures{}
	}
	return f
}

// blocked says how long until name or addr may try again (0: now).
func (l *loginLimiter) blocked(ctx context.Context, name, addr string) (time.Duration, error) {
	var wait time.Duration
	for _, c := range []struct {
		key   string
		limit int
	}{{limiterKey("user", name), l.limit.FailuresPerUser}, {limiterKey("addr", addr), l.limit.FailuresPerAddress}} {
		if c.limit <= 0 {
			continue
		}
		f, _, err := l.read(ctx, c.key)
		if err != nil {
			return 0, err
		}
		if f.Count >= c.limit {
			wait = max(wait, f.Since.Add(l.limit.Window).Sub(l.now()))
		}
	}
	return wait, nil
}

// failed counts one failed sign-in against name and addr.
func (l *loginLimiter) failed(ctx context.Context, name, addr string) error {
	for _, key := range []string{limiterKey("user", name), limiterKey("addr", addr)} {
		if err := l.bump(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func (l *loginLimiter) bump(ctx context.Context, key string) error {
	for range 10 {
		f, rev, err := l.read(ctx, key)
		if err != nil {
			return err
		}
		if f.Count == 0 {
			f.Since = l.now()
		}
		f.Count++
		data, _ := json.Marshal(f)
		// Kept until its window ends, and a second for the clock.
		err = l.store.write(ctx, key, data, rev, f.Since.Add(l.limit.Window).Sub(l.now())+time.Second)
		if err == nil {
			return nil
		}
		if !bus.Conflict(err) {
			return apierr.Wrap(apierr.Unavailable, err, "sign-in is unavailable for a moment: try again")
		}
	}
	return apierr.New(apierr.Unavailable, "sign-in is busy: try again")
}

// started counts a single sign-on started from addr, unless addr started
// StartsPerAddress within the window: then it writes nothing and says how
// long until addr may start another.
func (l *loginLimiter) started(ctx context.Context, addr string) (time.Duration, error) {
	key := limiterKey("sso", addr)
	if l.limit.StartsPerAddress > 0 {
		f, _, err := l.read(ctx, key)
		if err != nil {
			return 0, err
		}
		if f.Count >= l.limit.StartsPerAddress {
			return max(f.Since.Add(l.limit.Window).Sub(l.now()), time.Second), nil
		}
	}
	return 0, l.bump(ctx, key)
}

// succeeded clears the user's failures (not the address's: a correct
// password for one account says nothing about guesses at others).
func (l *loginLimiter) succeeded(ctx context.Context, name string) error {
	if err := l.store.remove(ctx, limiterKey("user", name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return apierr.Wrap(apierr.Unavailable, err, "sign-in is unavailable for a moment: try again")
	}
	return nil
}

// sweep removes counters whose window has passed (store.purgeStale: one
// bumped since it was read is kept).
func (l *loginLimiter) sweep(ctx context.Context) error {
	return l.store.purgeStale(ctx, "logins.>", "sign-in counters", func(value []byte) bool { return l.current(value).Count == 0 })
}
