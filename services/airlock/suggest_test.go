package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// learnWorld is an airlock in this process: embedded NATS, the real policy,
// approval and console services, and a generator that records calls
// through them as agents and reviewers do.
type learnWorld struct {
	t    *testing.T
	cfg  config.Config
	deps svc.Deps
	gen  *historyGen
	api  *approvalapi.Client
	base string
	// replays counts the console's computations of its Suggestions page;
	// mostAtOnce is the most that ran at one time; a computation waits for
	// hold to close while hold is set. waits counts the requests that found
	// a computation running and waited for it.
	replays, mostAtOnce, waits *atomic.Int64
	hold                       *atomic.Pointer[chan struct{}]
}

const learnPassword = "correct horse battery staple"

func newLearnWorld(t *testing.T) *learnWorld {
	t.Helper()
	return newLearnWorldWith(t, console.Options{})
}

// newLearnWorldWith is newLearnWorld with the console's options (its
// audit reader and suggester are the world's own).
func newLearnWorldWith(t *testing.T, opts console.Options) *learnWorld {
	t.Helper()
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	h, err := bcrypt.GenerateFromPassword([]byte(learnPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice", "bob", "carol", "root"}}
	cfg.Console.Users = []config.User{
		{Name: "alice", PasswordHash: string(h), Roles: []string{config.RoleReviewer}},
		{Name: "root", PasswordHash: string(h), Roles: []string{config.RoleAdmin}},
	}
	deps := testenv.Deps(t, cfg)
	ctx := context.Background()
	runDeciders(t, deps)
	a := newConsoleAudit(deps)
	sug, replays, mostAtOnce, waits, hold := newConsoleSuggest(a), &atomic.Int64{}, &atomic.Int64{}, &atomic.Int64{}, &atomic.Pointer[chan struct{}]{}
	sug.waiting = func() { waits.Add(1) }
	var atOnce atomic.Int64
	sug.replayed = func() func() {
		replays.Add(1)
		n := atOnce.Add(1)
		for m := mostAtOnce.Load(); n > m && !mostAtOnce.CompareAndSwap(m, n); m = mostAtOnce.Load() {
		}
		if h := hold.Load(); h != nil {
			<-*h
		}
		return func() { atOnce.Add(-1) }
	}
	opts.Audit, opts.Suggest = a, sug
	con, err := console.New(ctx, deps, opts)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, con)
	e := echo.New()
	con.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	api := approvalapi.New(deps.NC, fk, console.Frontend)
	gen := &historyGen{js: deps.JS, stream: cfg.Stream.Name, approvals: api, reviewers: []string{"alice", "bob", "carol"}, rng: rand.New(rand.NewPCG(25, 1)), prefix: "h"}
	t.Cleanup(gen.stop)
	return &learnWorld{t: t, cfg: cfg, deps: deps, api: api, base: srv.URL, replays: replays, mostAtOnce: mostAtOnce, waits: waits, hold: hold, gen: gen}
}

// runDeciders runs the policy and approval services on deps for the test:
// what a history needs to be decided.
func runDeciders(t *testing.T, deps svc.Deps) {
	t.Helper()
	pol, err := policy.NewFromConfig(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, pol)
	appr, err := approval.NewFromConfig(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, appr)
}

func (w *learnWorld) record(mix []historyKind, n int) historyStats {
	w.t.Helper()
	st, err := w.gen.run(context.Background(), mix, n)
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

func (w *learnWorld) report() suggest.Report {
	w.t.Helper()
	rep, err := suggestions(context.Background(), w.cfg, store.NewStream(w.deps.JS, w.cfg.Stream.Name, nil), nil, suggest.Config{}, time.Time{})
	if err != nil {
		w.t.Fatal(err)
	}
	return rep
}

// session is a signed-in console user that does not follow redirects.
type session struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

var learnCSRF = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (w *learnWorld) signIn(user string) *session {
	w.t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{t: w.t, base: w.base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, body := s.get("/login")
	m := learnCSRF.FindStringSubmatch(body)
	if m == nil {
		w.t.Fatalf("no sign-in form:\n%s", body)
	}
	if status, body := s.post("/login", url.Values{"_csrf": {m[1]}, "user": {user}, "password": {learnPassword}, "next": {"/"}}); status != http.StatusSeeOther {
		w.t.Fatalf("sign in as %s: %d\n%s", user, status, body)
	}
	_, body = s.get("/")
	if m = learnCSRF.FindStringSubmatch(body); m == nil {
		w.t.Fatalf("no anti-forgery token after signing in as %s", user)
	}
	s.csrf = m[1]
	return s
}

func (s *session) get(path string) (int, string) {
	s.t.Helper()
	resp, err := s.c.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *session) post(path string, form url.Values) (int, string) {
	s.t.Helper()
	if s.csrf != "" {
		form.Set("_csrf", s.csrf)
	}
	resp, err := s.c.PostForm(s.base+path, form)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hostileFlood is an agent flooding approved-looking writes whose
// arguments carry markup and a bidi override, into the same directory the
// writer-bot writes to.
func hostileFlood() historyKind {
	return historyKind{weight: 1, agent: "mallory-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf(`/srv/app/docs/"><script>alert(2)</script>/%d.md`, r.IntN(9)), "content": "<script>alert(1)</script>\u202egnp.exe"}
	}, verdict: always(approve)}
}

func (w *learnWorld) decisionOf(c *airlockv1.ToolCall) string {
	w.t.Helper()
	typ, err := w.gen.outcome(context.Background(), c)
	if err != nil {
		w.t.Fatal(err)
	}
	return typ
}

func (w *learnWorld) submit(agent, server, tool string, args map[string]any) *airlockv1.ToolCall {
	w.t.Helper()
	c, err := w.gen.submit(context.Background(), agent, server, tool, args)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// The whole loop through the real services: a recorded history yields
// suggestions, replay proves none would have let a refused call run, an
// admin adopts them on the console, and the same traffic afterwards asks
// people far less — while an agent's flood reaches no other agent and its
// text is shown escaped.
func TestSuggestionsLearnedFromRecordedDecisionsRemoveAsksAndNoRefusedCall(t *testing.T) {
	w := newLearnWorld(t)
	before := w.record(historyMix(), 240)
	w.record([]historyKind{hostileFlood()}, 12)
	if before.Rejected == 0 || before.Changes == 0 || before.Allowed == 0 {
		t.Fatalf("the history is not a mix: %+v", before)
	}
	rep := w.report()

	byAgent := map[string]suggest.Suggestion{}
	for _, s := range rep.Suggestions {
		if s.Grant.GetAgentId() != s.Agent || s.Agent == "" {
			t.Fatalf("suggestion %s is not pinned to its own agent: %s", s.ID, s.Scope)
		}
		byAgent[s.Agent+" "+s.Tool] = s
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"the routine documentation writes are proposed, only as wide as their directory", strings.Contains(byAgent["writer-bot write_file"].Scope, "/path matches /srv/app/docs/[!./]*")},
		{"the team report is proposed pinned to its recipient", strings.Contains(byAgent["reporter-bot send_message"].Scope, `/to is exactly "team@example.com"`)},
		{"the flooding agent gets a suggestion for itself alone", byAgent["mallory-bot write_file"].Grant.GetAgentId() == "mallory-bot"},
		{"risky shell commands are never proposed", byAgent["ops-bot run_command"].ID == "" && skippedFor(rep, "ops-bot", "risk is high")},
		{"replay finds no refused call any suggestion would allow", rep.Together.Safe() && len(rep.Dropped) == 0},
		{"the suggestions remove at least half of the asks", rep.AsksRemoved*2 >= rep.Asks && rep.Asks > 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: does not hold (suggestions %+v, skipped %+v)", c.name, scopes(rep), rep.Skipped)
		}
	}

	// The page: readable by an auditor or admin, hostile text escaped.
	admin := w.signIn("root")
	status, page := admin.get("/suggestions")
	if status != http.StatusOK {
		t.Fatalf("suggestions page: %d\n%s", status, page)
	}
	for _, raw := range []string{"<script>alert(", "\u202e"} {
		if strings.Contains(page, raw) {
			t.Errorf("the suggestions page shows agent text %q unescaped", raw)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(strings.ToLower(page), `\u202e`) {
		t.Errorf("the suggestions page does not show the hostile arguments escaped")
	}

	// Only admins adopt or dismiss.
	mal := byAgent["mallory-bot write_file"]
	reviewer := w.signIn("alice")
	if status, _ := reviewer.post("/suggestions/"+mal.ID+"/adopt", url.Values{}); status != http.StatusForbidden {
		t.Errorf("a reviewer adopting a suggestion: status %d, want 403", status)
	}
	// The admin dismisses the flood's suggestion and adopts the others.
	if status, body := admin.post("/suggestions/"+mal.ID+"/dismiss", url.Values{}); status != http.StatusSeeOther {
		t.Fatalf("dismiss: %d\n%s", status, body)
	}
	if _, page := admin.get("/suggestions"); strings.Contains(page, "suggestion-"+mal.ID) || !strings.Contains(page, "1 dismissed") {
		t.Errorf("a dismissed suggestion is still listed")
	}
	w.checkCLI(rep, mal.ID)
	for _, s := range rep.Suggestions {
		if s.ID == mal.ID {
			continue
		}
		if status, body := admin.post("/suggestions/"+s.ID+"/adopt", url.Values{}); status != http.StatusSeeOther {
			t.Fatalf("adopt %s: %d\n%s", s.ID, status, body)
		}
		// Recorded in the trail: the grant names the evidence, the actor the adopter.
		ev := testenv.WaitForEvent(t, w.deps.JS, "airlock.evt."+subject.SystemAgent+".grant_"+s.ID+".>", subject.GrantCreated, 10*time.Second)
		if ev.GetActor().GetId() != "root" || ev.GetGrantCreated().GetGrant().GetGrantId() != "grant_"+s.ID {
			t.Errorf("adopting %s recorded %v", s.ID, ev)
		}
	}

	// The same traffic afterwards: far fewer asks, and none of it reaches
	// another agent or a refused path.
	after := w.record(historyMix(), 120)
	shareBefore, shareAfter := float64(before.Asked)/float64(before.Calls), float64(after.Asked)/float64(after.Calls)
	t.Logf("asks before: %d of %d calls (%.0f%%); after adopting: %d of %d (%.0f%%); replay: %d of %d asks removed", before.Asked, before.Calls, 100*shareBefore,
		after.Asked, after.Calls, 100*shareAfter, rep.AsksRemoved, rep.Asks)
	if shareAfter > shareBefore/2 {
		t.Errorf("adopting the suggestions left %.0f%% of calls asking (was %.0f%%)", 100*shareAfter, 100*shareBefore)
	}
	for _, c := range []struct {
		name string
		call *airlockv1.ToolCall
	}{
		{"another agent writing where the adopted grants allow", w.submit("fresh-bot", "fs", "write_file", map[string]any{"path": "/srv/app/docs/intro-1.md", "content": "x"})},
		{"the writer writing where people refused", w.submit("writer-bot", "fs", "write_file", map[string]any{"path": "/etc/app/intro.conf", "content": "x"})},
		{"the writer writing a sibling directory", w.submit("writer-bot", "fs", "write_file", map[string]any{"path": "/srv/app/config/x.md", "content": "x"})},
		{"the reporter mailing a stranger", w.submit("reporter-bot", "mail", "send_message", map[string]any{"to": "x@elsewhere.example", "subject": "daily report", "body": "x"})},
		{"the flooding agent, whose suggestion was dismissed", w.submit("mallory-bot", "fs", "write_file", map[string]any{"path": `/srv/app/docs/"><script>alert(2)</script>/1.md`, "content": "x"})},
	} {
		if got := w.decisionOf(c.call); got != subject.ApprovalRequested {
			t.Errorf("%s: %s, want a person asked", c.name, got)
		}
	}
}

// checkCLI: `airlock policy suggest` reports what the console shows, marks
// the dismissed suggestion, and shows agent text escaped.
func (w *learnWorld) checkCLI(rep suggest.Report, dismissed string) {
	w.t.Helper()
	ctx := context.Background()
	out, err := runCLI(ctx, w.t, "policy", "suggest", "--nats", w.cfg.NATS.URL, "--json")
	if err != nil {
		w.t.Fatalf("policy suggest --json: %v\n%s", err, out)
	}
	var got struct {
		Suggestions []struct {
			ID string `json:"id"`
		} `json:"suggestions"`
		AsksRemoved int                        `json:"asks_removed"`
		Dismissed   map[string]any             `json:"dismissed"`
		Together    struct{ Violations []any } `json:"together"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		w.t.Fatalf("policy suggest --json printed no JSON: %v\n%s", err, out)
	}
	if len(got.Suggestions) != len(rep.Suggestions) || got.AsksRemoved != rep.AsksRemoved || got.Dismissed[dismissed] == nil || len(got.Together.Violations) != 0 {
		w.t.Errorf("policy suggest --json disagrees with the report: %s", out)
	}
	text, err := runCLI(ctx, w.t, "policy", "suggest", "--nats", w.cfg.NATS.URL)
	if err != nil || !strings.Contains(text, "dismissed by root") || strings.Contains(text, "\u202e") || !strings.Contains(text, "proven by replay") {
		w.t.Errorf("policy suggest: %v\n%s", err, text)
	}
}

func skippedFor(rep suggest.Report, agent, why string) bool {
	for _, s := range rep.Skipped {
		if s.Agent == agent && strings.Contains(s.Why, why) {
			return true
		}
	}
	return false
}

func scopes(rep suggest.Report) []string {
	var out []string
	for _, s := range rep.Suggestions {
		out = append(out, s.Scope)
	}
	return out
}

// The replay is the proof, not the grouping: a rejected call of another
// shape (no content) that the proposed grant would still allow drops the
// proposal, and the report names the call.
func TestReplayDropsASuggestionThatWouldAllowARefusedCall(t *testing.T) {
	w := newLearnWorld(t)
	w.record([]historyKind{{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/notes/%d.md", r.IntN(50)), "content": fmt.Sprintf("note %d", r.IntN(1000))}
	}, verdict: always(approve)}}, 6)
	w.record([]historyKind{{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(*rand.Rand) map[string]any {
		return map[string]any{"path": "/srv/notes/truncate-me.md"}
	}, verdict: always(reject)}}, 1)
	rep := w.report()
	if len(rep.Suggestions) != 0 || len(rep.Dropped) != 1 {
		t.Fatalf("suggestions %v, dropped %d: want the one proposal dropped by replay", scopes(rep), len(rep.Dropped))
	}
	v := rep.Dropped[0].Proof.Violations
	if len(v) != 1 || v[0].Agent != "notes-bot" || v[0].Outcome != suggest.Rejected {
		t.Fatalf("violations %+v: want the rejected call", v)
	}
}

// The proof covers the whole recorded history, not only the window the
// evidence is read from (--since, policy.suggest.since): a write people
// rejected before the window still drops a grant that would allow it.
func TestSuggestionsAreProvenOverTheWholeHistoryNotOnlyTheEvidenceWindow(t *testing.T) {
	w := newLearnWorld(t)
	refused := w.submit("notes-bot", "fs", "write_file", map[string]any{"path": "/srv/notes/passwords.md", "content": "everything"})
	if err := w.gen.settle(context.Background(), refused, always(reject), &historyStats{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForEvent(t, w.deps.JS, "airlock.evt.notes-bot."+refused.CallId+".>", subject.Rejected, 10*time.Second)
	window := time.Now().UTC()
	w.record([]historyKind{{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/notes/%d.md", r.IntN(50)), "content": fmt.Sprintf("note %d", r.IntN(1000))}
	}, verdict: always(approve)}}, 8)

	since := window.Format(time.RFC3339Nano)
	out, err := runCLI(context.Background(), t, "policy", "suggest", "--nats", w.cfg.NATS.URL, "--since", since, "--json")
	if err != nil {
		t.Fatalf("policy suggest --since %s: %v\n%s", since, err, out)
	}
	var got struct {
		Suggestions []struct {
			Scope string `json:"scope"`
		} `json:"suggestions"`
		Dropped []struct {
			Proof struct {
				Violations []struct {
					Call string `json:"call_id"`
				} `json:"violations"`
			} `json:"proof"`
		} `json:"dropped"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("policy suggest --json printed no JSON: %v\n%s", err, out)
	}
	if len(got.Suggestions) != 0 {
		t.Errorf("suggested %+v although it would allow the write %s people rejected before the window", got.Suggestions, refused.CallId)
	}
	if len(got.Dropped) != 1 || len(got.Dropped[0].Proof.Violations) != 1 || got.Dropped[0].Proof.Violations[0].Call != refused.CallId {
		t.Errorf("dropped %+v: want the proposal dropped by replay for the rejected write %s", got.Dropped, refused.CallId)
	}
}

// Risk is a property of each call (the highest any matching rule assigns),
// not of the rule that asks: a group whose first approvals were medium
// risk and whose later ones were high is not proposed, so a grant never
// answers for high-risk calls people happened to approve.
func TestSuggestionsAreNotProposedWhenAnyApprovedCallOfTheGroupWasHighRisk(t *testing.T) {
	w := newLearnWorld(t)
	admin := w.signIn("root")
	w.putHighRiskRule(admin, `{"id":"notes-keys","priority":150,"server":"fs","tool":"write_file","args":{"/path":"/srv/notes/keys/*"},"effect":"ask","risk":"high","reason":"key material"}`,
		"/srv/notes/keys/probe.md")
	notes := func(dir string) []historyKind {
		return []historyKind{{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/srv/notes/%s%d.md", dir, r.IntN(50)), "content": fmt.Sprintf("note %d", r.IntN(1000))}
		}, verdict: always(approve)}}
	}
	w.record(notes(""), 6)
	w.record(notes("keys/"), 2)

	out, err := runCLI(context.Background(), t, "policy", "suggest", "--nats", w.cfg.NATS.URL, "--json")
	if err != nil {
		t.Fatalf("policy suggest: %v\n%s", err, out)
	}
	var got struct {
		Suggestions []struct {
			Agent string `json:"agent_id"`
			Scope string `json:"scope"`
		} `json:"suggestions"`
		Skipped []struct {
			Agent string `json:"agent_id"`
			Why   string `json:"why"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("policy suggest --json printed no JSON: %v\n%s", err, out)
	}
	for _, s := range got.Suggestions {
		if s.Agent == "notes-bot" {
			t.Errorf("proposed %q although two of its approvals were high risk", s.Scope)
		}
	}
	skipped := false
	for _, s := range got.Skipped {
		skipped = skipped || s.Agent == "notes-bot" && strings.Contains(s.Why, "risk is high")
	}
	if !skipped {
		t.Errorf("notes-bot's writes are not reported as skipped for their risk: %+v", got.Skipped)
	}
}

// apiJSON sends a JSON request with the session's anti-forgery token.
func (s *session) apiJSON(method, path, body string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", s.csrf)
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// agentSubmit submits a call with an agent token through the console's
// agent API and returns it as the policy sees it.
func (w *learnWorld) agentSubmit(token, agent, server, tool string, args map[string]any) *airlockv1.ToolCall {
	w.t.Helper()
	body, _ := json.Marshal(map[string]any{"server": server, "tool": tool, "arguments": args})
	req, _ := http.NewRequest(http.MethodPost, w.base+"/api/v1/calls", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		CallID string `json:"call_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted {
		w.t.Fatalf("submit as %s: %d %v", agent, resp.StatusCode, err)
	}
	return &airlockv1.ToolCall{AgentId: agent, CallId: out.CallID, Revision: 1}
}

// A group of one requester's calls under a rule that lets requesters
// confirm their own is evidence about that person's calls only: when a
// reviewer approved some of them too, the suggestion is still that
// requester's to adopt (a grant they make allows only calls made for
// them), never an admin's grant that would allow the same agent's calls
// made for anyone else without that person confirming them.
func TestASelfConfirmedGroupNeverBecomesAGrantForOtherRequesters(t *testing.T) {
	w := newLearnWorld(t)
	root := w.signIn("root")
	if status, body := root.apiJSON(http.MethodPost, "/api/v1/rules", `{"id":"own-notes","priority":1,"server":"notes","tool":"append_note","effect":"ask","risk":"medium","approvers":["requester","group:reviewers"],"reason":"the requester confirms"}`); status != http.StatusOK {
		t.Fatalf("put the rule: %d %s", status, body)
	}
	token := func(person string) string {
		status, body := root.apiJSON(http.MethodPost, "/api/v1/tokens", `{"name":"team-`+person+`","kind":"agent","agent_id":"team-bot","on_behalf_of":"`+person+`"}`)
		var out struct {
			Token string `json:"token"`
		}
		if status != http.StatusCreated || json.Unmarshal([]byte(body), &out) != nil || out.Token == "" {
			t.Fatalf("agent token for %s: %d %s", person, status, body)
		}
		return out.Token
	}
	alice, carol := token("alice"), token("carol")
	testenv.Eventually(t, 10*time.Second, "the rule in force", func() bool {
		c := w.submit("probe-bot", "notes", "append_note", map[string]any{"book": "probe"})
		ev := testenv.WaitForEvent(t, w.deps.JS, "airlock.evt.probe-bot."+c.CallId+".>", subject.ApprovalRequested, 10*time.Second)
		return ev.GetApprovalRequested().GetDecision().GetRuleId() == "own-notes"
	})
	args := map[string]any{"book": "standup"}
	for i := range 6 {
		c := w.agentSubmit(alice, "team-bot", "notes", "append_note", args)
		if got := w.decisionOf(c); got != subject.ApprovalRequested {
			t.Fatalf("call %d: %s, want asked", i, got)
		}
		by := []string{"alice", "bob"}[i%2] // alice confirms her own, bob reviews
		req := &airlockv1.DecideRequest{AgentId: c.AgentId, CallId: c.CallId, Kind: approve,
			Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: by, Channel: "console"}}
		testenv.Eventually(t, 10*time.Second, "call "+c.CallId+" approved by "+by, func() bool {
			resp, err := w.api.Decide(context.Background(), req)
			return err == nil && resp.GetChanged()
		})
	}
	var s suggest.Suggestion
	for _, x := range w.report().Suggestions {
		if x.Agent == "team-bot" {
			s = x
		}
	}
	if s.ID == "" {
		t.Fatalf("no suggestion for team-bot's confirmed notes: %+v", w.report().Skipped)
	}
	status, body := root.post("/suggestions/"+s.ID+"/adopt", url.Values{})
	if status == http.StatusSeeOther {
		t.Errorf("an admin adopted the suggestion drawn from alice's own calls (requester %q)", s.Requester)
	}
	if got := w.decisionOf(w.agentSubmit(carol, "team-bot", "notes", "append_note", args)); got != subject.ApprovalRequested {
		t.Errorf("team-bot's call for carol: %s, want carol asked to confirm it (adopt answered %d %s)", got, status, body)
	}
}

// The Suggestions page replays the whole trail, so it is computed once per
// state of the trail and the rules: page loads at once share one replay,
// a page load in the same state replays nothing, and a new decision or
// rule change makes the next one replay. Adopt proves against the state it
// finds: a rejection recorded after the page was computed stops it.
func TestTheSuggestionsPageReplaysTheTrailOncePerStateOfTheTrailAndTheRules(t *testing.T) {
	w := newLearnWorld(t)
	notes := historyKind{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/notes/%d.md", r.IntN(50)), "content": fmt.Sprintf("note %d", r.IntN(1000))}
	}, verdict: always(approve)}
	w.record([]historyKind{notes}, 8)
	admin := w.signIn("root")
	lastSeq := func() uint64 {
		st, err := w.deps.JS.Stream(context.Background(), w.cfg.Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	load := func() string {
		t.Helper()
		status, page := admin.get("/suggestions")
		if status != http.StatusOK {
			t.Fatalf("suggestions page: %d\n%s", status, page)
		}
		return page
	}

	// Eight reviewers load the page at once. (Should anything be recorded
	// meanwhile, the state changed: record a call and try again.)
	const loads = 8
	testenv.Eventually(t, 60*time.Second, "a burst of page loads in one state of the trail", func() bool {
		w.record([]historyKind{notes}, 1) // a state no load has seen
		head, before := lastSeq(), w.replays.Load()
		var wg sync.WaitGroup
		failed := make(chan string, loads)
		for range loads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := admin.c.Get(w.base + "/suggestions")
				if err != nil {
					failed <- err.Error()
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed <- resp.Status
				}
			}()
		}
		wg.Wait()
		close(failed)
		for f := range failed {
			t.Fatalf("a page load failed: %s", f)
		}
		if lastSeq() != head {
			return false
		}
		if n := w.replays.Load() - before; n != 1 {
			t.Fatalf("%d page loads at once replayed the trail %d times, want once", loads, n)
		}
		return true
	})
	before := w.replays.Load()
	load()
	if n := w.replays.Load() - before; n != 0 {
		t.Fatalf("loading the page again in the same state replayed the trail %d times", n)
	}

	// A new decision: replayed again.
	w.record([]historyKind{notes}, 1)
	before = w.replays.Load()
	load()
	if n := w.replays.Load() - before; n != 1 {
		t.Fatalf("the page load after a new decision replayed %d times, want once", n)
	}

	// Adopt after a rejection recorded since the page was computed: the
	// proof is made again, and the suggestion is no longer proposed.
	page := load()
	m := regexp.MustCompile(`/suggestions/([^/"]+)/adopt`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page proposes nothing to adopt:\n%s", page)
	}
	w.record([]historyKind{{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(*rand.Rand) map[string]any {
		return map[string]any{"path": "/srv/notes/truncate-me.md"}
	}, verdict: always(reject)}}, 1)
	before = w.replays.Load()
	status, body := admin.post("/suggestions/"+m[1]+"/adopt", url.Values{})
	if status == http.StatusSeeOther || !strings.Contains(body, "no longer proposed") {
		t.Fatalf("adopting after a rejection the grant would allow: %d\n%s", status, body)
	}
	if n := w.replays.Load() - before; n != 1 {
		t.Fatalf("adopt replayed %d times after the trail changed, want once", n)
	}

	// A rule change: replayed again once the rule is in force.
	fk, err := w.deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	rules := policyapi.New(w.deps.NC, fk, "console")
	before = w.replays.Load()
	if _, err := rules.PutRule(context.Background(), &airlockv1.PolicyRule{Id: "notes-ask", Priority: 5, Agent: "notes-bot", Pattern: "fs__write_file", Effect: "ask", Reason: "notes are read by people"},
		&airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "root", Channel: "cli"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the page to be computed again after a rule change", func() bool {
		load()
		return w.replays.Load() > before
	})
}

// While agents' traffic changes the trail, every reload finds a new state;
// the Suggestions page still runs one replay at a time (each replays the
// whole trail): a load in a new state waits for the running computation,
// then computes its own.
func TestTheSuggestionsPageComputesOneReportAtATime(t *testing.T) {
	w := newLearnWorld(t)
	notes := historyKind{weight: 1, agent: "notes-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/notes/%d.md", r.IntN(50)), "content": "note"}
	}, verdict: always(approve)}
	w.record([]historyKind{notes}, 6)
	admin := w.signIn("root")
	hold := make(chan struct{})
	w.hold.Store(&hold)
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	loaded := make(chan string, 2)
	loadInBackground := func() {
		go func() {
			resp, err := admin.c.Get(w.base + "/suggestions")
			if err != nil {
				loaded <- err.Error()
				return
			}
			_ = resp.Body.Close()
			loaded <- resp.Status
		}()
	}
	loadInBackground()
	testenv.Eventually(t, 30*time.Second, "the first load's replay to start", func() bool { return w.replays.Load() == 1 })
	w.record([]historyKind{notes}, 1) // a new state of the trail
	loadInBackground()
	// The second load has chosen once it waits for the running replay or,
	// without the bound, starts its own.
	testenv.Eventually(t, 30*time.Second, "the second load to wait for the running replay or start its own", func() bool {
		return w.waits.Load() == 1 || w.replays.Load() > 1
	})
	if n := w.replays.Load(); n != 1 {
		t.Fatalf("a load in a new state started a replay while another ran (%d replays started)", n)
	}
	release()
	for range 2 {
		if status := <-loaded; status != "200 OK" {
			t.Fatalf("suggestions page: %s", status)
		}
	}
	if n, most := w.replays.Load(), w.mostAtOnce.Load(); n != 2 || most != 1 {
		t.Fatalf("%d replays, %d at once; want 2, one at a time", n, most)
	}
}
