package console

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// The installable console: the web app manifest, the service worker (at
// the root, so that its scope is the whole console) and the icons, all
// public and holding no one's data; and the Devices page where a person
// turns Web Push on for a device and off again.

// iconSizes are the manifest's icons, drawn once at start.
var iconSizes = []int{192, 512, 180}

const themeColor = "#1f3a5f"

// webApp is what the console serves to make it installable and to take
// subscriptions; keys is zero when Web Push is not configured.
type webApp struct {
	icons map[string][]byte // "192" → PNG
	keys  vapid
	subs  *pushStore
	// allowLoopback is console.webpush.allow_loopback_http (tests).
	allowLoopback bool
}

func (w *webApp) pushOn() bool { return w.keys.public != "" }

func newWebApp(con *Console) (*webApp, error) {
	w := &webApp{icons: map[string][]byte{}, allowLoopback: con.cfg.Console.WebPush.AllowLoopbackHTTP}
	for _, n := range iconSizes {
		b, err := drawIcon(n)
		if err != nil {
			return nil, err
		}
		w.icons[fmt.Sprint(n)] = b
	}
	if con.cfg.Console.WebPush.Enabled() {
		keys, err := loadVAPID(con.cfg.Console.WebPush.VAPIDPrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		w.keys = keys
	}
	w.subs = &pushStore{kv: con.store.kv, now: con.opts.Now}
	return w, nil
}

// drawIcon draws the app icon (a white padlock on the theme color) as an n×n PNG.
func drawIcon(n int) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	bg := color.RGBA{0x1f, 0x3a, 0x5f, 0xff}
	fg := color.RGBA{0xff, 0xff, 0xff, 0xff}
	for y := range n {
		for x := range n {
			c := bg
			fx, fy := float64(x)/float64(n), float64(y)/float64(n)
			body := fx >= 0.28 && fx <= 0.72 && fy >= 0.46 && fy <= 0.80
			dx, dy := fx-0.5, fy-0.46
			r := dx*dx + dy*dy
			shackle := fy <= 0.46 && r <= 0.17*0.17 && r >= 0.11*0.11
			legs := fy > 0.40 && fy <= 0.46 && ((fx >= 0.33 && fx <= 0.39) || (fx >= 0.61 && fx <= 0.67))
			keyhole := fx >= 0.47 && fx <= 0.53 && fy >= 0.56 && fy <= 0.70
			if (body || shackle || legs) && !keyhole {
				c = fg
			}
			img.SetRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("draw the %d px icon: %w", n, err)
	}
	return buf.Bytes(), nil
}

func (con *Console) manifest(c echo.Context) error {
	type icon struct {
		Src     string `json:"src"`
		Sizes   string `json:"sizes"`
		Type    string `json:"type"`
		Purpose string `json:"purpose,omitempty"`
	}
	var icons []icon
	for _, n := range iconSizes {
		icons = append(icons, icon{Src: fmt.Sprintf("/icons/icon-%d.png", n), Sizes: fmt.Sprintf("%dx%d", n, n), Type: "image/png", Purpose: "any"})
	}
	b, err := json.Marshal(map[string]any{
		"name": "airlock console", "short_name": "airlock", "id": "/", "start_url": "/", "scope": "/",
		"display": "standalone", "theme_color": themeColor, "background_color": "#ffffff", "icons": icons,
		"description": "Decide the calls your AI agents ask you about.",
	})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, "application/manifest+json", b)
}

// serviceWorker serves web/static/sw.js at /sw.js: a worker's scope is
// its script's directory, and it must cover the call pages.
func (con *Console) serviceWorker(c echo.Context) error {
	b, err := webFS.ReadFile("web/static/sw.js")
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Service-Worker-Allowed", "/")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", b)
}

func (con *Console) icon(c echo.Context) error {
	size, ok := strings.CutPrefix(c.Param("file"), "icon-")
	size, png := strings.CutSuffix(size, ".png")
	b, known := con.app.icons[size]
	if !ok || !png || !known {
		return apierr.New(apierr.NotFound, "no such icon")
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=86400")
	return c.Blob(http.StatusOK, "image/png", b)
}

// deviceView is one subscribed device on the Devices page.
type deviceView struct {
	ID, Device         string
	Created, LastUsed  time.Time
	RevokePath, Origin string
}

type devicesView struct {
	layout
	Devices []deviceView
	// PushKey is the VAPID public key the browser subscribes with ("" when
	// Web Push is not configured).
	PushKey string
}

func (con *Console) devicesPage(c echo.Context) error {
	p := principal(c)
	subs, err := con.app.subs.list(c.Request().Context(), p.Name)
	if err != nil {
		return err
	}
	v := &devicesView{layout: layout{Title: "Devices", Nav: "devices"}, PushKey: con.app.keys.public}
	for _, s := range subs {
		origin := ""
		if u, err := url.Parse(s.Endpoint); err == nil {
			origin = u.Host // which push service: the endpoint's path is the device's own address
		}
		v.Devices = append(v.Devices, deviceView{ID: s.ID, Device: s.Device, Created: s.CreatedAt, LastUsed: s.LastSuccess,
			RevokePath: "/devices/" + s.ID + "/revoke", Origin: origin})
	}
	return con.render(c, http.StatusOK, "devices", v)
}

// subscribeRequest is the browser's PushSubscription.toJSON() and a name
// for the device.
type subscribeRequest struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	Device string `json:"device"`
}

// apiSubscribe stores the signed-in person's subscription of this device.
func (con *Console) apiSubscribe(c echo.Context) error {
	if !con.app.pushOn() {
		return apierr.New(apierr.Unavailable, "notifications on devices are not configured: set console.webpush.vapid_private_key_file")
	}
	var req subscribeRequest
	if err := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 8<<10)).Decode(&req); err != nil {
		return apierr.New(apierr.InvalidRequest, "the body must be a push subscription as JSON: %v", err)
	}
	sub, err := con.app.subscription(principal(c), req, c.Request().UserAgent())
	if err != nil {
		return err
	}
	sub, err = con.app.subs.add(c.Request().Context(), sub)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"id": sub.ID, "device": sub.Device, "created_at": sub.CreatedAt})
}

// subscription checks req and makes it p's subscription.
func (w *webApp) subscription(p Principal, req subscribeRequest, userAgent string) (pushSubscription, error) {
	if p.Via != ViaSession && p.TokenKind != TokenPersonal {
		return pushSubscription{}, apierr.New(apierr.NotAuthorized, "only a person subscribes their devices")
	}
	if err := checkEndpoint(req.Endpoint, w.allowLoopback); err != nil {
		return pushSubscription{}, err
	}
	dh, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(req.Keys.P256dh, "="))
	if err == nil {
		_, err = ecdh.P256().NewPublicKey(dh)
	}
	if err != nil {
		return pushSubscription{}, apierr.New(apierr.InvalidRequest, "keys.p256dh is not a P-256 public key in base64url")
	}
	auth, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(req.Keys.Auth, "="))
	if err != nil || len(auth) != 16 {
		return pushSubscription{}, apierr.New(apierr.InvalidRequest, "keys.auth is not a 16-byte secret in base64url")
	}
	device := strings.TrimSpace(req.Device)
	if device == "" {
		device = userAgent
	}
	return pushSubscription{
		Owner: p.Name, SSO: p.sso, Device: calls.Shorten(device, 80), Endpoint: req.Endpoint,
		P256dh: base64.RawURLEncoding.EncodeToString(dh), Auth: base64.RawURLEncoding.EncodeToString(auth),
	}, nil
}

func (con *Console) revokeDeviceForm(c echo.Context) error {
	if err := con.app.subs.remove(c.Request().Context(), principal(c).Name, c.Param("id")); err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/devices", "notifications turned off on that device")
}

func (con *Console) apiRevokeDevice(c echo.Context) error {
	if err := con.app.subs.remove(c.Request().Context(), principal(c).Name, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (con *Console) apiListDevices(c echo.Context) error {
	subs, err := con.app.subs.list(c.Request().Context(), principal(c).Name)
	if err != nil {
		return err
	}
	type device struct {
		ID          string    `json:"id"`
		Device      string    `json:"device"`
		CreatedAt   time.Time `json:"created_at"`
		LastSuccess time.Time `json:"last_success,omitzero"`
	}
	out := []device{}
	for _, s := range subs {
		out = append(out, device{ID: s.ID, Device: s.Device, CreatedAt: s.CreatedAt, LastSuccess: s.LastSuccess})
	}
	return c.JSON(http.StatusOK, map[string]any{"devices": out, "public_key": con.app.keys.public})
}
