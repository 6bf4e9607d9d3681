package tests

// Attacks by an untrusted local process on the machine where a developer runs
// `airlock dev` (SPEC §6: "a local process in airlock dev is untrusted"):
// another Unix user, or a coding agent the hooks gate, running as the
// developer. Each goes through what such a process really has: loopback
// ports anyone may bind or serve, and what the developer's own tools send
// there. Every one of them works on the code they were written against.

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// `airlock dev` writes console.url (and nats.url, clickhouse.dsn) while it
// runs and removes them on a clean stop, and `airlock approvals` sends the
// data dir's admin token to the address console.url names. A dev that ends
// any other way — its terminal closed (SIGHUP, which it once did not handle), a
// second Ctrl-C ("forced exit"), SIGKILL, the OOM killer — leaves the file
// behind. Any local user who then listens on the console's address (a
// loopback port anyone may bind once dev is gone) receives the admin token
// from the developer's next `airlock approvals list`: an API token that
// never expires and acts as the admin on the next dev started on that data
// dir (approve anything, add an allow rule, make grants).
//
// What must hold: the CLI sends the token only to a running dev's console.
func TestAStoppedDevsConsoleAddressGetsNoAdminToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"its_terminal_closed", syscall.SIGHUP},
		{"it_was_killed", syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			dev := startDev(t, dataDir, 0, "")
			if err := syscall.Kill(dev.Pid(), tc.sig); err != nil {
				t.Fatal(err)
			}
			// Another user takes the console's address as soon as it is free.
			var ln net.Listener
			testenv.Eventually(t, 30*time.Second, "the stopped dev's console address to be free", func() bool {
				var err error
				ln, err = net.Listen("tcp", dev.httpAddr)
				return err == nil
			})
			var mu sync.Mutex
			var seen []string
			squatter := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Get("Authorization"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"records":[]}`)
			})}
			go func() { _ = squatter.Serve(ln) }()
			defer squatter.Close()

			if _, err := os.Stat(filepath.Join(dataDir, "console.url")); err == nil {
				t.Logf("console.url outlived the dev that wrote it")
			}
			// The developer, later, in the project directory.
			r := cliIn(t, "", append(os.Environ(), "AIRLOCK_DEV_DATA_DIR="+dataDir, "AIRLOCK_API="), "approvals", "list")
			token, _ := os.ReadFile(filepath.Join(dataDir, "admin.token"))
			mu.Lock()
			defer mu.Unlock()
			for _, h := range seen {
				if h != "" && strings.Contains(h, strings.TrimSpace(string(token))) {
					t.Errorf("`airlock approvals list` sent the admin token to the process now listening on %s, where the stopped dev's console was (exit %d: %s%s)",
						dev.httpAddr, r.Code, r.Stdout, r.Stderr)
				}
			}
		})
	}
}

// `airlock dev --clickhouse-local` reuses the ClickHouse port it remembers
// (<data>/clickhouse/port, checked free just before) and then polls it with a
// native-protocol Hello that carries the writer's password in clear text,
// from the moment clickhouse-server is started — before that server can
// listen. Another local user who knows the port (it listened there last
// time: /proc/net/tcp lists every socket with its uid) watches for the
// clickhouse-server process (/proc/*/cmdline) and binds the port first; the
// probe hands it the password of the user that writes, alters and drops the
// audit trail.
//
// What must hold: no ClickHouse password is sent to a port before airlock
// knows that the server it started is the one listening there.
func TestTheLocalClickHousesStartSendsNoPasswordToWhoeverListensFirst(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, "clickhouse:\n  start_local: true\n")
	dataDir := t.TempDir()
	first := startDev(t, dataDir, 0, "", "AIRLOCK_CONFIG="+cfg)
	first.Interrupt(60 * time.Second)
	raw, err := os.ReadFile(filepath.Join(dataDir, "clickhouse", "port"))
	if err != nil {
		t.Fatalf("dev remembered no ClickHouse port: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	config := "--config-file=" + filepath.Join(dataDir, "clickhouse", "config.xml")

	// The other user: wait for clickhouse-server with this config, then bind its port.
	bound, squatter := testenv.SquatOnStart(t, []byte(config), []byte(airlockBinary(t)), port, 5*time.Second)

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	testenv.LaunchAirlock(t, addr, []string{"AIRLOCK_CONFIG=" + cfg}, "dev", "--data", dataDir, "--nats-port", strconv.Itoa(freePort(t)), "--http", addr)
	select {
	case <-bound:
	case <-time.After(90 * time.Second):
		t.Fatalf("the squatter never saw clickhouse-server start with %s", config)
	}
	time.Sleep(3 * time.Second) // the probe polls every 50 ms: give it time to say what it says
	received := squatter.Received()
	for _, user := range []string{"airlock", "auditor"} {
		b, _ := os.ReadFile(filepath.Join(dataDir, "clickhouse", user+".password"))
		if pw := strings.TrimSpace(string(b)); pw != "" && strings.Contains(received, pw) {
			t.Errorf("the process that bound the remembered ClickHouse port %d before clickhouse-server received the %s password (%d bytes received)", port, user, len(received))
		}
	}
}

// The console's inbox follows the live feed with an EventSource, which a
// browser reconnects by itself, cookies attached, for as long as the tab is
// open. When `airlock dev` stops — cleanly, Ctrl-C — the port it served is
// anyone's: another local user who binds it receives the developer's session
// cookie from the open tab within seconds. Sessions live in the console
// bucket (12 h idle), so the cookie still signs in on the next dev started on
// that data dir, on whatever port.
//
// What must hold: a cookie that reached another process while dev was down
// decides nothing on the dev started next.
func TestASessionCookieAnOpenTabSendsWhileDevIsDownDecidesNothingAfterwards(t *testing.T) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, 0, "")
	user, password := adminLogin(t, dev)
	browser := signInAt(t, dev.HTTPURL, user, password)
	dev.Interrupt(60 * time.Second) // a clean stop

	ln, err := net.Listen("tcp", dev.httpAddr)
	if err != nil {
		t.Fatalf("the stopped console's address: %v", err)
	}
	captured := make(chan *http.Cookie, 1)
	squatter := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ck, err := r.Cookie("airlock_session"); err == nil {
			select {
			case captured <- ck:
			default:
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
	})}
	go func() { _ = squatter.Serve(ln) }()
	// The open inbox tab reconnects its live feed.
	if resp, err := browser.web.Get(dev.HTTPURL + "/inbox/events"); err == nil {
		resp.Body.Close()
	}
	var ck *http.Cookie
	select {
	case ck = <-captured:
	case <-time.After(10 * time.Second):
		t.Fatal("the tab's reconnect sent no session cookie to the process on the console's address")
	}
	squatter.Close()

	// The developer starts dev again (here on other ports); a call waits.
	again := startDev(t, dataDir, 0, "")
	bot := again.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := bot.Submit(ctx, airlock.Call{ID: "tab-1", Tool: "demo__write_file", Args: map[string]any{"path": "owned.txt", "content": "x"}}); err != nil {
		t.Fatal(err)
	}
	token := adminToken(t, again)
	waitPending(t, again, token, "tab-1")

	with := func(req *http.Request) (int, string) {
		req.AddCookie(ck)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	page, _ := http.NewRequest(http.MethodGet, again.HTTPURL+"/calls/bot/tab-1", nil)
	_, body := with(page)
	if m := csrfRE.FindStringSubmatch(body); m != nil {
		approve, _ := http.NewRequest(http.MethodPost, again.HTTPURL+"/api/v1/approvals/bot/tab-1/approve", strings.NewReader(`{"revision":1}`))
		approve.Header.Set("Content-Type", "application/json")
		approve.Header.Set("X-CSRF-Token", html.UnescapeString(m[1]))
		if status, out := with(approve); status == http.StatusOK {
			t.Errorf("the cookie another process collected while dev was down approved tab-1 on the next dev: %.160s", out)
		}
	}
	for _, id := range pendingIDs(t, again, token) {
		if id == "tab-1" {
			return
		}
	}
	t.Errorf("tab-1 is no longer pending")
}
