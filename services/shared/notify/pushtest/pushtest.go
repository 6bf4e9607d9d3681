// Package pushtest is a local Web Push service for tests: it checks each
// request's VAPID authorization (RFC 8292: an ES256 JWT whose aud is the
// endpoint's origin, exp in the future, sub set, signed by the key named
// in k=) and decrypts its payload (RFC 8291 aes128gcm) with the keys of a
// device it made up, as a browser would. Push services are unreachable
// from tests; this one checks what a real one would, and decrypts what
// only the device could.
package pushtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one notification a device received, decrypted.
type Message struct {
	Device string
	Title  string `json:"title"`
	Body   string `json:"body"`
	URL    string `json:"url"`
	Tag    string `json:"tag"`
	Kind   string `json:"kind"`
	// Raw is the decrypted payload.
	Raw []byte
}

// Device is one browser's push subscription on the service.
type Device struct {
	Name     string
	Endpoint string
	// P256dh and Auth are the subscription's keys, base64url, as
	// PushSubscription.toJSON() gives them.
	P256dh, Auth string
	priv         *ecdh.PrivateKey
	auth         []byte
}

// Subscription is d as the browser hands it to the console.
func (d *Device) Subscription() map[string]any {
	return map[string]any{"endpoint": d.Endpoint, "keys": map[string]string{"p256dh": d.P256dh, "auth": d.Auth}, "device": d.Name}
}

// Service is the local push service.
type Service struct {
	t   *testing.T
	srv *httptest.Server
	// VAPIDKey is the application server's public key (base64url) the
	// requests must be signed with.
	VAPIDKey string

	mu       sync.Mutex
	devices  map[string]*Device
	gone     map[string]bool
	received []Message
	refused  []string
}

// Start starts a service on a loopback http address, accepting requests
// signed with vapidPublicKey (base64url, uncompressed point).
func Start(t *testing.T, vapidPublicKey string) *Service {
	s := &Service{t: t, VAPIDKey: vapidPublicKey, devices: map[string]*Device{}, gone: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// NewDevice makes a device (its own P-256 key pair and auth secret) with
// an endpoint on this service.
func (s *Service) NewDevice(name string) *Device {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		s.t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	d := &Device{
		Name: name, Endpoint: s.srv.URL + "/push/" + name + "-" + base64.RawURLEncoding.EncodeToString(auth[:6]),
		P256dh: base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth),
		priv: priv, auth: auth,
	}
	s.mu.Lock()
	s.devices[strings.TrimPrefix(d.Endpoint, s.srv.URL)] = d
	s.mu.Unlock()
	return d
}

// Gone makes the service answer 410 Gone for d from now on (the browser
// unsubscribed).
func (s *Service) Gone(d *Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone[strings.TrimPrefix(d.Endpoint, s.srv.URL)] = true
}

// Received returns the messages d received so far.
func (s *Service) Received(d *Device) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.received {
		if m.Device == d.Name {
			out = append(out, m)
		}
	}
	return out
}

// Refused returns why each refused request was refused.
func (s *Service) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// Requests counts every request the service was sent, accepted or not.
func (s *Service) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received) + len(s.refused)
}

// WaitFor waits until d has received a message for which ok holds and returns it.
func (s *Service) WaitFor(d *Device, within time.Duration, ok func(Message) bool) Message {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, m := range s.Received(d) {
			if ok(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("device %s received no matching notification within %s; it received %+v; refused requests: %v", d.Name, within, s.Received(d), s.Refused())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	d, gone := s.devices[r.URL.Path], s.gone[r.URL.Path]
	s.mu.Unlock()
	refuse := func(status int, why string) {
		s.mu.Lock()
		s.refused = append(s.refused, why)
		s.mu.Unlock()
		http.Error(w, why, status)
	}
	switch {
	case d == nil:
		refuse(http.StatusNotFound, "no such subscription "+r.URL.Path)
		return
	case gone:
		refuse(http.StatusGone, "subscription "+d.Name+" is gone")
		return
	case r.Method != http.MethodPost:
		refuse(http.StatusMethodNotAllowed, "push requests are POSTs")
		return
	case r.Header.Get("Content-Encoding") != "aes128gcm":
		refuse(http.StatusBadRequest, "Content-Encoding must be aes128gcm, got "+r.Header.Get("Content-Encoding"))
		return
	case r.Header.Get("TTL") == "":
		refuse(http.StatusBadRequest, "the TTL header is required")
		return
	}
	if err := s.checkVAPID(r.Header.Get("Authorization"), "http://"+r.Host); err != nil {
		refuse(http.StatusUnauthorized, err.Error())
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<10))
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	plain, err := Decrypt(d, body)
	if err != nil {
		refuse(http.StatusBadRequest, "decrypt: "+err.Error())
		return
	}
	m := Message{Device: d.Name, Raw: plain}
	if err := json.Unmarshal(plain, &m); err != nil {
		refuse(http.StatusBadRequest, "payload is not JSON: "+err.Error())
		return
	}
	m.Device = d.Name
	s.mu.Lock()
	s.received = append(s.received, m)
	s.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// checkVAPID verifies "vapid t=<jwt>, k=<key>" as a push service does.
func (s *Service) checkVAPID(h, origin string) error {
	rest, ok := strings.CutPrefix(h, "vapid ")
	if !ok {
		return fmt.Errorf("Authorization is not a vapid scheme: %q", h)
	}
	var tok, key string
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, "t="); ok {
			tok = v
		} else if v, ok := strings.CutPrefix(part, "k="); ok {
			key = v
		}
	}
	if key != s.VAPIDKey {
		return fmt.Errorf("k=%s is not the application server key %s", key, s.VAPIDKey)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("t= is not a JWT")
	}
	var hdr struct {
		Alg, Typ string
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := decodeJSON(parts[0], &hdr); err != nil || hdr.Alg != "ES256" {
		return fmt.Errorf("JWT header %+v: want alg ES256 (%v)", hdr, err)
	}
	if err := decodeJSON(parts[1], &claims); err != nil {
		return fmt.Errorf("JWT claims: %w", err)
	}
	pub, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return err
	}
	x, y := elliptic.Unmarshal(elliptic.P256(), pub) //nolint:staticcheck // a raw point is what VAPID sends
	if x == nil {
		return errors.New("k= is not a P-256 point")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return errors.New("the JWT signature is not 64 bytes of base64url")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return errors.New("the JWT is not signed by the application server key")
	}
	now := time.Now().Unix()
	switch {
	case claims.Aud != origin:
		return fmt.Errorf("aud %q is not the endpoint's origin %q", claims.Aud, origin)
	case claims.Exp <= now || claims.Exp > now+24*3600:
		return fmt.Errorf("exp %d is not within the next 24 hours", claims.Exp)
	case claims.Sub == "":
		return errors.New("sub is empty")
	}
	return nil
}

func decodeJSON(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Decrypt opens an RFC 8291 aes128gcm message sent to d (one record).
func Decrypt(d *Device, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than the aes128gcm header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if len(body) < 21+idlen || idlen != 65 {
		return nil, fmt.Errorf("keyid of %d bytes: want the sender's 65-byte public key", idlen)
	}
	asPub, ct := body[21:21+idlen], body[21+idlen:]
	if uint32(len(ct)) > rs {
		return nil, fmt.Errorf("%d bytes of ciphertext in a record of %d: one record expected", len(ct), rs)
	}
	peer, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, fmt.Errorf("sender key: %w", err)
	}
	secret, err := d.priv.ECDH(peer)
	if err != nil {
		return nil, err
	}
	prkKey, err := hkdf.Extract(sha256.New, secret, d.auth)
	if err != nil {
		return nil, err
	}
	ikm, err := hkdf.Expand(sha256.New, prkKey, "WebPush: info\x00"+string(d.priv.PublicKey().Bytes())+string(asPub), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("open the record: %w", err)
	}
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 || plain[i] != 2 {
		return nil, errors.New("the last record lacks its 0x02 padding delimiter")
	}
	return plain[:i], nil
}
