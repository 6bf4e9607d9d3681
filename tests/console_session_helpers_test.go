package tests

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// consoleUsers can sign in to the production layout's console (each with
// consolePassword(name)): reviewers alice and bob, and root, an admin.
var consoleUsers = []struct{ name, role string }{{"alice", "reviewer"}, {"bob", "reviewer"}, {"root", "admin"}}

func consolePassword(name string) string { return "the password of " + name + " in tests" }

var (
	hashesOnce sync.Once
	hashes     map[string]string
)

// consoleUsersYAML is the console.users of the production layout's
// configuration, hashed by `airlock users hash-password` (once per run).
func consoleUsersYAML(t *testing.T) string {
	t.Helper()
	hashesOnce.Do(func() {
		hashes = map[string]string{}
		for _, u := range consoleUsers {
			cmd := exec.Command(airlockBinary(t), "users", "hash-password")
			cmd.Stdin = strings.NewReader(consolePassword(u.name) + "\n")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("airlock users hash-password: %v", err)
			}
			hashes[u.name] = strings.TrimSpace(string(out))
		}
	})
	var b strings.Builder
	b.WriteString("console:\n  users:\n")
	for _, u := range consoleUsers {
		if hashes[u.name] == "" {
			t.Fatal("no password hash for " + u.name)
		}
		fmt.Fprintf(&b, "    - {name: %s, password_hash: %q, roles: [%s], groups: [reviewers]}\n", u.name, hashes[u.name], u.role)
	}
	return b.String()
}

// consoleSession is a person signed in to the console: pages with the session
// cookie, and the REST API with a personal token they created there.
type consoleSession struct {
	t     *testing.T
	base  string
	web   *http.Client // the session; redirects are not followed
	token string
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signIn signs name in through the sign-in form and creates a personal
// API token through the REST API with that session.
func (p *prodLayout) signIn(t *testing.T, name string) *consoleSession {
	t.Helper()
	return signInAt(t, p.services[natsauth.RoleConsole].HTTP, name)
}

// signInAt is signIn on the console at base (one of consoleUsers).
func signInAt(t *testing.T, base, name string) *consoleSession {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	r := &consoleSession{t: t, base: base,
		web: &http.Client{Jar: jar, Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, form := r.page("/login")
	m := csrfRE.FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("no sign-in form:\n%s", form)
	}
	status, body := r.post("/login", url.Values{"_csrf": {m[1]}, "user": {name}, "password": {consolePassword(name)}, "next": {"/"}})
	if status != http.StatusSeeOther {
		t.Fatalf("%s could not sign in: %d\n%s", name, status, body)
	}
	_, inbox := r.page("/")
	if m = csrfRE.FindStringSubmatch(inbox); m == nil {
		t.Fatalf("the inbox has no form token:\n%s", inbox)
	}
	req, _ := http.NewRequest(http.MethodPost, r.base+"/api/v1/tokens", strings.NewReader(`{"name":"tests"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", html.UnescapeString(m[1]))
	status, body = r.do(r.web, req)
	tok := regexp.MustCompile(`"token":"([^"]+)"`).FindStringSubmatch(body)
	if status != http.StatusCreated || tok == nil {
		t.Fatalf("%s could not create an API token: %d %s", name, status, body)
	}
	r.token = tok[1]
	return r
}

func (r *consoleSession) do(c *http.Client, req *http.Request) (int, string) {
	r.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// page gets a console page with the session.
func (r *consoleSession) page(path string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.base+path, nil)
	return r.do(r.web, req)
}

// post submits a console form with the session.
func (r *consoleSession) post(path string, form url.Values) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r.do(r.web, req)
}

// api calls the REST API with the reviewer's token.
func (r *consoleSession) api(method, path, body string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.base+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+r.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return r.do(&http.Client{Timeout: 60 * time.Second}, req)
}
