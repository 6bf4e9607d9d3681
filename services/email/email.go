// Package email is the mail channel: each approver of a pending call routed
// to "email" is mailed the call (tool, arguments, risk, the policy's
// reason, deadline) with a link to its console page, and the reminders,
// the escalation and the outcome follow as replies in the same thread
// (Message-ID / In-Reply-To / References). A mail never decides anything:
// the reviewer decides signed in, in the console. With email.one_tap each
// approver's mail also carries their own approve and deny links (package
// onetap), which open that decision in the console for them alone.
//
// Everything an agent chose is data here: a header built from it (the
// subject) has every control character, line break and invisible or bidi
// character made visible, so no agent text can add a header or a
// recipient; the plain-text body shows it made visible, quoted ("> ")
// under a label and with its links defanged (hxxps://evil[.]example), so
// the links airlock writes (the console link, one-tap links) are the mail's
// only links; it is sent quoted-printable.
package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"slices"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/onetap"
)

// Name is the channel's name and its word in notify lists: "email" mails
// the call's approvers, "email:<principal, group:name or address>" mails
// those.
const Name = "email"

// groupPrefix marks a group among approvers ("group:oncall").
const groupPrefix = "group:"

// Notifier sends mail over SMTP. It implements notify.Notifier and keeps no
// state: message ids are derived from the call, so a repeated delivery
// (after a crash) has the same Message-ID and threads as one.
type Notifier struct {
	cfg       config.Email
	from      *mail.Address
	domain    string
	publicURL string
	groups    map[string][]string
	tls       *tls.Config
	log       *slog.Logger
	// oneTap MACs the approve and deny links (email.one_tap); nil when off.
	oneTap *onetap.Key
	// dir says who may decide a call, as the approval service asks it: only
	// they get links.
	dir calls.Directory
}

var (
	_ notify.Notifier = (*Notifier)(nil)
	_ notify.Digester = (*Notifier)(nil)
)

// Enabled reports whether email is configured (email.smtp_host is set).
func Enabled(cfg config.Config) bool { return cfg.Email.SMTPHost != "" }

// New builds the notifier from cfg (email.*, approval.groups, console users'
// groups, http.public_url). It refuses to start without a server or sender,
// or with a CA file it cannot read.
func New(cfg config.Config, log *slog.Logger) (*Notifier, error) {
	e := cfg.Email
	if e.SMTPHost == "" {
		return nil, errors.New("email.smtp_host is empty: set the mail server (or AIRLOCK_EMAIL_SMTP_HOST) to enable email")
	}
	from, err := mail.ParseAddress(e.From)
	if err != nil {
		return nil, fmt.Errorf("email.from is %q: set the sender's address, e.g. \"airlock <airlock@example.com>\"", e.From)
	}
	tc := &tls.Config{ServerName: e.SMTPHost, MinVersion: tls.VersionTLS12}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("email.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("email.ca_file %s holds no PEM certificate", e.CAFile)
		}
	}
	groups := map[string][]string{}
	for g, members := range cfg.Approval.Groups {
		groups[strings.TrimPrefix(g, groupPrefix)] = append(groups[strings.TrimPrefix(g, groupPrefix)], members...)
	}
	for _, u := range cfg.Console.Users {
		for _, g := range u.Groups {
			groups[g] = append(groups[g], u.Name)
		}
	}
	_, domain, _ := strings.Cut(from.Address, "@")
	n := &Notifier{cfg: e, from: from, domain: domain, publicURL: cfg.HTTP.PublicURL, groups: groups, tls: tc,
		log: log.With("notifier", Name), dir: calls.DirectoryOf(cfg)}
	if e.OneTap.Enabled {
		k, err := onetap.LoadKey(cfg)
		if err != nil {
			return nil, err
		}
		n.oneTap = &k
	}
	return n, nil
}

// Name implements notify.Notifier.
func (n *Notifier) Name() string { return Name }

// Wants implements notify.Notifier: rec's notify list names "email" or
// "email:<who>" (or "escalate:email…" once it escalated).
func (n *Notifier) Wants(rec *airlockv1.ApprovalRecord) bool {
	return len(notify.Targets(rec, Name)) > 0
}

// Recipients lists the addresses rec's mail goes to, sorted: for a bare
// "email" entry the decision's approvers, for "email:<who>" that principal,
// group or address; groups are expanded, each principal is mapped through
// email.addresses or taken as it is when it is itself an address, and the
// principal the call acts for is left out unless the rule lets them decide.
// A record whose notify list does not name email is mailed to its approvers.
// unknown lists the principals that have no address.
func (n *Notifier) Recipients(rec *airlockv1.ApprovalRecord) (to, unknown []string) {
	byAddr, unknown := n.recipients(rec)
	for addr := range byAddr {
		to = append(to, addr)
	}
	slices.Sort(to)
	return to, unknown
}

// recipients maps each address rec's mail goes to (Recipients) to the
// principals it was mailed as, sorted; unknown lists the principals that
// have no address.
func (n *Notifier) recipients(rec *airlockv1.ApprovalRecord) (byAddr map[string][]string, unknown []string) {
	targets := notify.Targets(rec, Name)
	if len(targets) == 0 {
		targets = []string{""} // told without being routed here: mail the approvers
	}
	var who []string
	for _, t := range targets {
		if t == "" {
			who = append(who, rec.GetDecision().GetApprovers()...)
		} else {
			who = append(who, t)
		}
	}
	call := rec.GetCall()
	var principals []string
	for _, w := range who {
		if g, ok := strings.CutPrefix(w, groupPrefix); ok {
			principals = append(principals, n.groups[g]...)
		} else if w == calls.Requester {
			principals = append(principals, call.GetOnBehalfOf()) // kept below only if they may decide
		} else {
			principals = append(principals, w)
		}
	}
	byAddr = map[string][]string{}
	for _, p := range principals {
		if p == "" || p == call.GetOnBehalfOf() && !calls.RequesterMayDecide(call, rec.GetDecision(), p) {
			continue
		}
		addr := n.address(p)
		if addr == "" {
			unknown = append(unknown, p)
			continue
		}
		if !slices.Contains(byAddr[addr], p) {
			byAddr[addr] = append(byAddr[addr], p)
		}
	}
	for _, ps := range byAddr {
		slices.Sort(ps)
	}
	slices.Sort(unknown)
	return byAddr, slices.Compact(unknown)
}

// address is p's mail address, or "" when it has none.
func (n *Notifier) address(p string) string {
	if a, ok := n.cfg.Addresses[p]; ok {
		return a
	}
	if a, err := mail.ParseAddress(p); err == nil && a.Address == p && !strings.ContainsAny(p, "\r\n") {
		return p
	}
	return ""
}

// Announce implements notify.Notifier: one mail to each recipient; the ref
// is the thread's Message-ID (without angle brackets).
func (n *Notifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	root := n.MessageID(rec, "request")
	return root, n.send(ctx, rec, root, "request", "", func(l *Links) string { return requestBody(rec, n.publicURL, l) })
}

// Remind implements notify.Notifier: a reply in the thread.
func (n *Notifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	kind := "reminder"
	if rec.GetEscalated() {
		kind = "escalation"
	}
	return n.send(ctx, rec, orRoot(ref, n, rec), kind, "Re: ", func(l *Links) string { return reminderBody(rec, n.publicURL, l) })
}

// Update implements notify.Notifier: the outcome as a reply in the thread.
func (n *Notifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	outcome := OutcomeBody(rec, n.publicURL)
	return n.send(ctx, rec, orRoot(ref, n, rec), "outcome-"+calls.StateName(rec.GetState()), "Re: ", func(*Links) string { return outcome })
}

func orRoot(ref string, n *Notifier, rec *airlockv1.ApprovalRecord) string {
	if ref != "" && !strings.ContainsAny(ref, "<>\r\n ") {
		return ref
	}
	return n.MessageID(rec, "request")
}

// MessageID is the id of rec's mail of kind, without angle brackets: the
// same for every recipient and every repeat, so a thread stays one thread.
func (n *Notifier) MessageID(rec *airlockv1.ApprovalRecord, kind string) string {
	return "airlock." + callref.Of(rec.GetCall()).Key() + "." + kind + "@" + n.domain
}

// send mails rec's recipients; body renders the mail for one of them, with
// their one-tap links (nil without).
func (n *Notifier) send(ctx context.Context, rec *airlockv1.ApprovalRecord, root, kind, prefix string, body func(*Links) string) error {
	byAddr, unknown := n.recipients(rec)
	to := make([]string, 0, len(byAddr))
	for addr := range byAddr {
		to = append(to, addr)
	}
	slices.Sort(to)
	call := rec.GetCall()
	if len(unknown) > 0 {
		n.log.Warn("approvers without a mail address are not mailed: add them to email.addresses", "call", call.GetCallId(), "principals", unknown)
	}
	if len(to) == 0 {
		return fmt.Errorf("mail about call %s has no recipient with an address (approvers %v): map them in email.addresses", call.GetCallId(), rec.GetDecision().GetApprovers())
	}
	subject := prefix + Subject(rec)
	msgs := make([]*gomail.Msg, 0, len(to))
	for _, addr := range to {
		m := gomail.NewMsg()
		m.FromMailAddress(n.from)
		if err := m.To(addr); err != nil {
			return fmt.Errorf("mail about call %s: recipient %q: %w", call.GetCallId(), addr, err)
		}
		m.Subject(subject)
		m.SetDate()
		if kind == "request" {
			m.SetMessageIDWithValue(root)
		} else {
			m.SetMessageIDWithValue(n.MessageID(rec, kind))
			m.SetGenHeader(gomail.HeaderInReplyTo, "<"+root+">")
			m.SetGenHeader(gomail.HeaderReferences, "<"+root+">")
		}
		m.SetGenHeader(gomail.HeaderXAutoResponseSuppress, "All")
		m.SetGenHeader("X-Airlock-Call", callref.Of(call).Key())
		links, err := n.links(rec, byAddr[addr])
		if err != nil {
			return fmt.Errorf("mail about call %s: %w", call.GetCallId(), err)
		}
		m.SetBodyString(gomail.TypeTextPlain, body(links))
		msgs = append(msgs, m)
	}
	c, err := n.client()
	if err != nil {
		return err
	}
	if err := c.DialAndSendWithContext(ctx, msgs...); err != nil {
		return fmt.Errorf("mail %s of call %s through %s:%d: %w", kind, call.GetCallId(), n.cfg.SMTPHost, n.cfg.Port(), err)
	}
	return nil
}

// Digest implements notify.Digester: one mail to the recipients of the
// last of an agent's coalesced calls, saying how many more wait and
// linking the console; it decides nothing (no one-tap links).
func (n *Notifier) Digest(ctx context.Context, d notify.Digest) error {
	to, unknown := n.Recipients(d.Latest)
	if len(unknown) > 0 {
		n.log.Warn("approvers without a mail address are not mailed: add them to email.addresses", "digest of agent", d.Agent, "principals", unknown)
	}
	if len(to) == 0 {
		return fmt.Errorf("the digest of agent %s has no recipient with an address: map its approvers in email.addresses", d.Agent)
	}
	subject := HeaderText(fmt.Sprintf("[airlock] Agent %s: %d more calls waiting", d.Agent, d.Calls), maxSubjectRunes)
	body := escape.Mail(d.Text()) + "\n\n" + strings.TrimRight(n.publicURL, "/") + "/\n"
	msgs := make([]*gomail.Msg, 0, len(to))
	for _, addr := range to {
		m := gomail.NewMsg()
		m.FromMailAddress(n.from)
		if err := m.To(addr); err != nil {
			return fmt.Errorf("digest of agent %s: recipient %q: %w", d.Agent, addr, err)
		}
		m.Subject(subject)
		m.SetDate()
		m.SetMessageID()
		m.SetGenHeader(gomail.HeaderXAutoResponseSuppress, "All")
		m.SetBodyString(gomail.TypeTextPlain, body)
		msgs = append(msgs, m)
	}
	c, err := n.client()
	if err != nil {
		return err
	}
	if err := c.DialAndSendWithContext(ctx, msgs...); err != nil {
		return fmt.Errorf("mail the digest of agent %s through %s:%d: %w", d.Agent, n.cfg.SMTPHost, n.cfg.Port(), err)
	}
	return nil
}

// Links are one approver's one-tap links in a mail (email.one_tap).
type Links struct {
	// Approver is the principal the links are bound to.
	Approver      string
	Approve, Deny string
	Expires       time.Time
}

// links are the one-tap links of the recipient mailed as principals: bound
// to the first of them who may decide rec, to rec's revision and arguments
// digest, expiring at its deadline. Nil when one-tap links are off, rec is
// not pending or has no digest or deadline, or none of them may decide it
// (they get the console link only).
func (n *Notifier) links(rec *airlockv1.ApprovalRecord, principals []string) (*Links, error) {
	if n.oneTap == nil || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING ||
		rec.GetArgumentsDigest() == "" || rec.GetDeadline() == nil {
		return nil, nil
	}
	i := slices.IndexFunc(principals, func(p string) bool { return n.dir.Barred(rec, p) == calls.NotBarred })
	if i < 0 {
		return nil, nil
	}
	ref := callref.Of(rec.GetCall())
	t := onetap.Token{Agent: ref.Agent, Call: ref.Call, Revision: ref.Rev, Digest: rec.GetArgumentsDigest(),
		Approver: principals[i], Expires: rec.GetDeadline().AsTime()}
	l := &Links{Approver: t.Approver, Expires: t.Expires}
	for action, dst := range map[string]*string{onetap.Approve: &l.Approve, onetap.Deny: &l.Deny} {
		t.Action = action
		tok, err := n.oneTap.Mint(t)
		if err != nil {
			return nil, fmt.Errorf("one-tap link for %s: %w", t.Approver, err)
		}
		*dst = onetap.URL(n.publicURL, tok)
	}
	return l, nil
}

// client is a fresh SMTP client (one connection per delivery; a go-mail
// client is not safe for concurrent sends).
func (n *Notifier) client() (*gomail.Client, error) {
	opts := []gomail.Option{gomail.WithTLSConfig(n.tls), gomail.WithTimeout(30 * time.Second)}
	switch n.cfg.TLS {
	case "tls":
		opts = append(opts, gomail.WithSSL(), gomail.WithTLSPolicy(gomail.TLSMandatory))
	case "none":
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if n.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(n.cfg.Username), gomail.WithPassword(n.cfg.Password))
	}
	// The port last: the TLS options above set their own default port.
	opts = append(opts, gomail.WithPort(n.cfg.Port()))
	c, err := gomail.NewClient(n.cfg.SMTPHost, opts...)
	if err != nil {
		return nil, fmt.Errorf("mail client for %s: %w", n.cfg.SMTPHost, err)
	}
	return c, nil
}
