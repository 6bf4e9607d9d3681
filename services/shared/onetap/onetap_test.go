package onetap_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/onetap"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func token() onetap.Token {
	return onetap.Token{Agent: "bot", Call: "c1", Revision: 2, Digest: strings.Repeat("ab", 32), Approver: "bob@example.com",
		Action: onetap.Approve, Expires: now.Add(5 * time.Minute)}
}

func TestALinkVerifiesOnlyAsMintedWithItsKeyAndBeforeItsExpiry(t *testing.T) {
	key := onetap.NewKey(seal.NewKey())
	good, err := key.Mint(token())
	if err != nil {
		t.Fatal(err)
	}
	body, mac, _ := strings.Cut(good, ".")
	// The same MAC over a payload naming another approver: what a
	// forwarded link's reader would try.
	other := token()
	other.Approver = "mallory"
	forged, _ := onetap.NewKey(seal.NewKey()).Mint(other)
	forgedBody, _, _ := strings.Cut(forged, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	flipped := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"r":2`, `"r":3`, 1)))

	for _, tc := range []struct {
		name  string
		token string
		at    time.Time
		want  error
	}{
		{"a_minted_link_verifies_before_its_expiry", good, now, nil},
		{"a_link_is_refused_at_its_expiry", good, now.Add(5 * time.Minute), onetap.ErrExpired},
		{"a_link_made_with_another_key_is_refused", forged, now, onetap.ErrInvalid},
		{"another_approver_under_the_original_mac_is_refused", forgedBody + "." + mac, now, onetap.ErrInvalid},
		{"another_revision_under_the_original_mac_is_refused", flipped + "." + mac, now, onetap.ErrInvalid},
		{"a_link_cut_short_is_refused", good[:len(good)-3], now, onetap.ErrInvalid},
		{"a_link_without_its_mac_is_refused", body, now, onetap.ErrInvalid},
		{"an_oversized_link_is_refused", strings.Repeat("a", 5000) + "." + mac, now, onetap.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := key.Parse(tc.token, tc.at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse = %v, want %v", err, tc.want)
			}
			want := token()
			if err == nil && (!got.Expires.Equal(want.Expires) || got.Approver != want.Approver || got.Ref() != want.Ref() || got.Digest != want.Digest || got.Action != want.Action) {
				t.Fatalf("Parse = %+v, want %+v", got, want)
			}
			if err != nil && !errors.Is(err, onetap.ErrRefused) {
				t.Fatalf("%v does not wrap ErrRefused", err)
			}
		})
	}
}

func TestMintRefusesATokenThatBindsNothing(t *testing.T) {
	key := onetap.NewKey(seal.NewKey())
	for name, change := range map[string]func(*onetap.Token){
		"no_approver":       func(t *onetap.Token) { t.Approver = "" },
		"no_digest":         func(t *onetap.Token) { t.Digest = "" },
		"no_revision":       func(t *onetap.Token) { t.Revision = 0 },
		"no_expiry":         func(t *onetap.Token) { t.Expires = time.Time{} },
		"an_unknown_action": func(t *onetap.Token) { t.Action = "maybe" },
		"a_call_id_with_a_dot": func(t *onetap.Token) {
			t.Call = "a.b"
		},
	} {
		t.Run(name, func(t *testing.T) {
			tok := token()
			change(&tok)
			if s, err := key.Mint(tok); err == nil {
				t.Fatalf("Mint made %s", s)
			}
		})
	}
}

func TestBothLinksOfAnApproverShareOneUseAndOthersDoNot(t *testing.T) {
	approve, deny := token(), token()
	deny.Action = onetap.Deny
	if approve.UseKey() != deny.UseKey() {
		t.Fatalf("approve and deny links record their use apart (%s, %s): both could be used", approve.UseKey(), deny.UseKey())
	}
	for name, change := range map[string]func(*onetap.Token){
		"another_approver": func(t *onetap.Token) { t.Approver = "alice" },
		"another_revision": func(t *onetap.Token) { t.Revision = 3 },
		"another_agent":    func(t *onetap.Token) { t.Agent = "evil" },
	} {
		tok := token()
		change(&tok)
		if tok.UseKey() == approve.UseKey() {
			t.Errorf("%s shares the use key %s", name, tok.UseKey())
		}
	}
}

func TestLoadKeyRefusesAMissingKeyAndAFileOthersCanRead(t *testing.T) {
	oneTap := func(o config.OneTap) config.Config { return config.Config{Email: config.Email{OneTap: o}} }
	if _, err := onetap.LoadKey(oneTap(config.OneTap{Enabled: true})); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Fatalf("LoadKey without a key = %v, want an error naming email.one_tap.key_file", err)
	}
	file := filepath.Join(t.TempDir(), "onetap.key")
	if _, err := seal.Ensure(file); err != nil {
		t.Fatal(err)
	}
	if _, err := onetap.LoadKey(oneTap(config.OneTap{Enabled: true, KeyFile: file})); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := onetap.LoadKey(oneTap(config.OneTap{Enabled: true, KeyFile: file})); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("LoadKey of a world-readable file = %v, want a refusal", err)
	}
}

// The one-tap key is a key of its own: an operator who gives the links the
// decision key (which the console, reading links, must never hold) or the
// front-end key (which every front-end holds) is refused at start-up.
func TestLoadKeyRefusesAKeyThatIsAnotherPurposes(t *testing.T) {
	decision, frontend, own := seal.NewKey(), seal.NewKey(), seal.NewKey()
	security := config.Security{DecisionKey: decision.Hex(), FrontendKey: frontend.Hex()}
	for _, c := range []struct {
		name, key, refused string
	}{
		{"its_own_key_loads", own.Hex(), ""},
		{"the_decision_key_is_refused", decision.Hex(), "security.decision_key"},
		{"the_front_end_key_is_refused", frontend.Hex(), "security.frontend_key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := onetap.LoadKey(config.Config{Security: security, Email: config.Email{OneTap: config.OneTap{Enabled: true, Key: c.key}}})
			if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "key of their own")) {
				t.Fatalf("LoadKey = %v, want refused naming %q", err, c.refused)
			}
		})
	}
}
