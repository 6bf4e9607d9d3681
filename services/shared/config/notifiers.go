package config

import (
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
)

// Email configures the email notifier: each approver of a pending call is
// mailed the call with a link to its console page; reminders and the
// outcome are replies in the same thread.
type Email struct {
	// SMTPHost is the mail server; empty disables email.
	SMTPHost string `yaml:"smtp_host"`
	// SMTPPort defaults to 587 (465 with tls: tls, 25 with tls: none).
	SMTPPort int `yaml:"smtp_port"`
	// TLS is "starttls" (required, the default), "tls" (implicit TLS, port
	// 465) or "none" (plain text; only for a relay on the same host).
	TLS string `yaml:"tls"`
	// CAFile is a PEM bundle trusted for the server's certificate in place
	// of the system roots (a private relay); empty for the system roots.
	CAFile string `yaml:"ca_file"`
	// Username and Password authenticate (SMTP AUTH PLAIN); empty for none.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// From is the sender, e.g. "airlock <airlock@example.com>"; its domain
	// also ends every Message-ID.
	From string `yaml:"from"`
	// Addresses maps principals to mail addresses (alice: alice@example.com).
	// A principal that is itself an address (bob@example.com) needs no entry;
	// a principal with neither is not mailed (and the reason is logged).
	Addresses map[string]string `yaml:"addresses"`
	// OneTap puts approve and deny links in each approver's mail (off by
	// default).
	OneTap OneTap `yaml:"one_tap"`
}

// OneTap configures the one-tap links of approval mails (package
// services/shared/onetap): each approver's mail carries their own approve
// and deny links, bound to the call, its revision, its arguments digest and
// that approver, expiring with the call, usable once. Opening a link
// decides nothing: it shows the call with one button, and the button
// decides only in the named approver's signed-in console session.
type OneTap struct {
	// Enabled turns the links on; off, mails link to the call's page only.
	Enabled bool `yaml:"enabled"`
	// KeyFile holds the key the links are MAC'd with (HMAC-SHA256, 32 bytes
	// as hex, mode 0600; `airlock keys generate FILE` makes one). The
	// process that mails (the approval service's) and the console both read
	// it. `airlock dev` generates <data dir>/keys/onetap.key.
	KeyFile string `yaml:"key_file"`
	// Key is the same key as hex (AIRLOCK_EMAIL_ONE_TAP_KEY, for a secret
	// store); it wins over KeyFile.
	Key string `yaml:"key"`
}

// Webhook is one outgoing webhook endpoint: every event about a call routed
// to it ("webhook" or "webhook:<name>" in the policy's notify list) is
// POSTed as JSON, signed with HMAC-SHA256.
type Webhook struct {
	// Name is the endpoint's name in notify lists (webhook:<name>) and, as
	// "webhook-<name>", the channel's name: 1–24 of a-z 0-9 _ -.
	Name string `yaml:"name"`
	// URL receives the POSTs.
	URL string `yaml:"url"`
	// Secret signs every body (see README "Webhooks"); required.
	Secret string `yaml:"secret"`
}

// PagerDuty configures the PagerDuty Events API v2 notifier: a call routed
// to "pagerduty" triggers an incident (dedup key per call revision) and its
// outcome resolves it.
type PagerDuty struct {
	// RoutingKey is the integration key of a PagerDuty service (Events API
	// v2); empty disables PagerDuty.
	RoutingKey string `yaml:"routing_key"`
	// URL of the Events API; the default is PagerDuty's own.
	URL string `yaml:"url"`
	// Source names this installation in the incident (payload.source).
	Source string `yaml:"source"`
}

func defaultEmail() Email { return Email{TLS: "starttls"} }

func defaultPagerDuty() PagerDuty {
	return PagerDuty{URL: "https://events.pagerduty.com/v2/enqueue", Source: "airlock"}
}

var webhookName = regexp.MustCompile(`^[a-z0-9_-]{1,24}$`)

// Port is the SMTP port to dial: smtp_port, or the usual one for tls.
func (e Email) Port() int {
	switch {
	case e.SMTPPort != 0:
		return e.SMTPPort
	case e.TLS == "tls":
		return 465
	case e.TLS == "none":
		return 25
	}
	return 587
}

func (e Email) validate() []error {
	if e.SMTPHost == "" {
		return nil
	}
	var errs []error
	switch e.TLS {
	case "starttls", "tls", "none":
	default:
		errs = append(errs, fmt.Errorf("email.tls is %q: use starttls, tls or none", e.TLS))
	}
	if _, err := mail.ParseAddress(e.From); err != nil {
		errs = append(errs, fmt.Errorf("email.from is %q: set the sender's address, e.g. \"airlock <airlock@example.com>\"", e.From))
	}
	for principal, addr := range e.Addresses {
		if _, err := mail.ParseAddress(addr); err != nil || strings.ContainsAny(addr, "\r\n") {
			errs = append(errs, fmt.Errorf("email.addresses: %q for %s is not a mail address", addr, principal))
		}
	}
	if (e.Username == "") != (e.Password == "") {
		errs = append(errs, fmt.Errorf("email.username and email.password go together: set both or neither"))
	}
	return errs
}

func validateWebhooks(hooks []Webhook) []error {
	var errs []error
	seen := map[string]bool{}
	for i, h := range hooks {
		if !webhookName.MatchString(h.Name) {
			errs = append(errs, fmt.Errorf("webhooks[%d].name is %q: use 1-24 characters from a-z 0-9 _ -", i, h.Name))
		}
		if seen[h.Name] {
			errs = append(errs, fmt.Errorf("webhooks: two endpoints are named %q", h.Name))
		}
		seen[h.Name] = true
		if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("webhooks[%d].url is %q: set the receiver's http(s) URL", i, h.URL))
		}
		if len(h.Secret) < 16 {
			errs = append(errs, fmt.Errorf("webhooks[%d].secret must be at least 16 characters: receivers verify every POST with it", i))
		}
	}
	return errs
}

func (p PagerDuty) validate() []error {
	if p.RoutingKey == "" {
		return nil
	}
	if u, err := url.Parse(p.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return []error{fmt.Errorf("pagerduty.url is %q: set the Events API v2 URL (https://events.pagerduty.com/v2/enqueue)", p.URL)}
	}
	return nil
}
