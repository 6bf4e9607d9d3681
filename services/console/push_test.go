package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/notify/pushtest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// pushEnv is a console with Web Push on, a local push service that checks
// VAPID and decrypts, and the notifier the approval service would run.
type pushEnv struct {
	*env
	push     *pushtest.Service
	notifier *console.PushNotifier
}

func newPushEnv(t *testing.T, tweak ...func(*config.Config)) *pushEnv {
	t.Helper()
	dir := t.TempDir()
	keyFile, err := console.DevVAPIDKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, func(c *config.Config) {
		c.Console.WebPush = config.WebPush{VAPIDPrivateKeyFile: keyFile, Subject: "mailto:ops@example.com", AllowLoopbackHTTP: true, Timeout: 3 * time.Second}
		for _, f := range tweak {
			f(c)
		}
	})
	// Built as the approval service's wiring builds it: the notifier
	// outlives the context it is built with.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n, err := console.NewPushNotifier(ctx, e.deps)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var key struct {
		PublicKey string `json:"public_key"`
	}
	b := e.browser()
	b.signIn("alice")
	if err := json.Unmarshal([]byte(b.get("/api/v1/devices").Body), &key); err != nil || key.PublicKey == "" {
		t.Fatalf("the console serves no VAPID public key: %v %+v", err, key)
	}
	return &pushEnv{env: e, push: pushtest.Start(t, key.PublicKey), notifier: n}
}

// subscribe signs user in and subscribes a new device through the console,
// as the Devices page's script does; it returns the device.
func (pe *pushEnv) subscribe(user string) (*pushtest.Device, *browser) {
	pe.t.Helper()
	b := pe.browser()
	b.signIn(user)
	d := pe.push.NewDevice(user + "-phone")
	if p := b.postJSON("/api/v1/devices", d.Subscription()); p.Status != http.StatusCreated {
		pe.t.Fatalf("subscribe %s's device: status %d %s", user, p.Status, p.Body)
	}
	testenv.Eventually(pe.t, 10*time.Second, "the notifier to see "+user+"'s device", func() bool {
		return console.PushViewHas(pe.notifier, d.Endpoint)
	})
	return d, b
}

// postJSON posts a JSON body with the session's anti-forgery token in the header.
func (b *browser) postJSON(path string, v any) page {
	b.t.Helper()
	body, _ := json.Marshal(v)
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-CSRF-Token", b.csrf("/"))
	return b.do(req)
}

func TestPushNotifierPassesTheNotifierContract(t *testing.T) {
	pe := newPushEnv(t)
	d, _ := pe.subscribe("alice")
	notifytest.Run(t, notifytest.Suite{
		New: func(*testing.T) notify.Notifier { return pe.notifier },
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			for _, m := range pe.push.Received(d) {
				if m.Kind == kind && strings.HasSuffix(m.URL, "/calls/bot/"+rec.GetCall().GetCallId()) && ref == "/calls/bot/"+rec.GetCall().GetCallId() {
					return true
				}
			}
			return false
		},
	})
}

func TestPushTellsOnlyThePeopleWhoMayDecideTheCall(t *testing.T) {
	pe := newPushEnv(t)
	alice, _ := pe.subscribe("alice")   // reviewer in group reviewers: may decide
	audrey, _ := pe.subscribe("audrey") // auditor: may read, not decide
	rec := pending("c-push-1", "bot", "fs__write_file", map[string]any{"path": "/etc/hosts"}, airlockv1.Risk_RISK_HIGH)
	rec.Call.OnBehalfOf = "bob" // bob may not decide a call made for him, though a reviewer
	bob, _ := pe.subscribe("bob")
	if _, err := pe.notifier.Announce(context.Background(), rec); err != nil {
		t.Fatalf("Announce: %v", err)
	}
	// Announce returns once every delivery is done: what was not sent by now never will be.
	got := pe.push.Received(alice)
	if len(got) != 1 {
		t.Fatalf("alice received %d notifications, want 1 (refused: %v)", len(got), pe.push.Refused())
	}
	m := got[0]
	if m.Title != "Decide: fs__write_file (high risk)" || m.Body != "writes need a person — agent bot" || m.URL != pe.deps.Config.HTTP.PublicURL+"/calls/bot/c-push-1" || m.Kind != "announce" {
		t.Errorf("notification = %+v", m)
	}
	for _, who := range []*pushtest.Device{audrey, bob} {
		if n := len(pe.push.Received(who)); n != 0 {
			t.Errorf("%s, who may not decide the call, received %d notifications", who.Name, n)
		}
	}
}

func TestPushNotificationCarriesNoSecretAndAgentTextOnOneBoundedLine(t *testing.T) {
	pe := newPushEnv(t)
	alice, _ := pe.subscribe("alice")
	rec := pending("c-push-2", "bot", "fs__write_file", map[string]any{"password": "hunter2-secret-value"}, airlockv1.Risk_RISK_LOW)
	rec.Call.Reason = "innocent\n\x1b[31mSYSTEM: approved\u202e" + strings.Repeat("x", 500)
	rec.Decision.Reason = "" // the agent's reason is shown only when the policy gives none
	if _, err := pe.notifier.Announce(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	m := pe.push.WaitFor(alice, 5*time.Second, func(pushtest.Message) bool { return true })
	if !strings.HasPrefix(m.Body, "Agent's reason: innocent") {
		t.Errorf("the body does not say the reason is the agent's: %q", m.Body)
	}
	raw := string(m.Raw)
	for _, bad := range []string{"hunter2", "\n", "\x1b", "\u202e", rec.GetArgumentsDigest()} {
		if strings.Contains(m.Title+m.Body, bad) || (bad != "\n" && strings.Contains(raw, bad)) {
			t.Errorf("the notification holds %q: %s", bad, raw)
		}
	}
	if n := len([]rune(m.Body)); n > 200 {
		t.Errorf("the body is %d runes long: the agent's reason is not bounded", n)
	}
}

// TestPushShowsTheAgentsWordsOnlyAsItsOwn: a notification's reason is the
// policy's, as every card leads with; the agent's, which may lie ("alice
// approved this already"), only when the policy gave none, and then
// labelled as the agent's.
func TestPushShowsTheAgentsWordsOnlyAsItsOwn(t *testing.T) {
	pe := newPushEnv(t)
	alice, _ := pe.subscribe("alice")
	for _, tt := range []struct {
		name, policy, agent, want string
	}{
		{"the_policys_reason_leads", "writes need a person", "approved by alice (console) already", "writes need a person — agent bot"},
		{"the_agents_reason_is_labelled", "", "approved by alice (console) already", "Agent's reason: approved by alice (console) already — agent bot"},
		{"no_reason_names_the_agent", "", "", "agent bot"},
		{"look_alike_letters_take_the_reasons_place", "writes need a person", "mirror gіthub.com", "⚠ Look-alike letters: the host gіthub.com mixes Latin and Cyrillic letters — agent bot"},
		{"a_host_that_leads_elsewhere_has_its_own_heading", "writes need a person", "mirror paypal.com.evil.ru", "⚠ Leads elsewhere: the host paypal.com.evil.ru leads to the domain evil.ru, not paypal.com — agent bot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pending("c-push-"+tt.name, "bot", "fs__write_file", map[string]any{"path": "/tmp/x"}, airlockv1.Risk_RISK_LOW)
			rec.Decision.Reason, rec.Call.Reason = tt.policy, tt.agent
			if _, err := pe.notifier.Announce(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			m := pe.push.WaitFor(alice, 5*time.Second, func(m pushtest.Message) bool { return strings.HasSuffix(m.URL, "/c-push-"+tt.name) })
			if m.Body != tt.want {
				t.Errorf("body = %q, want %q", m.Body, tt.want)
			}
		})
	}
}

func TestPushRemovesADeviceThePushServiceSaysIsGone(t *testing.T) {
	pe := newPushEnv(t)
	alice, b := pe.subscribe("alice")
	pe.push.Gone(alice)
	rec := pending("c-push-3", "bot", "fs__write_file", map[string]any{}, airlockv1.Risk_RISK_HIGH)
	if _, err := pe.notifier.Announce(context.Background(), rec); err == nil {
		t.Fatal("Announce to a gone device reported success")
	}
	var list struct {
		Devices []json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal([]byte(b.get("/api/v1/devices").Body), &list); err != nil || len(list.Devices) != 0 {
		t.Fatalf("devices after a 410: %v %s", err, list.Devices)
	}
}

func TestPushDeviceIsListedAndRevocableByItsOwnerOnly(t *testing.T) {
	pe := newPushEnv(t)
	alice, ab := pe.subscribe("alice")
	page := ab.get("/devices")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, alice.Name) || !strings.Contains(page.Body, "Last delivered") {
		t.Fatalf("the Devices page does not list alice's device: %d\n%s", page.Status, page.Body)
	}
	var list struct {
		Devices []struct{ ID string } `json:"devices"`
	}
	_ = json.Unmarshal([]byte(ab.get("/api/v1/devices").Body), &list)
	if len(list.Devices) != 1 {
		t.Fatalf("alice has %d devices", len(list.Devices))
	}
	id := list.Devices[0].ID
	bb := pe.browser()
	bb.signIn("bob")
	if p := bb.submit("/devices/"+id+"/revoke", nil); p.Status != http.StatusNotFound {
		t.Fatalf("bob turned off alice's device: status %d", p.Status)
	}
	if p := ab.submit("/devices/"+id+"/revoke", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("alice could not turn off her device: status %d %s", p.Status, p.Body)
	}
	testenv.Eventually(t, 10*time.Second, "the notifier to see alice's device turned off", func() bool {
		return !console.PushViewHas(pe.notifier, alice.Endpoint)
	})
	rec := pending("c-push-4", "bot", "fs__write_file", map[string]any{}, airlockv1.Risk_RISK_HIGH)
	if _, err := pe.notifier.Announce(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if n := len(pe.push.Received(alice)); n != 0 {
		t.Fatalf("a turned-off device received %d notifications", n)
	}
}

// An endpoint is chosen by the browser, so by whoever holds a session: the
// console must not be made to call inside addresses with it.
func TestPushEndpointsOutsideHTTPSOrInsideTheNetworkAreRefused(t *testing.T) {
	pe := newPushEnv(t, func(c *config.Config) { c.Console.WebPush.AllowLoopbackHTTP = false })
	inside := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the console called an inside address: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(inside.Close)
	b := pe.browser()
	b.signIn("alice")
	d := pe.push.NewDevice("probe")
	sub := func(endpoint string) map[string]any {
		s := d.Subscription()
		s["endpoint"] = endpoint
		return s
	}
	for _, tc := range []struct{ name, endpoint string }{
		{"plain http", "http://push.example.com/x"},
		{"http on loopback without the test setting", d.Endpoint},
		{"credentials in the URL", "https://user:pw@push.example.com/x"},
		{"not a URL", "push.example.com/x"},
		{"file", "file:///etc/passwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := b.postJSON("/api/v1/devices", sub(tc.endpoint)); p.Status != http.StatusBadRequest {
				t.Fatalf("subscribe %s: status %d %s", tc.endpoint, p.Status, p.Body)
			}
		})
	}
	// https is accepted, but the address it reaches is checked at each connection.
	if p := b.postJSON("/api/v1/devices", sub(inside.URL+"/push")); p.Status != http.StatusCreated {
		t.Fatalf("subscribe an https endpoint: %d %s", p.Status, p.Body)
	}
	testenv.Eventually(t, 10*time.Second, "the notifier to see the https device", func() bool {
		return console.PushViewHas(pe.notifier, inside.URL+"/push")
	})
	rec := pending("c-push-5", "bot", "fs__write_file", map[string]any{}, airlockv1.Risk_RISK_HIGH)
	_, err := pe.notifier.Announce(context.Background(), rec)
	if err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Fatalf("Announce to a loopback https endpoint: %v, want a refusal", err)
	}
}

func TestDevVAPIDKeyIsMadeOnceAndPrivate(t *testing.T) {
	dir := t.TempDir()
	first, err := console.DevVAPIDKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(first)
	second, err := console.DevVAPIDKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(second)
	if first != filepath.Join(dir, console.DevVAPIDKeyFile) || string(b1) != string(b2) || len(b1) < 40 {
		t.Fatalf("key file %s changed or is empty: %q → %q", first, b1, b2)
	}
	if fi, _ := os.Stat(first); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestTheInstallableAppIsServedToAnyoneWithItsTypes(t *testing.T) {
	e := newEnv(t)
	b := e.browser() // not signed in: none of it holds anyone's data
	m := b.get("/manifest.webmanifest")
	var manifest struct {
		StartURL string `json:"start_url"`
		Display  string `json:"display"`
		Icons    []struct{ Src, Type string }
	}
	if m.Status != http.StatusOK || m.Header.Get("Content-Type") != "application/manifest+json" || json.Unmarshal([]byte(m.Body), &manifest) != nil ||
		manifest.StartURL != "/" || manifest.Display != "standalone" || len(manifest.Icons) == 0 {
		t.Fatalf("manifest: %d %q %s", m.Status, m.Header.Get("Content-Type"), m.Body)
	}
	for _, ic := range manifest.Icons {
		if p := b.get(ic.Src); p.Status != http.StatusOK || p.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(p.Body, "\x89PNG") {
			t.Errorf("icon %s: %d %q", ic.Src, p.Status, p.Header.Get("Content-Type"))
		}
	}
	if p := b.get("/icons/icon-7.png"); p.Status != http.StatusNotFound {
		t.Errorf("an icon of no size: %d", p.Status)
	}
	sw := b.get("/sw.js")
	if sw.Status != http.StatusOK || !strings.HasPrefix(sw.Header.Get("Content-Type"), "text/javascript") || strings.Contains(sw.Body, "caches.") {
		t.Fatalf("service worker: %d %q (it must cache nothing)", sw.Status, sw.Header.Get("Content-Type"))
	}
	if csp := sw.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "manifest-src 'self'") || !strings.Contains(csp, "worker-src 'self'") {
		t.Errorf("the CSP lets no manifest or worker load: %s", csp)
	}
	if p := b.get("/devices"); p.Status == http.StatusOK {
		t.Error("the Devices page is served without signing in")
	}
}

func TestPushSubscribingTheSameEndpointAgainReplacesIt(t *testing.T) {
	pe := newPushEnv(t)
	d, b := pe.subscribe("alice")
	if p := b.postJSON("/api/v1/devices", d.Subscription()); p.Status != http.StatusCreated {
		t.Fatalf("subscribe again: %d %s", p.Status, p.Body)
	}
	var list struct {
		Devices []json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal([]byte(b.get("/api/v1/devices").Body), &list); err != nil || len(list.Devices) != 1 {
		t.Fatalf("alice has %d devices after subscribing one twice (%v)", len(list.Devices), err)
	}
}

func TestPushRemindersAndEscalationsSayWhichTheyAre(t *testing.T) {
	pe := newPushEnv(t)
	alice, _ := pe.subscribe("alice")
	rec := pending("c-push-6", "bot", "fs__write_file", map[string]any{}, airlockv1.Risk_RISK_HIGH)
	ref, err := pe.notifier.Announce(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Reminded = true
	if err := pe.notifier.Remind(context.Background(), rec, ref); err != nil {
		t.Fatal(err)
	}
	rec.Escalated = true
	if err := pe.notifier.Remind(context.Background(), rec, ref); err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, m := range pe.push.Received(alice) {
		titles = append(titles, m.Kind+": "+m.Title)
	}
	want := []string{"announce: Decide: fs__write_file (high risk)", "remind: Still waiting: fs__write_file (high risk)", "remind: Escalated: fs__write_file (high risk)"}
	if strings.Join(titles, "|") != strings.Join(want, "|") {
		t.Fatalf("notifications = %q, want %q", titles, want)
	}
}

// An escalation adds its escalate_to approvers to the call (the approval
// service's DueTimer): their phones are told then, not before.
func TestPushEscalationReachesTheApproversItAdds(t *testing.T) {
	pe := newPushEnv(t, func(c *config.Config) {
		c.Console.Users = append(c.Console.Users, config.User{Name: "dave", PasswordHash: c.Console.Users[0].PasswordHash,
			Roles: []string{config.RoleReviewer}, Groups: []string{"oncall"}})
	})
	dave, _ := pe.subscribe("dave")
	rec := pending("c-push-7", "bot", "fs__write_file", map[string]any{}, airlockv1.Risk_RISK_HIGH)
	ref, err := pe.notifier.Announce(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pe.push.Received(dave)); n != 0 {
		t.Fatalf("dave, not yet an approver, received %d notifications", n)
	}
	rec.Escalated, rec.Decision.Approvers = true, append(rec.Decision.Approvers, "group:oncall")
	if err := pe.notifier.Remind(context.Background(), rec, ref); err != nil {
		t.Fatal(err)
	}
	got := pe.push.Received(dave)
	if len(got) != 1 || got[0].Title != "Escalated: fs__write_file (high risk)" {
		t.Fatalf("dave received %+v after the escalation", got)
	}
}

// A notification reads no device from the bucket: the notifier keeps a
// watched view of them, so what a notification asks of JetStream does not
// grow with the devices it goes to (its API requests counted: a read of a
// key is a watch, a consumer each); each delivery is still recorded on its
// device.
func TestPushNotificationsReadTheDevicesFromAWatchedView(t *testing.T) {
	pe := newPushEnv(t)
	const devices = 5
	b := pe.browser()
	b.signIn("alice")
	var ds []*pushtest.Device
	for i := range devices {
		d := pe.push.NewDevice(fmt.Sprintf("alice-phone-%d", i))
		if p := b.postJSON("/api/v1/devices", d.Subscription()); p.Status != http.StatusCreated {
			t.Fatalf("subscribe %s: status %d %s", d.Name, p.Status, p.Body)
		}
		testenv.Eventually(t, 10*time.Second, "the notifier to see "+d.Name, func() bool { return console.PushViewHas(pe.notifier, d.Endpoint) })
		ds = append(ds, d)
	}
	requests := func() uint64 {
		info, err := pe.deps.JS.AccountInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.API.Total
	}
	before := requests()
	rec := pending("c-push-view", "bot", "fs__write_file", map[string]any{}, airlockv1.Risk_RISK_HIGH)
	if _, err := pe.notifier.Announce(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	used := requests() - before - 1 // the count's own request
	t.Logf("a notification to %d devices of one person made %d JetStream API requests", devices, used)
	if used >= devices {
		t.Fatalf("a notification to %d devices made %d JetStream API requests: it reads the devices from the bucket", devices, used)
	}
	for _, d := range ds {
		if n := len(pe.push.Received(d)); n != 1 {
			t.Fatalf("device %s received %d notifications, want 1", d.Name, n)
		}
	}
	testenv.Eventually(t, 10*time.Second, "every delivery recorded on its device", func() bool {
		var list struct {
			Devices []struct {
				LastSuccess time.Time `json:"last_success"`
			} `json:"devices"`
		}
		if json.Unmarshal([]byte(b.get("/api/v1/devices").Body), &list) != nil || len(list.Devices) != devices {
			return false
		}
		for _, d := range list.Devices {
			if d.LastSuccess.IsZero() {
				return false
			}
		}
		return true
	})
}

// The digest of an agent's calls not announced one by one reaches the
// people who may decide them as one notification naming the agent and the
// count, opening the console, with one tag per agent so the next replaces it.
func TestPushDigestIsOneNotificationPerAgentForThePeopleWhoMayDecide(t *testing.T) {
	pe := newPushEnv(t)
	alice, _ := pe.subscribe("alice")
	audrey, _ := pe.subscribe("audrey")
	rec := pending("c-push-d", "bot", "fs__write_file", map[string]any{"path": "/etc/hosts"}, airlockv1.Risk_RISK_HIGH)
	if err := pe.notifier.Digest(context.Background(), notify.Digest{Agent: "bot", Calls: 9, Latest: rec}); err != nil {
		t.Fatal(err)
	}
	got := pe.push.Received(alice)
	if len(got) != 1 {
		t.Fatalf("alice received %d notifications, want 1 digest (refused: %v)", len(got), pe.push.Refused())
	}
	m := got[0]
	if m.Title != "Agent bot: 9 more calls waiting" || m.Kind != "digest" || m.URL != pe.deps.Config.HTTP.PublicURL+"/" {
		t.Errorf("digest notification = %+v", m)
	}
	if n := len(pe.push.Received(audrey)); n != 0 {
		t.Errorf("audrey, who may not decide the calls, received %d notifications", n)
	}
}
