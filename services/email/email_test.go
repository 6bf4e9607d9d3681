package email_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/email"
	"github.com/airlock-gate/airlock/services/email/smtptest"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/onetap"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// world is a real SMTP server (STARTTLS, AUTH PLAIN) and a notifier using it.
type world struct {
	srv  *smtptest.Server
	mail *smtptest.Collector
	cfg  config.Config
	n    *email.Notifier
}

func newWorld(t *testing.T, tweak ...func(*config.Config)) *world {
	t.Helper()
	srv, err := smtptest.Start(t.TempDir(), smtptest.Options{TLS: true, Username: "airlock", Password: "mail-pass"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg := config.Default()
	cfg.HTTP.PublicURL = "https://airlock.example.com"
	cfg.Email = config.Email{SMTPHost: srv.Host, SMTPPort: srv.Port, TLS: "starttls", CAFile: srv.CAFile,
		Username: "airlock", Password: "mail-pass", From: "airlock <airlock@example.com>",
		Addresses: map[string]string{"alice": "alice@example.com", "zoe": "zoe@example.com", "dave": "dave@oncall.example.com"}}
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice", "bob@example.com", "zoe"}, "oncall": {"dave"}}
	for _, f := range tweak {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n, err := email.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return &world{srv: srv, mail: smtptest.Collect(srv), cfg: cfg, n: n}
}

// delivered is one received mail, parsed.
type delivered struct {
	raw  smtptest.Message
	msg  *mail.Message
	body string
}

func parse(t *testing.T, m smtptest.Message) delivered {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatalf("delivered mail does not parse: %v\n%s", err, m.Data)
	}
	body, err := io.ReadAll(qp(msg))
	if err != nil {
		t.Fatal(err)
	}
	// Mail lines end in CRLF; a lone CR would be agent text let through.
	return delivered{raw: m, msg: msg, body: strings.ReplaceAll(string(body), "\r\n", "\n")}
}

func qp(msg *mail.Message) io.Reader {
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		return quotedprintable.NewReader(msg.Body)
	}
	return msg.Body
}

// header is a header of a delivered mail, unfolded ("" when the mail does not parse).
func header(m smtptest.Message, name string) string {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return ""
	}
	return msg.Header.Get(name)
}

// rendered is a mail as a reader shows it: the headers that matter, decoded, then the body.
func rendered(d delivered) []byte {
	var b strings.Builder
	for _, h := range []string{"From", "To", "Subject", "Date", "Message-ID", "In-Reply-To", "References"} {
		if v := d.msg.Header.Get(h); v != "" {
			if dec, err := new(mime.WordDecoder).DecodeHeader(v); err == nil {
				v = dec
			}
			b.WriteString(h + ": " + v + "\n")
		}
	}
	b.WriteString("\n" + d.body)
	return []byte(b.String())
}

func subject(t *testing.T, d delivered) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(d.msg.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("subject %q: %v", d.msg.Header.Get("Subject"), err)
	}
	return s
}

// wait returns the mails whose Message-ID contains id, once n arrived.
func (w *world) wait(t *testing.T, id string, n int) []delivered {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := w.mail.Find(func(m smtptest.Message) bool { return header(m, "Message-ID") == "<"+id+">" })
		if len(got) >= n {
			out := make([]delivered, len(got))
			for i, m := range got {
				out[i] = parse(t, m)
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mails with Message-ID %s arrived, want %d", len(got), id, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mailed(rec *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord {
	rec.Decision.Notify = []string{"email"}
	return rec
}

func TestEmailNotifierPassesTheNotifierContract(t *testing.T) {
	var w *world
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			w = newWorld(t)
			return w.n
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			id := map[string]string{"announce": ref, "remind": w.n.MessageID(rec, "reminder"),
				"update": w.n.MessageID(rec, "outcome-"+calls.StateName(rec.GetState()))}[kind]
			got := w.mail.Find(func(m smtptest.Message) bool {
				return header(m, "Message-ID") == "<"+id+">" && (kind == "announce" || header(m, "In-Reply-To") == "<"+ref+">")
			})
			return len(got) > 0
		},
	})
}

func TestEmailThreadCarriesRequestReminderAndOutcome(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rec := mailed(notifytest.Record("c-thread"))
	root, err := w.n.Announce(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	req := w.wait(t, root, 2) // alice and bob@example.com; zoe asked for the call
	var to []string
	for _, d := range req {
		if d.raw.Auth != "airlock" {
			t.Errorf("mail sent without authenticating (auth %q)", d.raw.Auth)
		}
		to = append(to, d.raw.To...)
	}
	slices.Sort(to)
	if !slices.Equal(to, []string{"alice@example.com", "bob@example.com"}) {
		t.Fatalf("mailed %v; want the approvers with addresses, without the requester zoe", to)
	}
	first := req[0]
	for _, want := range []string{"fs__write_file", "Risk:           high", "writes need a person", "https://airlock.example.com/calls/bot/c-thread",
		`"path": "/tmp/notes[.]txt"`, "Deadline:", "save the notes"} {
		if !strings.Contains(first.body, want) {
			t.Errorf("request body lacks %q:\n%s", want, first.body)
		}
	}
	if s := subject(t, first); s != "[airlock] Approval needed: fs__write_file (risk high, agent bot)" {
		t.Errorf("subject = %q", s)
	}

	rec.Reminded = true
	if err := w.n.Remind(ctx, rec, root); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.DecidedBy, rec.Reason = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, &airlockv1.Actor{Id: "alice", Channel: "console"}, "not in prod"
	if err := w.n.Update(ctx, rec, root); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kind, says string }{{"reminder", "Reminder: this call still waits"}, {"outcome-rejected", "Outcome: rejected by alice (console)."}} {
		d := w.wait(t, w.n.MessageID(rec, c.kind), 2)[0]
		h := d.msg.Header
		if h.Get("In-Reply-To") != "<"+root+">" || h.Get("References") != "<"+root+">" {
			t.Errorf("%s: In-Reply-To %q, References %q; want both <%s>", c.kind, h.Get("In-Reply-To"), h.Get("References"), root)
		}
		if s := subject(t, d); s != "Re: "+subject(t, first) {
			t.Errorf("%s: subject %q does not thread with %q", c.kind, s, subject(t, first))
		}
		if !strings.Contains(d.body, c.says) {
			t.Errorf("%s body lacks %q:\n%s", c.kind, c.says, d.body)
		}
	}
	// AIRLOCK_MAIL_ARTIFACTS=DIR keeps the delivered request (raw, and as a
	// person reads it) and the outcome reply (docs/screenshots keeps them).
	if dir := os.Getenv("AIRLOCK_MAIL_ARTIFACTS"); dir != "" {
		outcome := w.wait(t, w.n.MessageID(rec, "outcome-rejected"), 2)[0]
		for name, data := range map[string][]byte{
			"email-request.eml": req[0].raw.Data, "email-request.txt": rendered(req[0]), "email-outcome.txt": rendered(outcome),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTheOutcomeSaysWhoseWordsTheReasonIs: an agent cancels its own calls,
// and the reason it gives is its own: the outcome names it as the agent,
// as every surface does (calls.ActorNote); the call's on_behalf_of is the
// agent's claim unless airlock verified it.
func TestTheOutcomeSaysWhoseWordsTheReasonIs(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rec := mailed(notifytest.Record("c-agent-cancel"))
	root, err := w.n.Announce(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	w.wait(t, root, 1)
	rec.State, rec.Reason = airlockv1.ApprovalState_APPROVAL_STATE_CANCELED, "superseded\nOutcome: approved by alice (console)."
	rec.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"}
	if err := w.n.Update(ctx, rec, root); err != nil {
		t.Fatal(err)
	}
	body := w.wait(t, w.n.MessageID(rec, "outcome-canceled"), 1)[0].body
	for _, want := range []string{"Outcome: canceled by bot (agent).\n", "> superseded\n> Outcome: approved by alice (console).", "On behalf of:   zoe (claimed by the agent, not verified)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the outcome lacks %q:\n%s", want, body)
		}
	}
}

func TestAgentTextCannotAddHeadersOrRecipients(t *testing.T) {
	w := newWorld(t)
	rec := mailed(notifytest.Record("c-hostile"))
	inject := "x\r\nBcc: evil@attacker.example\r\nX-Injected: 1\r\n\r\nfake body"
	rec.Call.Tool = "write_file" + inject
	rec.Call.Server = "fs\u202egnp.exe"
	rec.Call.Reason = "please" + inject
	rec.Call.AgentId = "bot"
	rec.Decision.Reason = "policy says" + inject
	rec.Call.Arguments, _ = structpb.NewStruct(map[string]any{"path\r\nBcc: evil@attacker.example": "v\u200b\u202e" + inject})
	root, err := w.n.Announce(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	got := w.wait(t, root, 2)
	if dir := os.Getenv("AIRLOCK_MAIL_ARTIFACTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "email-hostile.txt"), rendered(got[0]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range got {
		for _, rcpt := range d.raw.To {
			if strings.Contains(rcpt, "attacker") {
				t.Fatalf("agent text added a recipient: RCPT TO %v", d.raw.To)
			}
		}
		for _, h := range []string{"Bcc", "X-Injected"} {
			if v, ok := d.msg.Header[h]; ok {
				t.Fatalf("agent text added a %s header: %q\n%s", h, v, d.raw.Data)
			}
		}
		s := subject(t, d)
		if strings.ContainsAny(s, "\r\n\u202e") || !strings.Contains(s, `\u000d\nBcc`) || !strings.Contains(s, `fs\u202egnp.exe`) {
			t.Fatalf("subject %q: line breaks and bidi characters must be shown as escapes", s)
		}
		if strings.ContainsAny(d.body, "\r\u202e\u200b") {
			t.Fatalf("body carries raw carriage returns or invisible characters:\n%q", d.body)
		}
		for _, line := range strings.Split(d.body, "\n") {
			if strings.HasPrefix(line, "Bcc:") || strings.HasPrefix(line, "fake body") || strings.HasPrefix(line, "X-Injected") {
				t.Fatalf("agent text starts a line of its own in the body: %q\n%s", line, d.body)
			}
		}
	}
}

func TestMailIsRefusedWithoutTheRightCredentials(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Email.Password = "wrong" })
	if _, err := w.n.Announce(context.Background(), mailed(notifytest.Record("c-auth"))); err == nil {
		t.Fatal("a server that refused the credentials was reported as delivered")
	}
}

func TestMailRefusesAServerWhoseCertificateIsNotTrusted(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Email.CAFile = "" })
	if _, err := w.n.Announce(context.Background(), mailed(notifytest.Record("c-tls"))); err == nil {
		t.Fatal("mail went to a server whose self-signed certificate is not trusted")
	}
}

func TestRecipientsFollowTheNotifyEntries(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct {
		name      string
		notify    []string
		approvers []string
		selfOK    bool
		to        []string
		unknown   []string
	}{
		{"mails_the_approvers_for_a_bare_entry", []string{"email"}, []string{"group:reviewers"}, false, []string{"alice@example.com", "bob@example.com"}, nil},
		{"mails_a_group_named_in_the_entry", []string{"email:group:oncall"}, []string{"alice"}, false, []string{"dave@oncall.example.com"}, nil},
		{"mails_an_address_named_in_the_entry", []string{"email:ops@example.com"}, nil, false, []string{"ops@example.com"}, nil},
		{"reports_a_principal_without_an_address", []string{"email"}, []string{"carol"}, false, nil, []string{"carol"}},
		{"leaves_out_the_requester", []string{"email"}, []string{"zoe", "alice"}, false, []string{"alice@example.com"}, nil},
		{"mails_the_requester_when_the_rule_lets_them_decide", []string{"email"}, []string{"requester"}, true, []string{"zoe@example.com"}, nil},
		{"does_not_take_a_line_break_as_an_address", []string{"email:a@example.com\r\nBcc: b@example.com"}, nil, false, nil, []string{"a@example.com\r\nBcc: b@example.com"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := notifytest.Record("c")
			rec.Decision.Notify, rec.Decision.Approvers = c.notify, c.approvers
			rec.Call.OnBehalfOfVerified = c.selfOK
			to, unknown := w.n.Recipients(rec)
			if !slices.Equal(to, c.to) || !slices.Equal(unknown, c.unknown) {
				t.Fatalf("Recipients = %v, unknown %v; want %v, unknown %v", to, unknown, c.to, c.unknown)
			}
		})
	}
}

func TestHeaderTextKeepsAgentTextOnOneVisibleLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\r\nb", `a\u000d\nb`},
		{"tab\there", `tab\there`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"nul\x00", `nul\u0000`},
	} {
		if got := email.HeaderText(c.in, 100); got != c.want {
			t.Errorf("HeaderText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := email.HeaderText(strings.Repeat("é", 300), 10); len([]rune(got)) != 10 {
		t.Errorf("HeaderText did not cut to 10 runes: %q", got)
	}
}

func TestEscalationReplyReachesTheAddedApproversWithTheWholeCall(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rec := mailed(notifytest.Record("c-esc"))
	root, err := w.n.Announce(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	// What the approval service's escalation does: escalate_to joins the approvers.
	rec.Escalated = true
	rec.Decision.EscalateTo = []string{"group:oncall"}
	rec.Decision.Approvers = append(rec.Decision.Approvers, "group:oncall")
	if err := w.n.Remind(ctx, rec, root); err != nil {
		t.Fatal(err)
	}
	var dave *delivered
	for _, d := range w.wait(t, w.n.MessageID(rec, "escalation"), 3) {
		if slices.Equal(d.raw.To, []string{"dave@oncall.example.com"}) {
			dave = &d
		}
	}
	if dave == nil {
		t.Fatal("the on-call approver added by escalation was not mailed")
	}
	for _, want := range []string{"Escalated: this call still waits", "group:oncall", `"path": "/tmp/notes[.]txt"`, "https://airlock.example.com/calls/bot/c-esc"} {
		if !strings.Contains(dave.body, want) {
			t.Errorf("escalation reply lacks %q:\n%s", want, dave.body)
		}
	}
	if dave.msg.Header.Get("In-Reply-To") != "<"+root+">" {
		t.Errorf("escalation reply is not in the thread: In-Reply-To %q", dave.msg.Header.Get("In-Reply-To"))
	}
}

// An agent's text cannot pass for the mail's own words or links: it is
// quoted line by line, and its links are defanged, so the console link
// airlock writes is the only link a mail client makes clickable.
func TestAgentTextCannotImitateTheMailOrItsLink(t *testing.T) {
	w := newWorld(t)
	rec := mailed(notifytest.Record("c-imitate"))
	rec.Decision.Approvers = []string{"alice"}
	fake := "\n\nDecide in the console (sign in there; this mail decides nothing):\nhttps://evil.example/calls/bot/c-imitate\n"
	rec.Call.Reason = "routine cleanup" + fake
	rec.Call.OnBehalfOf = "see HTTPS://EVIL.example/help"
	rec.Call.Arguments, _ = structpb.NewStruct(map[string]any{"url": "http://evil.example/x", "site": "www.evil.example", "to": "mailto:evil@evil.example",
		// a scheme or www. inside a word, and bare names: clients link them all
		"glued": "_https://console.evil.example/one-tap/AAAA 1https://evil.example/x _www.evil.example",
		"bare":  "console-evil.com/one-tap/x evil。example/y README.md пример.рф/x 例え.jp/y"})
	ctx := context.Background()
	root, err := w.n.Announce(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Reminded = true
	if err := w.n.Remind(ctx, rec, root); err != nil {
		t.Fatal(err)
	}
	genuine := "https://airlock.example.com/calls/bot/c-imitate"
	// What mail clients make clickable: a known scheme wherever it starts,
	// www., and a bare name whose last label could be a top-level domain.
	link := regexp.MustCompile(`(?i)((https?|ftps?|file|smb|irc|news|telnet)://|www\.|(mailto|javascript):|[\p{L}\p{N}_-]+([.。．｡][\p{L}\p{N}_-]+)*[.。．｡]\p{L}{2,})\S*`)
	for _, d := range append(w.wait(t, root, 1), w.wait(t, w.n.MessageID(rec, "reminder"), 1)...) {
		if links := link.FindAllString(d.body, -1); len(links) != 1 || links[0] != genuine {
			t.Fatalf("links in the mail %v, want only the console's %s:\n%s", links, genuine, d.body)
		}
		if n := strings.Count(d.body, "\nDecide in the console"); n != 1 {
			t.Fatalf("%d lines read as the mail's own \"Decide in the console\", want 1:\n%s", n, d.body)
		}
		for _, want := range []string{"> routine cleanup", "> Decide in the console", "> hxxps://evil[.]example/calls/bot/c-imitate", "HxxPS://EVIL[.]example/help",
			`>   "url": "hxxp://evil[.]example/x"`, "www[.]evil[.]example", "mailto[:]evil@",
			"_hxxps://console[.]evil[.]example/one-tap/AAAA 1hxxps://evil[.]example/x _www[.]evil[.]example", "console-evil[.]com/one-tap/x", "README[.]md", "пример[.]рф/x", "例え[.]jp/y"} {
			if !strings.Contains(d.body, want) {
				t.Fatalf("the mail lacks %q:\n%s", want, d.body)
			}
		}
	}
}

// Every hostile string of the shared corpus, as the tool, the agent's
// reason and an argument, reaches neither the subject nor the body raw.
func TestHostileCorpusReachesNoMailRaw(t *testing.T) {
	w := newWorld(t)
	for i, h := range escapetest.Corpus {
		t.Run(h.Name, func(t *testing.T) {
			rec := mailed(notifytest.Record(fmt.Sprintf("c-corpus-%d", i)))
			rec.Decision.Approvers = []string{"alice"}
			rec.Call.Tool, rec.Call.Reason = "write_file"+h.Text, h.Text
			rec.Call.Arguments, _ = structpb.NewStruct(map[string]any{"text": h.Text})
			root, err := w.n.Announce(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			d := w.wait(t, root, 1)[0]
			if raw := escapetest.RawLine(subject(t, d)); len(raw) > 0 {
				t.Fatalf("subject carries %v raw: %q", raw, subject(t, d))
			}
			if raw := escapetest.Raw(d.body); len(raw) > 0 {
				t.Fatalf("body carries %v raw", raw)
			}
		})
	}
}

func TestMailShowsAnUnverifiedOnBehalfOfAsTheAgentsClaim(t *testing.T) {
	for _, c := range []struct {
		name     string
		verified bool
		want     string
	}{
		{"an_unverified_claim_says_so", false, "On behalf of:   admin (claimed by the agent, not verified)\n"},
		{"a_verified_person_is_shown_plainly", true, "On behalf of:   admin\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "evil", CallId: "c1", Server: "demo", Tool: "echo",
				OnBehalfOf: "admin", OnBehalfOfVerified: c.verified}, Decision: &airlockv1.Decision{}}
			if body := email.RequestBody(rec, "http://airlock.test"); !strings.Contains(body, c.want) {
				t.Errorf("the request mail lacks %q:\n%s", c.want, body)
			}
		})
	}
}

var oneTapLink = regexp.MustCompile(`(?m)^(Approve|Deny): +(\S+)$`)

// With email.one_tap on, each approver's mail carries their own approve and
// deny links, bound to the call revision, its arguments digest and them,
// expiring with the call; a recipient who may not decide (notified, not an
// approver) gets the console link only, and with one_tap off nobody gets
// links.
func TestEachApproverIsMailedTheirOwnOneTapLinks(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "onetap.key")
	sk, err := seal.Ensure(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key := onetap.NewKey(sk)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("one_tap_enabled_%v", on), func(t *testing.T) {
			w := newWorld(t, func(c *config.Config) { c.Email.OneTap = config.OneTap{Enabled: on, KeyFile: keyFile} })
			rec := notifytest.Record("c-onetap")
			rec.Decision.Notify = []string{"email", "email:group:oncall"}
			rec.ArgumentsDigest = strings.Repeat("0f", 32)
			root, err := w.n.Announce(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]onetap.Token{}
			for _, d := range w.wait(t, root, 3) { // alice, bob@example.com, and dave of oncall (no approver)
				for _, m := range oneTapLink.FindAllStringSubmatch(d.body, -1) {
					tok, ok := strings.CutPrefix(m[2], "https://airlock.example.com"+onetap.PathPrefix)
					if !ok {
						t.Fatalf("%s link %s is not on the console", m[1], m[2])
					}
					parsed, err := key.Parse(tok, time.Now())
					if err != nil {
						t.Fatalf("%s link mailed to %v: %v", m[1], d.raw.To, err)
					}
					if want := map[string]string{"Approve": onetap.Approve, "Deny": onetap.Deny}[m[1]]; parsed.Action != want {
						t.Errorf("the %s link of %v does %s", m[1], d.raw.To, parsed.Action)
					}
					got[d.raw.To[0]] = append(got[d.raw.To[0]], parsed)
				}
			}
			if !on {
				if len(got) > 0 {
					t.Fatalf("one-tap links mailed while off: %v", got)
				}
				return
			}
			want := map[string]string{"alice@example.com": "alice", "bob@example.com": "bob@example.com"}
			if len(got) != len(want) {
				t.Fatalf("links went to %v; want the approvers alice and bob only (dave is told, not an approver)", got)
			}
			for addr, approver := range want {
				if len(got[addr]) != 2 {
					t.Fatalf("%s got %d links, want approve and deny", addr, len(got[addr]))
				}
				for _, tok := range got[addr] {
					if tok.Approver != approver || tok.Agent != "bot" || tok.Call != "c-onetap" || tok.Revision != 1 ||
						tok.Digest != rec.GetArgumentsDigest() || !tok.Expires.Equal(rec.GetDeadline().AsTime()) {
						t.Errorf("the link mailed to %s binds %+v; want approver %s, bot/c-onetap revision 1, the digest and the deadline", addr, tok, approver)
					}
				}
			}
		})
	}
}

// The digest of an agent's calls not mailed one by one is one mail to each
// recipient of the last of them, naming the agent and the count, linking
// the console, with no one-tap link.
func TestDigestIsOneMailPerRecipientWithoutOneTapLinks(t *testing.T) {
	w := newWorld(t)
	rec := mailed(notifytest.Record("c-digest"))
	if err := w.n.Digest(context.Background(), notify.Digest{Agent: "bot", Calls: 6, Latest: rec}); err != nil {
		t.Fatal(err)
	}
	const want = "[airlock] Agent bot: 6 more calls waiting"
	var got []smtptest.Message
	testenv.Eventually(t, 10*time.Second, "the digest mails", func() bool {
		got = w.mail.Find(func(m smtptest.Message) bool { return header(m, "Subject") == want })
		return len(got) >= 2
	})
	var to []string
	for _, m := range got {
		to = append(to, m.To...)
		d := parse(t, m)
		if !strings.Contains(d.body, "agent bot has 6 more calls waiting") || !strings.Contains(d.body, "https://airlock.example.com/") || strings.Contains(d.body, onetap.PathPrefix) {
			t.Errorf("digest body:\n%s", d.body)
		}
	}
	slices.Sort(to)
	if !slices.Equal(to, []string{"alice@example.com", "bob@example.com"}) {
		t.Fatalf("digest mailed to %v, want the call's recipients", to)
	}
}

// The mail names the working directory the agent chose (where a relative
// path in the arguments takes effect) on one visible line, defanged as the
// agent's other text is.
func TestMailShowsTheAgentsWorkingDirectory(t *testing.T) {
	rec := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "evil", CallId: "c1", Server: "fs", Tool: "delete_file",
		Cwd: "/srv/\u202eapp\nApprovers: nobody"}, Decision: &airlockv1.Decision{}}
	body := email.RequestBody(rec, "http://airlock.test")
	if want := "Working dir:    /srv/\\u202eapp\\nApprovers: nobody\n"; !strings.Contains(body, want) {
		t.Errorf("the request mail lacks %q:\n%s", want, body)
	}
}

// The mail says beside the call's facts that a name passes for a Latin one
// it is not (the host pаypal.com with a Cyrillic а), the name defanged as
// the agent's other text is; an ordinary Cyrillic reason adds nothing.
func TestMailWarnsOfLookAlikeLetters(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"url": "https://pаypal.com/login"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "web", Tool: "fetch", Arguments: args},
		Decision: &airlockv1.Decision{}}
	body := email.RequestBody(rec, "http://airlock.test")
	if want := "\n! Look-alike letters: the address hxxps://pаypal[.]com/login mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is xn--pypal-4ve[.]com\n"; !strings.Contains(body, want) {
		t.Errorf("the request mail lacks %q:\n%s", want, body)
	}
	rec.Call.Arguments, rec.Call.Reason = nil, "Привет, мир"
	if body := email.RequestBody(rec, "http://airlock.test"); strings.Contains(body, "Look-alike") {
		t.Errorf("the mail warns of a call with no look-alike letters:\n%s", body)
	}
}
