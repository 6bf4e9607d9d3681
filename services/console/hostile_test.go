package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// routes are every path a link or form of the console may point at; an
// agent-written value may appear in one only as an escaped query value.
var routes = regexp.MustCompile(`^/(|login|logout|inbox/events|history|grants|grants/new|grants/scope|grants/[A-Za-z0-9_-]+/revoke|rules|rules/eval|rules/[A-Za-z0-9_-]+/delete|health|tokens|tokens/[A-Za-z0-9_-]+/revoke|audit|audit/export|audit/analytics|threads/approve|in-doubt|calls/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+(/(approve|reject|changes|edit|cancel|in-doubt))?|static/[a-z.]+|manifest\.webmanifest|icons/icon-[0-9]+\.png|devices|devices/[a-f0-9]+/revoke)$`)

var urlAttrs = regexp.MustCompile(`(?:href|action|src|data-live|data-scope)="([^"]*)"`)

// TestNothingAnAgentWritesReachesAURL: records whose every agent-written
// field is hostile (a thread id that predates ingress validation, tool and
// server names, reasons, arguments) render on every page with every link,
// form action and redirect pointing at a known route, agent text appearing
// only escaped.
func TestNothingAnAgentWritesReachesAURL(t *testing.T) {
	e := newEnv(t)
	hostile := `ticket-42/../../grants?x="><form action="/grants">`
	rec := pending("call_h", "bot", "fs__write_file", map[string]any{"path": "../../grants?", hostile: hostile}, airlockv1.Risk_RISK_HIGH)
	rec.Call.ThreadId, rec.Call.Reason, rec.Call.Server, rec.Call.Tool = hostile, hostile, "fs/../..", "write?x"
	rec.Decision.Reason = hostile
	other := pending("call_h2", "bot", "fs__write_file", map[string]any{"path": "x"}, airlockv1.Risk_RISK_LOW)
	other.Call.ThreadId = hostile
	decided := pending("call_hd", "bot", "fs__write_file", map[string]any{"path": hostile}, airlockv1.Risk_RISK_LOW)
	decided.State, decided.Reason, decided.DecidedBy = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, hostile, &airlockv1.Actor{Id: "bob"}
	for _, r := range []*airlockv1.ApprovalRecord{rec, other, decided} {
		e.approval.put(r)
	}
	b := e.browser()
	b.signIn("alice")
	for _, path := range []string{"/", "/calls/bot/call_h", "/calls/bot/call_hd", "/history", "/grants/new?agent=bot&from=call_h"} {
		t.Run("every_url_on_"+path+"_is_a_known_route", func(t *testing.T) {
			p := b.get(path)
			if p.Status != http.StatusOK {
				t.Fatalf("status %d", p.Status)
			}
			for _, m := range urlAttrs.FindAllStringSubmatch(p.Body, -1) {
				raw := strings.ReplaceAll(m[1], "&amp;", "&")
				u, err := url.Parse(raw)
				inPage := err == nil && u.Path == "" && u.RawQuery == "" && u.Fragment != ""
				if err != nil || u.Host != "" || u.Scheme != "" || !inPage && !routes.MatchString(u.Path) {
					t.Errorf("%q points outside the console's routes", m[1])
				}
			}
			if strings.Contains(p.Body, `"><form`) || strings.Contains(p.Body, "<form action=\"/grants\">") {
				t.Error("agent text reached the page as markup")
			}
		})
	}
	t.Run("the_thread_form_posts_the_thread_as_a_value_and_comes_back_to_the_call", func(t *testing.T) {
		p := b.get("/calls/bot/call_h")
		if !strings.Contains(p.Body, `action="/threads/approve"`) || !strings.Contains(p.Body, `name="thread" value="ticket-42/../../grants?x=&#34;&gt;&lt;form`) {
			t.Fatalf("the thread form:\n%s", p.Body)
		}
		r := b.submit("/threads/approve", url.Values{"agent": {"bot"}, "thread": {hostile}, "from": {"../grants"}, "call": {"call_h.1.x", "call_h2.1.x"}})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
			t.Fatalf("status %d, redirected to %q", r.Status, r.Header.Get("Location"))
		}
		if n := len(e.approval.grants); n != 0 {
			t.Fatalf("%d grants exist", n)
		}
	})
}

// TestARecordThatCannotBeShownDoesNotBreakAList: a record holding a NaN
// (from before ingress refused them) is shown flagged; the other records,
// the live feed, the REST list and history all still work.
func TestARecordThatCannotBeShownDoesNotBreakAList(t *testing.T) {
	e := newEnv(t)
	nan := pending("call_nan", "bot", "fs__write_file", map[string]any{"path": "/tmp/n"}, airlockv1.Risk_RISK_LOW)
	nan.Call.Arguments.Fields["size"] = structpb.NewNumberValue(math.NaN())
	decidedNaN := pending("call_nan_d", "bot", "fs__write_file", map[string]any{"path": "/tmp/d"}, airlockv1.Risk_RISK_LOW)
	decidedNaN.Call.Arguments.Fields["size"] = structpb.NewNumberValue(math.Inf(-1))
	decidedNaN.State, decidedNaN.UpdatedAt = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, timestamppb.Now()
	ok := pending("call_ok", "bot", "fs__write_file", map[string]any{"path": "/tmp/ok"}, airlockv1.Risk_RISK_LOW)
	for _, r := range []*airlockv1.ApprovalRecord{nan, decidedNaN, ok} {
		e.approval.put(r)
	}
	b := e.browser()
	b.signIn("alice")
	tok := newToken(t, e, "alice", `{"name":"cli"}`)
	tests := []struct {
		name, path string
		want       []string
	}{
		{"the_inbox_shows_both_with_the_nan_flagged", "/", []string{"call-3-bot-call_ok", `call-row flagged`, "argument /size is NaN"}},
		{"the_call_page_shows_the_marker", "/calls/bot/call_nan", []string{`&#34;size&#34;: &#34;NaN&#34;`, "not a JSON number"}},
		{"history_shows_the_decided_one_flagged", "/history", []string{"call-3-bot-call_nan_d", "argument /size is -Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.get(tt.path)
			if p.Status != http.StatusOK {
				t.Fatalf("status %d:\n%s", p.Status, p.Body)
			}
			for _, w := range tt.want {
				if !strings.Contains(p.Body, w) {
					t.Errorf("%s lacks %q", tt.path, w)
				}
			}
		})
	}
	t.Run("the_live_feed_syncs_every_row", func(t *testing.T) {
		ev := next(t, openFeed(t, b, ""))
		if ev.Name != "sync" || !strings.Contains(ev.Data, "call_ok") || !strings.Contains(ev.Data, "call_nan") {
			t.Fatalf("sync %+v", ev)
		}
	})
	t.Run("the_rest_list_names_the_problem_and_keeps_every_record", func(t *testing.T) {
		p := apiCall(t, e.srv.URL, tok, http.MethodGet, "/api/v1/approvals", "")
		var out struct {
			Records  []json.RawMessage
			Problems []struct{ CallID, Problem string } `json:"problems"`
		}
		if err := json.Unmarshal([]byte(p.Body), &out); err != nil || p.Status != http.StatusOK || len(out.Records) != 2 || len(out.Problems) != 1 {
			t.Fatalf("%d %v %s", p.Status, err, p.Body)
		}
	})
}

// TestSignInIsLimited: failed sign-ins are
// counted per user name and per address; past the limit even the right
// password waits, and an unknown name is counted the same way.
func TestSignInIsLimited(t *testing.T) {
	e := newEnvWith(t, func(c *config.Config) {
		c.Console.SignIn = config.SignInLimit{FailuresPerUser: 3, FailuresPerAddress: 5, Window: time.Hour}
	})
	try := func(user, pw string) page {
		b := e.browser()
		tok := b.csrf("/login")
		return b.post("/login", url.Values{"_csrf": {tok}, "user": {user}, "password": {pw}})
	}
	steps := []struct {
		name, user, pw string
		want           int
	}{
		{"a_wrong_password_is_refused", "alice", "wrong-1", http.StatusUnauthorized},
		{"a_second_wrong_password_is_refused", "alice", "wrong-2", http.StatusUnauthorized},
		{"a_third_wrong_password_reaches_the_user_limit", "alice", "wrong-3", http.StatusUnauthorized},
		{"then_even_the_right_password_waits", "alice", password, http.StatusTooManyRequests},
		{"an_unknown_name_is_counted_like_a_known_one", "mallory", "guess", http.StatusUnauthorized},
		{"another_user_from_the_same_address_reaches_the_address_limit", "bob", "wrong", http.StatusUnauthorized},
		{"then_every_user_from_that_address_waits", "audrey", password, http.StatusTooManyRequests},
	}
	for _, s := range steps {
		p := try(s.user, s.pw)
		if p.Status != s.want {
			t.Fatalf("%s: status %d, want %d\n%s", s.name, p.Status, s.want, p.Body)
		}
		if s.want == http.StatusTooManyRequests && !strings.Contains(p.Body, "Too many failed sign-ins") {
			t.Fatalf("%s: the page does not say why:\n%s", s.name, p.Body)
		}
	}
}

// TestSignInFailuresFromOneIPv6NetworkCountTogether: an IPv6 client holds
// a whole /64, so each of its addresses counted alone gave it a fresh
// failures_per_address at every address. Failures are now counted per /64
// (an IPv4 address alone), through a trusted proxy's X-Forwarded-For as
// from the connection.
func TestSignInFailuresFromOneIPv6NetworkCountTogether(t *testing.T) {
	e := newEnvWith(t, func(c *config.Config) {
		c.Console.SignIn = config.SignInLimit{FailuresPerUser: 100, FailuresPerAddress: 3, Window: time.Hour}
		c.Console.TrustedProxies = []string{"127.0.0.1", "::1"}
	})
	try := func(from, user string) page {
		b := e.browser()
		tok := b.csrf("/login")
		req, _ := http.NewRequest(http.MethodPost, b.base+"/login", strings.NewReader(url.Values{"_csrf": {tok}, "user": {user}, "password": {"guess"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", from)
		return b.do(req)
	}
	for _, s := range []struct {
		name, from string
		want       int
	}{
		{"a_first_address_of_a_network", "2001:db8:1:2::1", http.StatusUnauthorized},
		{"another_address_of_the_network", "2001:db8:1:2:aaaa::7", http.StatusUnauthorized},
		{"a_third_reaches_the_networks_limit", "2001:db8:1:2:ffff:ffff:ffff:ffff", http.StatusUnauthorized},
		{"then_any_address_of_the_network_waits", "2001:db8:1:2:1234:5678:9abc:def0", http.StatusTooManyRequests},
		{"another_network_is_counted_apart", "2001:db8:1:3::1", http.StatusUnauthorized},
		{"an_ipv4_address_is_counted_alone", "192.0.2.1", http.StatusUnauthorized},
		{"so_is_the_next_ipv4_address", "192.0.2.2", http.StatusUnauthorized},
	} {
		if p := try(s.from, "user-"+s.name); p.Status != s.want {
			t.Fatalf("%s: status %d, want %d\n%s", s.name, p.Status, s.want, p.Body)
		}
	}
}

// TestSignInCountersLeaveNothingBehind: every user name and network a
// client tries a password from makes a counter in the console bucket, and
// no sign-in is needed to make them. The sweep deleted a counter once its
// window passed, and a KV delete leaves its marker in the bucket for ever:
// a client cycling names grew the bucket for good (and every session
// signed out of left one). A counter now expires with its window, and what
// is removed leaves a marker that expires: nothing stays.
func TestSignInCountersLeaveNothingBehind(t *testing.T) {
	e := newEnvWith(t, func(c *config.Config) {
		c.Console.SignIn = config.SignInLimit{FailuresPerUser: 100, FailuresPerAddress: 100, Window: 2 * time.Second}
	})
	_, srv := e.startConsoleWith(console.Options{SweepEvery: 300 * time.Millisecond})
	b := &browser{t: t, base: srv.URL, c: e.browser().c}
	for i := range 5 {
		tok := b.csrf("/login")
		if p := b.post("/login", url.Values{"_csrf": {tok}, "user": {fmt.Sprintf("guess-%d", i)}, "password": {"wrong"}}); p.Status != http.StatusUnauthorized {
			t.Fatalf("a wrong password: %d", p.Status)
		}
	}
	// alice fails, then signs in (her counter is cleared at once), and
	// signs out (her session is removed).
	tok := b.csrf("/login")
	b.post("/login", url.Values{"_csrf": {tok}, "user": {"alice"}, "password": {"wrong"}})
	b.signIn("alice")
	if p := b.submit("/logout", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}

	bucket := e.deps.Config.Buckets.Console
	stream, err := e.deps.JS.Stream(context.Background(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	held := func() int {
		n := 0
		for _, kind := range []string{"logins", "sessions"} {
			info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter("$KV."+bucket+"."+kind+".>"))
			if err != nil {
				t.Fatal(err)
			}
			n += len(info.State.Subjects)
		}
		return n
	}
	if n := held(); n == 0 {
		t.Fatal("the failed sign-ins left no counter to count them")
	}
	testenv.Eventually(t, 20*time.Second, "the sign-in counters, the session and their markers gone from the console bucket", func() bool { return held() == 0 })
}

// TestTheNextRedirectStaysOnTheConsole: whatever next= says, a sign-in
// redirects to a path of this site.
func TestTheNextRedirectStaysOnTheConsole(t *testing.T) {
	e := newEnv(t)
	tests := []struct{ name, next, want string }{
		{"a_path_is_kept", "/history?state=rejected", "/history?state=rejected"},
		{"a_protocol_relative_url_is_refused", "//evil.example/", "/"},
		{"a_tab_between_slashes_is_refused", "/\t/evil.example", "/"},
		{"a_newline_between_slashes_is_refused", "/\n/evil.example", "/"},
		{"a_backslash_is_refused", "/\\evil.example", "/"},
		{"an_encoded_slash_is_refused", "/%2F/evil.example", "/"},
		{"an_absolute_url_is_refused", "https://evil.example/", "/"},
		{"a_relative_path_is_refused", "evil.example", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := e.browser()
			tok := b.csrf("/login")
			p := b.post("/login", url.Values{"_csrf": {tok}, "user": {"bob"}, "password": {password}, "next": {tt.next}})
			if p.Status != http.StatusSeeOther || p.Header.Get("Location") != tt.want {
				t.Fatalf("status %d, redirected to %q, want %q", p.Status, p.Header.Get("Location"), tt.want)
			}
		})
	}
}

// TestPasswordsNeverReachTheLog: a failed and a successful sign-in log
// nothing of the password, not even one typed into the user field.
func TestPasswordsNeverReachTheLog(t *testing.T) {
	var buf bytes.Buffer
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	logger := slog.New(slog.NewTextHandler(lockedWriter{&buf, mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnvWith(t, func(*config.Config) {}, func(d *svc.Deps) { d.Log = logger })
	secrets := []string{"Tr0ub4dor&3-in-the-user-field", "hunter2-wrong-password"}
	for _, attempt := range []struct{ user, pw string }{{secrets[0], "x"}, {"alice", secrets[1]}, {"alice", password}} {
		b := e.browser()
		tok := b.csrf("/login")
		b.post("/login", url.Values{"_csrf": {tok}, "user": {attempt.user}, "password": {attempt.pw}})
	}
	<-mu
	logged := buf.String()
	mu <- struct{}{}
	for _, s := range append(secrets, password) {
		if strings.Contains(logged, s) {
			t.Fatalf("the log holds %q:\n%s", s, logged)
		}
	}
	if !strings.Contains(logged, "signed in") {
		t.Fatalf("the successful sign-in was not logged at all:\n%s", logged)
	}
}

type lockedWriter struct {
	buf *bytes.Buffer
	mu  chan struct{}
}

func (w lockedWriter) Write(p []byte) (int, error) {
	<-w.mu
	defer func() { w.mu <- struct{}{} }()
	return w.buf.Write(p)
}

// TestThreadPreview: the call page lists every pending call of the thread
// with its risk before "approve all" is confirmed, warns of high risk, and
// the form carries exactly those calls.
func TestThreadPreview(t *testing.T) {
	e := newEnv(t)
	for i, risk := range []airlockv1.Risk{airlockv1.Risk_RISK_LOW, airlockv1.Risk_RISK_CRITICAL, airlockv1.Risk_RISK_LOW} {
		rec := pending([]string{"call_p1", "call_p2", "call_p3"}[i], "bot", "fs__write_file", map[string]any{"path": []string{"a", "b", "c"}[i]}, risk)
		rec.Call.ThreadId = "t-7"
		e.approval.put(rec)
	}
	elsewhere := pending("call_q", "bot", "fs__write_file", map[string]any{"path": "q"}, airlockv1.Risk_RISK_LOW)
	elsewhere.Call.ThreadId = "t-8"
	e.approval.put(elsewhere)
	b := e.browser()
	b.signIn("alice")
	p := b.get("/calls/bot/call_p1")
	wants := []string{"Approve all 3 pending calls of this thread", "(1 critical, 2 low)", `id="thread-high-risk"`, `id="thread-reviewed" required`}
	for _, id := range []string{"call_p1", "call_p2", "call_p3"} {
		// Each call with the digest of the arguments shown.
		wants = append(wants, `name="call" value="`+id+`.1.`+e.approval.record(id).GetArgumentsDigest()+`"`)
	}
	for _, want := range wants {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the call page lacks %q", want)
		}
	}
	if strings.Contains(p.Body, `value="call_q.1`) {
		t.Error("a call of another thread is listed")
	}
}

// An argument name can end in a character that draws nothing (a combining
// grapheme joiner, a variation selector): "dry_run\u034f": true read as
// "dry_run": true on the call page, and the tool, finding no dry_run, ran
// for real. Such characters are escaped, and a name that is not plain
// ASCII (also a look-alike letter) is flagged on the page.
func TestAnArgumentNameCannotPassForAnother(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signIn("alice")
	e.approval.put(pending("call_i1", "bot", "db__migrate", map[string]any{
		"dry_run\u034f": true, "database": "prod", "confirm\ufe0f": false, "drу_mode": "full", // the у is Cyrillic
	}, airlockv1.Risk_RISK_HIGH))
	p := b.get("/calls/bot/call_i1")
	for _, want := range []string{`dry_run\u034f`, `confirm\ufe0f`,
		`the argument name &#34;dry_run\u034f&#34; is not plain ASCII`, `the argument name &#34;drу_mode&#34; is not plain ASCII: it may look like another name (&#34;dr\u0443_mode&#34;)`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the call page lacks %q", want)
		}
	}
	if strings.ContainsAny(p.Body, "\u034f\ufe0f") {
		t.Error("the call page holds a character that draws nothing, raw")
	}
}

// TestACallPageCostsTheSameWhateverTheArguments (issue 22): seven
// branches nested thousands of levels deep (a record from before ingress
// refused them) made the call page 672 MB; at the depth limit, or with
// arguments as large as a request may be, the page stays a bounded size
// and says how much of the arguments it shows and where the rest is.
func TestACallPageCostsTheSameWhateverTheArguments(t *testing.T) {
	e := newEnv(t)
	branches := func(depth int) map[string]any {
		out := map[string]any{}
		for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			var v any = "leaf"
			for range depth - 1 {
				v = map[string]any{"v": v}
			}
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name  string
		args  map[string]any
		whole bool // shown whole, so approvable from the page
	}{
		{"seven_branches_4900_levels_deep_are_cut_and_not_approvable_here", branches(4900), false},
		{"seven_branches_at_the_depth_limit_with_a_large_string_show_whole", func() map[string]any {
			m := branches(ingress.DefaultMaxDepth)
			m["content"] = strings.Repeat("x", 200<<10)
			return m
		}(), true},
	}
	b := e.browser()
	b.signIn("alice")
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("call_deep%d", i)
			e.approval.put(pending(id, "bot", "fs__write_file", tc.args, airlockv1.Risk_RISK_LOW))
			p := b.get("/calls/bot/" + id)
			if p.Status != http.StatusOK {
				t.Fatalf("status %d", p.Status)
			}
			if len(p.Body) > 3*calls.ShownArgumentsBytes {
				t.Fatalf("the call page is %d bytes: want at most %d whatever the arguments", len(p.Body), 3*calls.ShownArgumentsBytes)
			}
			cut := strings.Contains(p.Body, fmt.Sprintf("shown %d of ", calls.ShownArgumentsBytes))
			approvable := strings.Contains(p.Body, `id="confirm-approve"`) || strings.Contains(p.Body, `id="confirm-edit"`)
			switch {
			case tc.whole && (cut || !approvable):
				t.Fatalf("arguments that fit were cut (%v) or not approvable (%v)", cut, approvable)
			case !tc.whole && (!cut || !strings.Contains(p.Body, "/api/v1/approvals/bot/"+id)):
				t.Fatal("the page does not say it shows part of the arguments and where the rest is")
			case !tc.whole && (approvable || !strings.Contains(p.Body, `id="too-large-to-approve"`)):
				t.Fatal("a page that could not show the arguments whole offers to approve them")
			}
		})
	}
}
