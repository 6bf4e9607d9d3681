package seal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestRequestSealVerifiesOnlyWhatWasSealed(t *testing.T) {
	k, other := NewKey(), NewKey()
	now := time.Now()
	sealed := func() *nats.Msg {
		m := nats.NewMsg("airlock.api.approval.decide")
		m.Data = []byte(`{"callId":"c1"}`)
		k.Request(m, "console", now)
		return m
	}
	for _, tc := range []struct {
		name   string
		mangle func(*nats.Msg) (subject string, key Key, at time.Time)
		ok     bool
	}{
		{"accepts_the_sealed_request", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, k, now }, true},
		{"refuses_another_endpoint", func(m *nats.Msg) (string, Key, time.Time) { return "airlock.api.policy.rules.put", k, now }, false},
		{"refuses_an_altered_body", func(m *nats.Msg) (string, Key, time.Time) {
			m.Data = []byte(`{"callId":"c2"}`)
			return m.Subject, k, now
		}, false},
		{"refuses_another_key", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, other, now }, false},
		{"refuses_a_stale_seal", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, k, now.Add(Window + time.Second) }, false},
		{"refuses_a_missing_seal", func(m *nats.Msg) (string, Key, time.Time) { m.Header.Del(HeaderSeal); return m.Subject, k, now }, false},
		{"refuses_a_renamed_frontend", func(m *nats.Msg) (string, Key, time.Time) {
			m.Header.Set(HeaderFrontend, "gateway")
			return m.Subject, k, now
		}, false},
		{"refuses_with_no_key", func(m *nats.Msg) (string, Key, time.Time) { return m.Subject, Key{}, now }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sealed()
			subj, key, at := tc.mangle(m)
			fe, err := key.VerifyRequest(subj, m.Header, m.Data, at)
			if tc.ok != (err == nil) || (tc.ok && fe != "console") || (!tc.ok && !errors.Is(err, ErrUnsealed)) {
				t.Fatalf("VerifyRequest = %q, %v", fe, err)
			}
		})
	}
}

func TestDecisionSealBindsCallAndArguments(t *testing.T) {
	k := NewKey()
	mk := func() *airlockv1.Event {
		return &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Body: &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{
			Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "echo"},
			Decision: &airlockv1.Decision{ArgumentsDigest: "abc"}}}}
	}
	ev := mk()
	if err := k.SealDecision(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := k.VerifyDecision(ev); err != nil {
		t.Fatalf("a sealed decision does not verify: %v", err)
	}
	for name, mangle := range map[string]func(*airlockv1.Event){
		"another_agent":    func(e *airlockv1.Event) { e.AgentId = "evil"; e.GetAllowed().Call.AgentId = "evil" },
		"another_tool":     func(e *airlockv1.Event) { e.GetAllowed().Call.Tool = "write_file" },
		"another_digest":   func(e *airlockv1.Event) { e.GetAllowed().Decision.ArgumentsDigest = "def" },
		"another_revision": func(e *airlockv1.Event) { e.Revision = 2; e.GetAllowed().Call.Revision = 2 },
		"made_gate_only":   func(e *airlockv1.Event) { e.GetAllowed().Call.AgentRuns = true },
		"no_seal":          func(e *airlockv1.Event) { e.Seal = "" },
	} {
		t.Run(name, func(t *testing.T) {
			ev := mk()
			_ = k.SealDecision(ev)
			mangle(ev)
			if _, err := k.VerifyDecision(ev); !errors.Is(err, ErrDecisionSeal) {
				t.Fatalf("altered decision verified: %v", err)
			}
		})
	}
}

// A key file its group or others may read is refused, with the command
// that fixes it: an agent on the host that could read the decision key
// could seal its own decisions. A missing file says how to make one.
func TestKeyFilesOthersCanReadAreRefused(t *testing.T) {
	dir := t.TempDir()
	made := filepath.Join(dir, "keys", "decision.key")
	k, err := Ensure(made)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(made); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("Ensure made %v (%v), want mode 0600", st.Mode(), err)
	}
	if again, err := Ensure(made); err != nil || again.Hex() != k.Hex() {
		t.Fatalf("Ensure of an existing file gave another key (%v)", err)
	}
	for _, tt := range []struct {
		name    string
		mode    os.FileMode
		missing bool
		want    string // "" loads the key
	}{
		{"owner only", 0o600, false, ""},
		{"owner read-only", 0o400, false, ""},
		{"group may read", 0o640, false, "chmod 600"},
		{"anyone may read", 0o644, false, "can be read by others (mode 0644)"},
		{"missing", 0, true, "airlock keys generate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".key")
			if !tt.missing {
				if err := os.WriteFile(file, []byte(k.Hex()+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(file, tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load("security.decision_key", "", file)
			switch {
			case tt.want == "" && (err != nil || got.Hex() != k.Hex()):
				t.Fatalf("Load: %v, want the key", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Load: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if err := CreateSecretFile(made, "other\n"); !errors.Is(err, os.ErrExist) {
		t.Fatalf("CreateSecretFile over an existing key: %v, want it refused", err)
	}
}

func TestSumIsTheHMACOfTheLengthPrefixedParts(t *testing.T) {
	k := NewKey()
	parsed, err := ParseHex(k.Hex())
	if err != nil {
		t.Fatal(err)
	}
	if k.keyed == nil || parsed.keyed == nil {
		t.Fatal("the key carries no keyed HMAC to clone: every seal keys a new one")
	}
	for _, parts := range [][]string{nil, {""}, {"decision/v1", "allowed", "a1", "c1", "1"}, {"ab", "c"}, {"a", "bc"}} {
		want := hmac.New(sha256.New, k.b)
		for _, p := range parts {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			want.Write(n[:])
			want.Write([]byte(p))
		}
		// Twice from each key: a clone must leave the keyed state as it was.
		for _, key := range []Key{k, parsed, k, parsed} {
			if got := key.Sum(parts...); !hmac.Equal(got, want.Sum(nil)) {
				t.Fatalf("Sum(%q) = %x, want %x", parts, got, want.Sum(nil))
			}
		}
	}
	if hmac.Equal(k.Sum("ab", "c"), k.Sum("a", "bc")) {
		t.Fatal(`Sum("ab", "c") equals Sum("a", "bc"): the parts are not length-prefixed`)
	}
}

// A seal verifies in the one spelling Sign writes: flipping the unused low
// bits of its last character, which a lenient decoder ignores, breaks it.
func TestASealSpelledOtherwiseDoesNotVerify(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	k := NewKey()
	sig := k.Sign("approve", "bot", "c1")
	if !k.Verify(sig, "approve", "bot", "c1") {
		t.Fatal("a seal as signed does not verify")
	}
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	for _, flip := range []int{1, 2, 3} {
		alt := sig[:len(sig)-1] + string(alphabet[last^flip])
		if k.Verify(alt, "approve", "bot", "c1") {
			t.Errorf("the seal with its last character %q for %q verifies", alt[len(alt)-1], sig[len(sig)-1])
		}
	}
}
