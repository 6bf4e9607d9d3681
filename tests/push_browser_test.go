package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/notify/pushtest"
)

// TestConsoleIsInstallableAndTakesAPushSubscription opens the console in
// headless Chromium: the manifest, its icons and the service worker are
// served with their types, the worker registers with the whole console as
// its scope, and the Devices page takes a subscription and lists it, with
// its last delivery, at 390 and 1280 px (tests/artifacts/push-*.png).
// Headless Chromium cannot finish pushManager.subscribe() without the
// vendor's push service on the internet, so the page posts a subscription
// made by the test (a local push service's device) to the same endpoint
// the Devices page's script uses.
func TestConsoleIsInstallableAndTakesAPushSubscription(t *testing.T) {
	ctx, problems := browserContext(t)
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONSOLE_WEBPUSH_ALLOW_LOOPBACK_HTTP=true")
	do(t, ctx, "a laptop window", chromedp.EmulateViewport(1280, 900))
	signIn(t, ctx, dev)

	t.Run("the_manifest_icons_and_service_worker_are_served_with_their_types", func(t *testing.T) {
		type served struct {
			Type string `json:"type"`
			Body string `json:"body"`
		}
		get := func(path string) served {
			js := fmt.Sprintf(`fetch(%q).then(r => r.text().then(b => JSON.stringify({type: r.headers.get("content-type"), body: b})))`, path)
			var s served
			if err := json.Unmarshal([]byte(value(t, ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))), &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		m := get("/manifest.webmanifest")
		var manifest struct {
			Name, StartURL, Display, ThemeColor string
			Icons                               []struct{ Src, Sizes, Type string }
		}
		if err := json.Unmarshal([]byte(strings.NewReplacer(`"start_url"`, `"starturl"`, `"theme_color"`, `"themecolor"`).Replace(m.Body)), &manifest); err != nil {
			t.Fatalf("manifest %s: %v", m.Body, err)
		}
		if m.Type != "application/manifest+json" || manifest.Name == "" || manifest.StartURL != "/" || manifest.Display != "standalone" || manifest.ThemeColor == "" || len(manifest.Icons) < 2 {
			t.Fatalf("manifest (%s): %s", m.Type, m.Body)
		}
		for _, ic := range manifest.Icons {
			js := fmt.Sprintf(`new Promise((ok, fail) => { const i = new Image(); i.onload = () => ok(i.naturalWidth + "x" + i.naturalHeight); i.onerror = () => fail(new Error("no image")); i.src = %q; })`, ic.Src)
			if got := value(t, ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise)); got != ic.Sizes || ic.Type != "image/png" {
				t.Errorf("icon %s is %s, the manifest says %s %s", ic.Src, got, ic.Sizes, ic.Type)
			}
		}
		if sw := get("/sw.js"); !strings.HasPrefix(sw.Type, "text/javascript") || !strings.Contains(sw.Body, `addEventListener("push"`) {
			t.Fatalf("/sw.js served as %q", sw.Type)
		}
	})

	t.Run("the_service_worker_registers_for_the_whole_console", func(t *testing.T) {
		do(t, ctx, "the devices page", chromedp.Navigate(dev.HTTPURL+"/devices"), chromedp.WaitVisible(chromedp.ID("push-optin")))
		scope := value(t, ctx, chromedp.Evaluate[string](`navigator.serviceWorker.ready.then(r => r.scope + " " + r.active.scriptURL)`, chromedp.EvalAwaitPromise))
		if scope != dev.HTTPURL+"/ "+dev.HTTPURL+"/sw.js" {
			t.Fatalf("service worker: %q", scope)
		}
		if !value(t, ctx, chromedp.Evaluate[bool](`"PushManager" in window && !!document.getElementById("push-on")`)) {
			t.Fatal("the Devices page offers no way to turn notifications on")
		}
	})

	t.Run("a_subscription_posted_by_the_page_is_listed_with_its_last_delivery", func(t *testing.T) {
		key := value(t, ctx, chromedp.Evaluate[string](`document.getElementById("push-optin").dataset.pushKey`))
		push := pushtest.Start(t, key)
		d := push.NewDevice("Pixel-test")
		sub, _ := json.Marshal(d.Subscription())
		js := fmt.Sprintf(`fetch("/api/v1/devices", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json",
		  "X-CSRF-Token": document.getElementById("push-optin").dataset.csrf}, body: %q}).then(r => r.status)`, sub)
		if status := value(t, ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise)); status != http.StatusCreated {
			t.Fatalf("subscribe from the page: status %d", status)
		}
		bot := dev.Agent(t, "bot")
		id := mustSubmit(t, bot, airlock.Call{Tool: writeTool, Reason: "save the report", Args: map[string]any{"path": "report.txt", "content": "ok"}})
		m := push.WaitFor(d, 20*time.Second, func(m pushtest.Message) bool { return m.Kind == "announce" })
		if m.URL != dev.HTTPURL+"/calls/bot/"+id {
			t.Fatalf("the notification opens %q", m.URL)
		}
		for _, width := range []int64{1280, 390} {
			view := chromedp.EmulateViewport(width, 900)
			if width == 390 {
				view = chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				do(t, ctx, "the devices page", view, chromedp.Navigate(dev.HTTPURL+"/devices"), chromedp.WaitVisible(chromedp.ID("devices")))
				row := value(t, ctx, chromedp.Evaluate[string](`document.querySelector("#devices tbody tr").innerText`))
				if strings.Contains(row, "Pixel-test") && !strings.Contains(row, "never") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Devices page does not show the device's delivery: %q", row)
				}
				time.Sleep(100 * time.Millisecond)
			}
			noOverflow(t, ctx, fmt.Sprintf("the Devices page at %d px", width))
			offscreen := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('header.top nav a')).filter(a => {
			  const r = a.getBoundingClientRect();
			  return r.left < 0 || r.right > window.innerWidth || r.width === 0;
			}).map(a => a.textContent)`))
			if len(offscreen) > 0 {
				t.Errorf("nav links off a %d px screen: %q", width, offscreen)
			}
			screenshot(t, ctx, fmt.Sprintf("push-devices-%d", width))
		}
		checkURLs(t, ctx, dev.HTTPURL, "the Devices page")
	})
	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported problems:\n%s", strings.Join(p, "\n"))
	}
}
