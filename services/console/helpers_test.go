package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

const password = "correct horse battery staple"

// env is a console over a real embedded NATS with the fake approval service.
type env struct {
	t        *testing.T
	deps     svc.Deps
	approval *fakeApproval
	con      *console.Console
	srv      *httptest.Server
}

func hash(t *testing.T) string {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, func(*config.Config) {})
}

// newEnvWith is newEnv with the configuration, and then the console's
// dependencies, changed first.
func newEnvWith(t *testing.T, tweak func(*config.Config), depTweaks ...func(*svc.Deps)) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	h := hash(t)
	cfg.Console.Users = []config.User{
		{Name: "alice", PasswordHash: h, Roles: []string{config.RoleReviewer}, Groups: []string{"reviewers"}},
		{Name: "bob", PasswordHash: h, Roles: []string{config.RoleReviewer}, Groups: []string{"reviewers"}},
		{Name: "audrey", PasswordHash: h, Roles: []string{config.RoleAuditor}},
		{Name: "root", PasswordHash: h, Roles: []string{config.RoleAdmin}, Groups: []string{"reviewers"}},
	}
	tweak(&cfg)
	deps := testenv.Deps(t, cfg)
	for _, f := range depTweaks {
		f(&deps)
	}
	e := &env{t: t, deps: deps, approval: startFakeApproval(t, deps)}
	e.con, e.srv = e.startConsole()
	return e
}

// startConsole starts one console replica with its own HTTP server.
func (e *env) startConsole() (*console.Console, *httptest.Server) {
	e.t.Helper()
	return e.startConsoleWith(console.Options{HealthWait: 200 * time.Millisecond})
}

// startConsoleWith starts one console replica with opts.
func (e *env) startConsoleWith(opts console.Options) (*console.Console, *httptest.Server) {
	e.t.Helper()
	con, err := console.New(context.Background(), e.deps, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	feeds := e.feedConsumers()
	testenv.RunService(e.t, con)
	// The live inbox follows the events stream from "now", from a consumer
	// Run creates: a test that publishes a call before that would never
	// see it arrive. Wait for the consumer to exist on the server.
	testenv.Eventually(e.t, 30*time.Second, "the console's live feed to follow the events stream", func() bool {
		return e.feedConsumers() > feeds
	})
	ec := echo.New()
	con.Register(ec)
	srv := httptest.NewServer(ec)
	e.t.Cleanup(srv.Close)
	return con, srv
}

// apiClient is the tests' client of the REST API: a request the console
// never answers fails its test within a minute, naming it, instead of
// holding the package until go test's timeout.
var apiClient = &http.Client{Timeout: time.Minute}

// browser is an HTTP client with a cookie jar that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, base: e.srv.URL, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	Status int
	Body   string
	Header http.Header
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{Status: resp.StatusCode, Body: string(body), Header: resp.Header}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// csrf reads the anti-forgery token from a page's forms.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	p := b.get(path)
	m := csrfRE.FindStringSubmatch(p.Body)
	if m == nil {
		b.t.Fatalf("no _csrf field on %s (status %d):\n%s", path, p.Status, p.Body)
	}
	return m[1]
}

// signIn opens the sign-in page and signs in as user.
func (b *browser) signIn(user string) {
	b.t.Helper()
	tok := b.csrf("/login")
	p := b.post("/login", url.Values{"_csrf": {tok}, "user": {user}, "password": {password}, "next": {"/"}})
	if p.Status != http.StatusSeeOther {
		b.t.Fatalf("sign in as %s: status %d\n%s", user, p.Status, p.Body)
	}
}

// submit posts a console form with the page's anti-forgery token.
func (b *browser) submit(path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", b.csrf("/"))
	return b.post(path, form)
}

// apiCall sends a JSON request with a bearer token (or none).
func apiCall(t *testing.T, base, token, method, path, body string) page {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, base+path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return page{Status: resp.StatusCode, Body: string(out), Header: resp.Header}
}

// pending makes an approval record waiting for a decision.
func pending(id, agent, tool string, args map[string]any, risk airlockv1.Risk) *airlockv1.ApprovalRecord {
	s, err := structpb.NewStruct(args)
	if err != nil {
		panic(err)
	}
	srv, name, _ := strings.Cut(tool, "__")
	digest, _ := canon.Digest(s) // "" for a value JSON cannot hold, as the policy would refuse it
	return &airlockv1.ApprovalRecord{
		ArgumentsDigest: digest,
		Call: &airlockv1.ToolCall{CallId: id, AgentId: agent, Server: srv, Tool: name, Arguments: s, Revision: 1,
			Reason: "the user asked me to", ThreadId: "thread-1", CreatedAt: timestamppb.Now()},
		Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "writes need a person", RuleId: "ask-writes", Risk: risk, PolicyRevision: "rev-7",
			Approvers: []string{"group:reviewers"}},
		State:    airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		Deadline: timestamppb.New(time.Now().Add(5 * time.Minute)), CreatedAt: timestamppb.Now(),
	}
}

// feedConsumers counts the consumers on the events stream that follow what
// the console's live feed does (approval_requested and the outcomes).
func (e *env) feedConsumers() int {
	e.t.Helper()
	want := []string{subject.OfType(subject.ApprovalRequested)}
	for _, t := range subject.ApprovalOutcomes {
		want = append(want, subject.OfType(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := e.deps.JS.Stream(ctx, e.deps.Config.Stream.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	list := stream.ListConsumers(ctx)
	for info := range list.Info() {
		if slices.Equal(info.Config.FilterSubjects, want) {
			n++
		}
	}
	if err := list.Err(); err != nil {
		e.t.Fatal(err)
	}
	return n
}
