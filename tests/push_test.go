package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/notify/pushtest"
)

// TestPushTellsTheReviewerWhoMayDecideAndDropsAGoneDevice: alice and bob
// (reviewers) each subscribe a device through the console; an agent's call
// made for alice asks. Bob's device receives a notification it can
// decrypt, signed with the VAPID key, naming the call's page; alice, who
// may not decide a call made for her, receives none. When bob's push
// service answers 410, his device is removed. In `airlock dev` and in the
// production layout, where the approval service (which sends) and the
// console (which takes subscriptions) are separate processes with their
// own NATS users. (A real browser subscription needs the vendor's push
// service, which a test cannot reach: pushtest checks and decrypts as one.)
func TestPushTellsTheReviewerWhoMayDecideAndDropsAGoneDevice(t *testing.T) {
	t.Run("in_airlock_dev", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "airlock.yaml")
		yaml := consoleUsersYAML(t) + "  webpush:\n    subject: mailto:ops@example.com\n    allow_loopback_http: true\n"
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
		if fi, err := os.Stat(filepath.Join(dev.DataDir, "webpush-vapid.key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("airlock dev made no private VAPID key file: %v", err)
		}
		pushScenario(t, dev.HTTPURL, dev.Agent(t, "bot"))
		dev.Interrupt(15 * time.Second)
	})
	t.Run("in_the_production_layout", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "vapid.key")
		if out, err := exec.Command(airlockBinary(t), "keys", "vapid", key).CombinedOutput(); err != nil {
			t.Fatalf("airlock keys vapid: %v\n%s", err, out)
		}
		t.Setenv("AIRLOCK_CONSOLE_WEBPUSH_VAPID_PRIVATE_KEY_FILE", key)
		t.Setenv("AIRLOCK_CONSOLE_WEBPUSH_ALLOW_LOOPBACK_HTTP", "true")
		p := startProdLayout(t, "bot")
		pushScenario(t, p.services[natsauth.RoleConsole].HTTP, connectAgent(t, p.nats.CredentialFile("bot"), p.nats.Server.URL()).client)
	})
}

func pushScenario(t *testing.T, base string, bot *airlock.Client) {
	alice, bob := signInWithToken(t, base, "alice"), signInWithToken(t, base, "bob")
	status, body := alice.api(http.MethodGet, "/api/v1/devices", "")
	var keys struct {
		PublicKey string `json:"public_key"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &keys) != nil || keys.PublicKey == "" {
		t.Fatalf("GET /api/v1/devices: %d %s", status, body)
	}
	push := pushtest.Start(t, keys.PublicKey)
	devices := map[*consoleSession]*pushtest.Device{alice: push.NewDevice("alice-phone"), bob: push.NewDevice("bob-phone")}
	for who, d := range devices {
		sub, _ := json.Marshal(d.Subscription())
		if status, body := who.api(http.MethodPost, "/api/v1/devices", string(sub)); status != http.StatusCreated {
			t.Fatalf("subscribe %s: %d %s", d.Name, status, body)
		}
	}

	id := mustSubmit(t, bot, airlock.Call{Tool: writeTool, OnBehalfOf: "alice", Reason: "tidy the notes",
		Args: map[string]any{"path": "notes.txt", "content": "the secret content"}})
	m := push.WaitFor(devices[bob], 20*time.Second, func(m pushtest.Message) bool { return m.Kind == "announce" })
	// The body is the policy's reason, never the agent's unlabelled.
	if !strings.HasSuffix(m.URL, "/calls/bot/"+id) || !strings.Contains(m.Title, "write_file") ||
		strings.Contains(m.Body, "tidy the notes") || !strings.HasSuffix(m.Body, " — agent bot") ||
		strings.Contains(string(m.Raw), "secret content") {
		t.Fatalf("bob's notification = %s", m.Raw)
	}
	// The push channel's `notified` event is recorded once every device was tried.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(eventsOf(t, bob, id), `"detail":"push`) {
		if time.Now().After(deadline) {
			t.Fatalf("no notified event of the push channel for %s:\n%s", id, eventsOf(t, bob, id))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := push.Received(devices[alice]); len(got) != 0 {
		t.Fatalf("alice, for whom the call is made, received %d notifications: %s", len(got), got[0].Raw)
	}

	push.Gone(devices[bob])
	mustSubmit(t, bot, airlock.Call{Tool: writeTool, OnBehalfOf: "alice", Args: map[string]any{"path": "b.txt", "content": "x"}})
	deadline = time.Now().Add(20 * time.Second)
	for {
		_, body := bob.api(http.MethodGet, "/api/v1/devices", "")
		if strings.Contains(body, `"devices":[]`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's device is still listed after its push service answered 410: %s (refused: %v)", body, push.Refused())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventsOf is a call's timeline through the REST API.
func eventsOf(t *testing.T, who *consoleSession, id string) string {
	t.Helper()
	_, body := who.api(http.MethodGet, "/api/v1/approvals/bot/"+id+"/events", "")
	return body
}
