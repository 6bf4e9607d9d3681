package console

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/lookalike"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Web Push: a reviewer subscribes each of their devices from the console
// (devices.go); the approval service tells every subscribed person who may
// decide a pending call about it through PushNotifier. A notification
// carries no secret and decides nothing: the tool, the risk, a short
// reason and the call page's URL, where the person signs in and decides.
//
//	push.<base64url(owner)>.<id>  pushSubscription (in the console bucket)

const (
	// pushName is the channel's name in `notified` events.
	pushName = "push"
	// maxPushEndpoint bounds a subscription's endpoint URL.
	maxPushEndpoint = 2048
	// maxPushDevices bounds the devices one person may subscribe.
	maxPushDevices = 20
	// maxPushReply bounds what is read of a push service's answer.
	maxPushReply = 4 << 10
	// pushReasonRunes bounds the reason in a notification.
	pushReasonRunes = 120
	// DevVAPIDKeyFile is the VAPID private key's file in `airlock dev`'s data directory.
	DevVAPIDKeyFile = "webpush-vapid.key"
)

// pushSubscription is one device of one person, as the browser's
// PushSubscription gave it.
type pushSubscription struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// SSO marks a person who signs in by single sign-on: their roles are read
	// from their last sign-in (people.<b64 name>), not a local user's.
	SSO         bool      `json:"sso,omitempty"`
	Device      string    `json:"device"`
	Endpoint    string    `json:"endpoint"`
	P256dh      string    `json:"p256dh"`
	Auth        string    `json:"auth"`
	CreatedAt   time.Time `json:"created_at"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	// rev is the bucket's revision of what was read (the notifier's view).
	rev uint64
}

func pushPrefix(owner string) string {
	return "push." + base64.RawURLEncoding.EncodeToString([]byte(owner))
}

func (s pushSubscription) key() string { return pushPrefix(s.Owner) + "." + s.ID }

// vapid is the application server's key pair, base64url as webpush-go and
// the browser's applicationServerKey take them.
type vapid struct {
	private, public string
}

// loadVAPID reads the private key file and derives the public key.
func loadVAPID(file string) (vapid, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return vapid{}, fmt.Errorf("read the VAPID key console.webpush.vapid_private_key_file: %w", err)
	}
	priv := strings.TrimSpace(string(b))
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(priv, "="))
	if err != nil {
		return vapid{}, fmt.Errorf("the VAPID key in %s is not base64url: %w", file, err)
	}
	k, err := ecdh.P256().NewPrivateKey(raw)
	if err != nil {
		return vapid{}, fmt.Errorf("the VAPID key in %s is not a P-256 private key: %w", file, err)
	}
	return vapid{private: base64.RawURLEncoding.EncodeToString(raw), public: base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes())}, nil
}

// DevVAPIDKey returns the VAPID private key file of `airlock dev` in
// dataDir, creating it (mode 0600) on the first start.
func DevVAPIDKey(dataDir string) (string, error) {
	file := filepath.Join(dataDir, DevVAPIDKeyFile)
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	if _, err := NewVAPIDKey(file); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	return file, nil
}

// NewVAPIDKey writes a new VAPID private key to file (mode 0600; an
// existing file is never overwritten: the error wraps os.ErrExist) and
// returns its public key, base64url.
func NewVAPIDKey(file string) (public string, err error) {
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return "", fmt.Errorf("generate a VAPID key: %w", err)
	}
	if err := seal.CreateSecretFile(file, priv+"\n"); err != nil {
		return "", err
	}
	return pub, nil
}

// pushSubject is the VAPID "sub" claim: console.webpush.subject, else the
// public URL when it is https.
func pushSubject(cfg config.Config) string {
	switch {
	case cfg.Console.WebPush.Subject != "":
		return cfg.Console.WebPush.Subject
	case strings.HasPrefix(cfg.HTTP.PublicURL, "https://"):
		return cfg.HTTP.PublicURL
	}
	return "mailto:airlock@localhost"
}

// checkEndpoint refuses a push endpoint airlock must not be made to call: a
// browser chooses it, so it is an SSRF vector. Only https URLs are accepted,
// or http on a loopback address when allowLoopbackHTTP (tests); the
// address it resolves to is checked again at each connection (pushDialer).
func checkEndpoint(raw string, allowLoopbackHTTP bool) error {
	if raw == "" || len(raw) > maxPushEndpoint {
		return apierr.New(apierr.InvalidRequest, "the push endpoint must be a URL of at most %d bytes", maxPushEndpoint)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return apierr.New(apierr.InvalidRequest, "the push endpoint is not an absolute URL without credentials")
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && allowLoopbackHTTP && isLoopbackHost(u.Hostname()):
		return nil
	}
	return apierr.New(apierr.InvalidRequest, "the push endpoint must be an https URL (your browser's push service gives one)")
}

func isLoopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

// pushDialer connects only to public addresses (checked on the address
// actually dialed, so a name that resolves to an inside address is refused
// too), and to loopback when allowLoopback (tests).
func pushDialer(allowLoopback bool) *net.Dialer {
	return &net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil {
				return fmt.Errorf("push endpoint address %s is not an IP address", host)
			}
			if ip.IsLoopback() && allowLoopback {
				return nil
			}
			if !publicAddress(ip) {
				return fmt.Errorf("push endpoint address %s is not a public address: refused", ip)
			}
			return nil
		},
	}
}

// notPublic are the special-purpose ranges (RFC 6890 and its successors)
// that Go counts as global unicast, yet that reach no push service: shared
// address space (carrier-grade NAT, tailnets), benchmarking, IETF protocol
// assignments, documentation, and IPv6 transition prefixes that lead to
// IPv4 addresses inside a network (NAT64, 6to4, Teredo).
var notPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "240.0.0.0/4",
		"64:ff9b::/96", "64:ff9b:1::/48", "2001::/32", "2001:db8::/32", "2002::/16", "fc00::/7",
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// publicAddress reports whether ip may be a push service's: global unicast,
// not private, loopback or link-local, and in no special-purpose range.
func publicAddress(ip net.IP) bool {
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
		return false
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	a = a.Unmap()
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// pushClient is the HTTP client for push services: restricted dialing, no
// redirects, no proxy, bounded time.
func pushClient(w config.WebPush) *http.Client {
	return &http.Client{
		Timeout: pushTimeout(w),
		Transport: &http.Transport{
			DialContext:            pushDialer(w.AllowLoopbackHTTP).DialContext,
			TLSHandshakeTimeout:    5 * time.Second,
			ResponseHeaderTimeout:  pushTimeout(w),
			MaxResponseHeaderBytes: maxPushReply,
			ForceAttemptHTTP2:      true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func pushTimeout(w config.WebPush) time.Duration {
	if w.Timeout > 0 {
		return w.Timeout
	}
	return 10 * time.Second
}

// pushStore keeps subscriptions in the console bucket.
type pushStore struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// add stores a new subscription for its owner; subscribing the same
// endpoint again replaces the old one (a browser renews its subscription).
func (ps *pushStore) add(ctx context.Context, sub pushSubscription) (pushSubscription, error) {
	mine, err := ps.list(ctx, sub.Owner)
	if err != nil {
		return sub, err
	}
	kept := 0
	for _, old := range mine {
		if old.Endpoint != sub.Endpoint {
			kept++
			continue
		}
		if err := ps.kv.Delete(ctx, old.key()); err != nil {
			return sub, apierr.Wrap(apierr.Unavailable, err, "replace the device's earlier subscription")
		}
	}
	if kept >= maxPushDevices {
		return sub, apierr.New(apierr.InvalidRequest, "you have %d devices with notifications on: turn one off first", kept)
	}
	sub.ID = randomHex(8)
	sub.CreatedAt = ps.now()
	b, _ := json.Marshal(sub)
	if _, err := ps.kv.Create(ctx, sub.key(), b); err != nil {
		return sub, apierr.Wrap(apierr.Unavailable, err, "store the device")
	}
	return sub, nil
}

// list returns owner's subscriptions (the notifier reads everyone's from
// its view, pushView).
func (ps *pushStore) list(ctx context.Context, owner string) ([]pushSubscription, error) {
	keys, err := bus.Keys(ctx, ps.kv, pushPrefix(owner)+".*")
	if err != nil {
		return nil, apierr.Wrap(apierr.Unavailable, err, "list devices")
	}
	var out []pushSubscription
	for _, key := range keys {
		e, err := ps.kv.Get(ctx, key)
		if err != nil {
			continue // deleted meanwhile
		}
		var s pushSubscription
		if json.Unmarshal(e.Value(), &s) == nil && s.Owner == owner {
			out = append(out, s)
		}
	}
	return out, ctx.Err()
}

// remove deletes owner's subscription id.
func (ps *pushStore) remove(ctx context.Context, owner, id string) error {
	if id == "" || strings.ContainsAny(id, ".*> ") {
		return apierr.New(apierr.InvalidRequest, "device id %q is not valid", id)
	}
	key := pushPrefix(owner) + "." + id
	if _, err := ps.kv.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return apierr.New(apierr.NotFound, "you have no device %s", id)
	} else if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "read device %s", id)
	}
	if err := ps.kv.Delete(ctx, key); err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "remove device %s", id)
	}
	return nil
}

// succeeded records a delivery's time on s as read at s.rev (best effort:
// a lost update, or one refused because the device changed since, only
// shows an older time on the Devices page).
func (ps *pushStore) succeeded(ctx context.Context, s pushSubscription) {
	s.LastSuccess = ps.now()
	b, _ := json.Marshal(s)
	_, _ = ps.kv.Update(ctx, s.key(), b, s.rev)
}

// pushView is every device subscription of the console bucket, kept by
// one watch of its push.* keys for as long as the connection lasts, so a
// notification costs no read of the bucket. A device subscribed a moment
// before a notification may not be in it yet.
type pushView struct {
	mu   sync.RWMutex
	subs map[string]pushSubscription // by key
	// ready is closed once the watch's initial values are in; ended when
	// the watch ends (its connection closed).
	ready, ended chan struct{}
}

// watchPush starts the view of kv's subscriptions. The watch outlives
// ctx (the notifier's construction): its consumer is made again with the
// context it was started with whenever it falls behind, so that must not
// end; the watch ends with its connection.
func watchPush(ctx context.Context, kv jetstream.KeyValue) (*pushView, error) {
	w, err := bus.Watch(context.WithoutCancel(ctx), kv, "push.>")
	if err != nil {
		return nil, fmt.Errorf("watch the devices with notifications on: %w", err)
	}
	v := &pushView{subs: map[string]pushSubscription{}, ready: make(chan struct{}), ended: make(chan struct{})}
	go v.follow(w)
	return v, nil
}

func (v *pushView) follow(w jetstream.KeyWatcher) {
	defer close(v.ended)
	initial := true
	for e := range w.Updates() {
		if e == nil {
			if initial {
				close(v.ready)
				initial = false
			}
			continue
		}
		var s pushSubscription
		v.mu.Lock()
		if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &s) == nil {
			s.rev = e.Revision()
			v.subs[e.Key()] = s
		} else {
			delete(v.subs, e.Key())
		}
		v.mu.Unlock()
	}
}

// all is every subscription, once the view holds the bucket's.
func (v *pushView) all(ctx context.Context) ([]pushSubscription, error) {
	select {
	case <-v.ready:
	case <-v.ended:
		return nil, errors.New("the watch of the devices with notifications on ended before it read them")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-v.ended:
		return nil, errors.New("the watch of the devices with notifications on has ended (the connection closed)")
	default:
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]pushSubscription, 0, len(v.subs))
	for _, s := range v.subs {
		out = append(out, s)
	}
	return out, nil
}

// pushMessage is the notification's payload, which the service worker
// (web/static/sw.js) shows. It carries no secret.
type pushMessage struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	// URL is the call page, where the person signs in and decides.
	URL string `json:"url"`
	// Tag makes a reminder or an outcome replace the call's earlier notification.
	Tag  string `json:"tag"`
	Kind string `json:"kind"`
}

// PushNotifier delivers pending calls, reminders, escalations and outcomes
// to the devices of every person who may decide the call (mayActIn), by
// Web Push. It implements notify.Notifier.
type PushNotifier struct {
	store *store
	subs  *pushStore
	// devices is every subscription, kept by a watch: a notification
	// reads it rather than listing and reading the bucket's keys.
	devices *pushView
	dir     calls.Directory
	keys    vapid
	subject string
	client  *http.Client
	base    string // http.public_url, for the call page's URL
	sso     bool   // console.oidc is configured: people who sign in that way count
	// allowLoopback is console.webpush.allow_loopback_http (tests).
	allowLoopback bool
	log           interface {
		Warn(msg string, args ...any)
	}
}

// NewPushNotifier builds the Web Push channel from deps; the console bucket
// must exist (bus.Provision) and console.webpush must be enabled.
func NewPushNotifier(ctx context.Context, deps svc.Deps) (*PushNotifier, error) {
	w := deps.Config.Console.WebPush
	keys, err := loadVAPID(w.VAPIDPrivateKeyFile)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, deps, time.Now)
	if err != nil {
		return nil, err
	}
	// The notifier runs as the approval service, which may read only some
	// keys of the console bucket (natsauth consolePush): its gets go through
	// a watch, which names the key, on every layout.
	st.kv = bus.KeyedReads(st.kv)
	devices, err := watchPush(ctx, st.kv)
	if err != nil {
		return nil, err
	}
	return &PushNotifier{
		store: st, subs: &pushStore{kv: st.kv, now: time.Now}, devices: devices, dir: calls.DirectoryOf(deps.Config), keys: keys,
		subject: pushSubject(deps.Config), client: pushClient(w), base: strings.TrimRight(deps.Config.HTTP.PublicURL, "/"),
		sso: deps.Config.Console.OIDC.Issuer != "", allowLoopback: w.AllowLoopbackHTTP, log: deps.Log,
	}, nil
}

// Name implements notify.Notifier.
func (n *PushNotifier) Name() string { return pushName }

// Wants implements notify.Notifier: every pending call, like the console's
// inbox; who is told is decided per person at delivery.
func (n *PushNotifier) Wants(*airlockv1.ApprovalRecord) bool { return true }

// Announce implements notify.Notifier. The ref is the call's page path.
func (n *PushNotifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	ref := callPath(rec.GetCall().GetAgentId(), rec.GetCall().GetCallId())
	return ref, n.deliver(ctx, rec, "announce")
}

// Remind implements notify.Notifier (a reminder or an escalation).
func (n *PushNotifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	return n.deliver(ctx, rec, "remind")
}

// Update implements notify.Notifier: the outcome replaces the call's
// notification on the same devices.
func (n *PushNotifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	return n.deliver(ctx, rec, "update")
}

// Digest implements notify.Digester: one notification, to the people who
// may decide the last of the agent's coalesced calls, saying how many more
// wait; it replaces the agent's previous digest on the device (its tag).
func (n *PushNotifier) Digest(ctx context.Context, d notify.Digest) error {
	noun := "calls"
	if d.Calls == 1 {
		noun = "call"
	}
	return n.send(ctx, d.Latest, pushMessage{
		Title: fmt.Sprintf("Agent %s: %d more %s waiting", escape.Push(calls.Shorten(d.Agent, 40)), d.Calls, noun),
		Body:  "Not announced one by one: open the console to see them", URL: n.base + "/", Tag: "digest:" + d.Agent, Kind: "digest",
	})
}

// deliver sends rec's notification of kind.
func (n *PushNotifier) deliver(ctx context.Context, rec *airlockv1.ApprovalRecord, kind string) error {
	return n.send(ctx, rec, n.message(rec, kind))
}

// send sends m to every device of every person who may decide rec, all at
// once; one slow or dead device delays no other. It fails only when every
// delivery failed.
func (n *PushNotifier) send(ctx context.Context, rec *airlockv1.ApprovalRecord, m pushMessage) error {
	subs, err := n.devices.all(ctx)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode the notification: %w", err)
	}
	people := map[string]bool{}
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		errs       []error
		tried, oks int
	)
	for _, s := range subs {
		key := fmt.Sprint(s.SSO, s.Owner)
		may, seen := people[key]
		if !seen {
			may = n.mayAct(ctx, s, rec)
			people[key] = may
		}
		if !may {
			continue
		}
		tried++
		wg.Add(1)
		go func(s pushSubscription) {
			defer wg.Done()
			err := n.sendTo(ctx, s, msg, rec)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			oks++
		}(s)
	}
	wg.Wait()
	if tried > 0 && oks == 0 {
		return fmt.Errorf("no device took the notification: %w", errors.Join(errs...))
	}
	return ctx.Err()
}

// mayAct resolves the subscriber as the console would when they sign in
// (their current roles and groups) and asks mayActIn.
func (n *PushNotifier) mayAct(ctx context.Context, s pushSubscription, rec *airlockv1.ApprovalRecord) bool {
	lookup := n.store.user
	if s.SSO {
		if !n.sso {
			return false
		}
		lookup = n.store.person
	}
	u, ok, err := lookup(ctx, s.Owner)
	if err != nil || !ok {
		return false
	}
	return mayActIn(n.dir, Principal{Name: u.Name, Roles: u.Roles, Groups: u.Groups}, rec)
}

// sendTo delivers one message to one device; a subscription the push
// service says is gone (404, 410) is removed.
func (n *PushNotifier) sendTo(ctx context.Context, s pushSubscription, msg []byte, rec *airlockv1.ApprovalRecord) error {
	// Checked again: a subscription stored under an older, looser setting
	// must not be called either.
	if err := checkEndpoint(s.Endpoint, n.allowLoopback); err != nil {
		return fmt.Errorf("device %s of %s: %w", s.ID, s.Owner, err)
	}
	ttl := 60
	if d := time.Until(rec.GetDeadline().AsTime()); rec.GetDeadline() != nil && d > time.Minute {
		ttl = int(d / time.Second)
	}
	urgency := webpush.UrgencyNormal
	if rec.GetDecision().GetRisk() >= airlockv1.Risk_RISK_HIGH {
		urgency = webpush.UrgencyHigh
	}
	resp, err := webpush.SendNotificationWithContext(ctx, msg, &webpush.Subscription{
		Endpoint: s.Endpoint, Keys: webpush.Keys{P256dh: s.P256dh, Auth: s.Auth},
	}, &webpush.Options{
		HTTPClient: n.client, Subscriber: n.subject, TTL: ttl, Urgency: urgency,
		VAPIDPublicKey: n.keys.public, VAPIDPrivateKey: n.keys.private,
	})
	if err != nil {
		return fmt.Errorf("push to device %s of %s: %w", s.ID, s.Owner, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPushReply))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		if err := n.subs.kv.Delete(ctx, s.key()); err != nil {
			return fmt.Errorf("device %s of %s is gone (HTTP %d) and could not be removed: %w", s.ID, s.Owner, resp.StatusCode, err)
		}
		n.log.Warn("a device's push subscription has expired and was removed", "owner", s.Owner, "device", s.ID, "status", resp.StatusCode)
		return fmt.Errorf("device %s of %s is gone (HTTP %d): removed", s.ID, s.Owner, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("push to device %s of %s: the push service answered HTTP %d", s.ID, s.Owner, resp.StatusCode)
	}
	n.subs.succeeded(ctx, s)
	return nil
}

// message is what the phone shows: tool, risk and a short reason (the
// policy's), each escaped for a notification's plain text, and the call
// page's URL.
func (n *PushNotifier) message(rec *airlockv1.ApprovalRecord, kind string) pushMessage {
	c := rec.GetCall()
	risk, tool := calls.RiskName(rec.GetDecision().GetRisk()), calls.QualifiedTool(c)
	title := "Decide: " + escape.Push(calls.Shorten(tool, 60)) + " (" + risk + " risk)"
	switch {
	case kind == "remind" && rec.GetEscalated():
		title = "Escalated: " + escape.Push(calls.Shorten(tool, 60)) + " (" + risk + " risk)"
	case kind == "remind":
		title = "Still waiting: " + escape.Push(calls.Shorten(tool, 60)) + " (" + risk + " risk)"
	case kind == "update":
		title = escape.Push(calls.Shorten(tool, 60)) + ": " + strings.ToLower(strings.TrimPrefix(rec.GetState().String(), "APPROVAL_STATE_"))
	}
	// The policy's reason, as every card leads with; the agent's own
	// words only when the policy gave none, and then said to be its own.
	reason := escape.Push(calls.Shorten(rec.GetDecision().GetReason(), pushReasonRunes))
	if reason == "" && c.GetReason() != "" {
		reason = "Agent's reason: " + escape.Push(calls.Shorten(c.GetReason(), pushReasonRunes))
	}
	body := "agent " + escape.Push(calls.Shorten(c.GetAgentId(), 40))
	if reason != "" {
		body = reason + " — " + body
	}
	// Look-alike letters take the reason's place (the page shows both):
	// the title's tool may be the name that lies.
	if found := lookalike.InCall(c, rec.GetDecision().GetRedact()); len(found) > 0 {
		body = "⚠ " + found[0].Heading() + found[0].Summary(func(s string) string { return escape.Push(calls.Shorten(s, 40)) }) +
			" — agent " + escape.Push(calls.Shorten(c.GetAgentId(), 40))
	}
	path := callPath(c.GetAgentId(), c.GetCallId())
	return pushMessage{Title: title, Body: body, URL: n.base + path, Tag: path, Kind: kind}
}
