package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Review of 2026-11-28: five ordinary approved writes became a standing
// grant for the whole home directory. Agent alice wrote
// /home/alice/proj/{a,b,d}.txt, /home/alice/proj/src/c.go and
// /home/alice/notes.txt, each approved; `airlock policy suggest` proposed
// "/file_path matches /home/alice/**" (the approved paths' common
// directory), its replay found no refused call, and once adopted the grant
// allowed writes to ~/.ssh/authorized_keys, ~/.bashrc and the project's git
// hooks. What must hold (SPEC §10: never wider than what was approved): the
// proposal widens only to a directory that itself holds several approved
// paths, and there only to files directly in it whose name does not start
// with "."; every other approved path stays exact. Adopted, it still spares
// the useful asks (a new file in /home/alice/proj).
//
// Review of 2026-11-28, later: the narrowed grant, made for medium-risk
// writes (rule coding-edit rates every edit medium), still answered a write
// of /home/alice/proj/deploy.pem, credentials.json, id_rsa, secrets.yaml or
// prod.key: nobody approved writing anything like a key or credential file.
// A write whose path names a secret is rated high (rule
// coding-edit-secrets), which a medium grant never answers; what a write
// puts in a file does not count (code mentioning a password stays
// answered).
func TestALearnedGrantReachesNoPathNobodyApprovedAnythingLike(t *testing.T) {
	t.Parallel() // it mostly waits for decisions and the suggestions they teach
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_POLICY_SUGGEST_MIN_APPROVERS=1")
	dev.Agent(t, "alice")
	admin := adminToken(t, dev)
	alice := agentToken(t, dev, admin, "alice")

	n := 0
	// writeContent submits claude__Write of content to path as alice (her
	// agent runs the tool) and returns its call id and what became of it:
	// "asked" once a person is asked, else the call's status.
	writeContent := func(path, content string) (string, string) {
		t.Helper()
		n++
		id := fmt.Sprintf("w%d", n)
		args, err := json.Marshal(map[string]string{"file_path": path, "content": content})
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"call_id":%q,"tool":"claude__Write","arguments":%s,"agent_runs":true}`, id, args)
		if status, out := apiPost(t, dev.HTTPURL+"/api/v1/calls", alice, body); status != http.StatusAccepted {
			t.Fatalf("submit %s: %d %s", path, status, out)
		}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			status, out := bearerGet(t, dev.HTTPURL+"/api/v1/calls/"+id+"?wait=250ms", alice)
			var got struct {
				Status     string `json:"status"`
				WaitingFor string `json:"waiting_for"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(out), &got) != nil {
				t.Fatalf("await %s: %d %s", id, status, out)
			}
			if got.WaitingFor == "a person" {
				return id, "asked"
			}
			if got.Status != "" && got.Status != "pending" {
				return id, got.Status
			}
		}
		t.Fatalf("call %s (%s) was neither decided nor asked about within 20s", id, path)
		return "", ""
	}
	write := func(path string) (string, string) { return writeContent(path, fmt.Sprintf("line %d\n", n+1)) }

	for _, p := range []string{"/home/alice/proj/a.txt", "/home/alice/proj/b.txt", "/home/alice/proj/src/c.go", "/home/alice/notes.txt", "/home/alice/proj/d.txt"} {
		id, got := write(p)
		if got != "asked" {
			t.Fatalf("setup: writing %s was %s, want a person asked (rule coding-edit)", p, got)
		}
		if status, out := apiPost(t, dev.HTTPURL+"/api/v1/approvals/alice/"+id+"/approve", admin, `{"revision":1}`); status != http.StatusOK {
			t.Fatalf("approve %s: %d %s", id, status, out)
		}
	}

	// The suggestion, as `airlock policy suggest` reports it.
	var rep struct {
		Suggestions []struct {
			ID     string `json:"id"`
			Agent  string `json:"agent_id"`
			Server string `json:"server"`
			Tool   string `json:"tool"`
			Scope  string `json:"scope"`
			Grant  struct {
				ArgumentGlobs map[string]string `json:"argumentGlobs"`
			} `json:"grant"`
			Proof struct {
				Probes int `json:"probes"`
			} `json:"proof"`
		} `json:"suggestions"`
	}
	var scope, id, glob string
	// The trail reaches the suggester a little after the approvals.
	found := func() bool {
		r := cli(t, dev, "policy", "suggest", "--min-approvers", "1", "--json")
		if r.Code != 0 {
			t.Fatalf("airlock policy suggest: %+v", r)
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("airlock policy suggest --json printed no JSON: %v\n%s", err, r.Stdout)
		}
		for _, s := range rep.Suggestions {
			if s.Agent == "alice" && s.Server == "claude" && s.Tool == "Write" {
				scope, id, glob = s.Scope, s.ID, s.Grant.ArgumentGlobs["/file_path"]
				if s.Proof.Probes == 0 {
					t.Errorf("suggestion %s was proven against no probe path", s.ID)
				}
				return true
			}
		}
		return false
	}
	testenv.Eventually(t, 20*time.Second, "a suggestion for alice's approved writes", found)
	if want := "{/home/alice/notes.txt,/home/alice/proj/[!./]*,/home/alice/proj/src/c.go}"; glob != want {
		t.Errorf("the suggestion's /file_path glob is %q, want %q (scope: %s)", glob, want, scope)
	}

	// Adopted on the console, as an admin adopts it.
	req, _ := http.NewRequest(http.MethodPost, dev.HTTPURL+"/suggestions/"+id+"/adopt", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	noRedirect := *http.DefaultClient
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("adopt suggestion %s: status %d, want 303", id, resp.StatusCode)
	}

	// The grant is in force once a new file in the project is allowed.
	testenv.Eventually(t, 20*time.Second, "a new file in /home/alice/proj allowed under the adopted grant", func() bool {
		_, got := write("/home/alice/proj/new.txt")
		return got == "allowed" || got == "completed"
	})
	for _, p := range []string{
		"/home/alice/.ssh/authorized_keys",
		"/home/alice/.bashrc",
		"/home/alice/proj/.git/hooks/pre-commit",
		"/home/alice/proj/.env",
		"/home/alice/proj/.bashrc",
		"/home/alice/other.txt",                  // beside notes.txt: its directory holds one approved path
		"/home/alice/proj/src/other.go",          // beside c.go, likewise
		"/home/alice/proj/lib/new.go",            // below the widened directory
		"/home/alice/elsewhere/proj/a.txt",       // elsewhere in the common directory
		"/home/bob/proj/a.txt",                   // another home
		"/home/alice/proj//.ssh/authorized_keys", // an empty segment before a hidden one
		// Files directly in the widened directory whose names say key,
		// credential or secret (rated high: coding-edit-secrets).
		"/home/alice/proj/deploy.pem",
		"/home/alice/proj/credentials.json",
		"/home/alice/proj/id_rsa",
		"/home/alice/proj/secrets.yaml",
		"/home/alice/proj/prod.key",
	} {
		if _, got := write(p); got != "asked" {
			t.Errorf("writing %s was %s under the adopted grant (%s), want a person asked", p, got, scope)
		}
	}
	// Only the path counts: an ordinary file whose code mentions a password,
	// a key file and .env is still answered by the grant.
	if _, got := writeContent("/home/alice/proj/config.go", "password := os.Getenv(\"DB_PASSWORD\") // never deploy.pem, id_rsa or .env\n"); got != "allowed" && got != "completed" {
		t.Errorf("writing /home/alice/proj/config.go with code that mentions a password was %s under the adopted grant (%s), want it allowed", got, scope)
	}
}
