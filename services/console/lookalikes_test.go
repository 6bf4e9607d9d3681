package console_test

import (
	"net/http"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestPagesWarnOfLookAlikeLetters: an agent's host pаypal.com with a
// Cyrillic а is drawn as paypal.com; the call page and the inbox row say
// so beside the call, in words, and stay quiet about an ordinary Cyrillic
// sentence.
func TestPagesWarnOfLookAlikeLetters(t *testing.T) {
	e := newEnv(t)
	spoof := pending("call_spoof", "bot", "web__fetch", map[string]any{"url": "https://pаypal.com/login"}, airlockv1.Risk_RISK_MEDIUM)
	plain := pending("call_plain", "bot", "web__fetch", map[string]any{"url": "https://paypal.com/login", "note": "Привет, мир: отчёт.pdf"}, airlockv1.Risk_RISK_MEDIUM)
	e.approval.put(spoof)
	e.approval.put(plain)
	b := e.browser()
	b.signIn("alice")
	const warning = "Look-alike letters: the address https://pаypal.com/login mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is xn--pypal-4ve.com"
	for _, tt := range []struct{ name, path, want, wantNot string }{
		{"the_call_page", "/calls/bot/call_spoof", warning, ""},
		{"the_inbox", "/", warning, ""},
		{"an_ordinary_cyrillic_sentence", "/calls/bot/call_plain", "", "Look-alike"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := b.get(tt.path)
			if p.Status != http.StatusOK {
				t.Fatalf("status %d", p.Status)
			}
			want := strings.ReplaceAll(tt.want, "+", "&#43;") // as html/template writes it
			if tt.want != "" && !strings.Contains(p.Body, `<div class="warning lookalikes" role="alert"><div>⚠ `+want+`</div></div>`) {
				t.Errorf("the page does not warn %q:\n%s", tt.want, p.Body)
			}
			if tt.wantNot != "" && strings.Contains(p.Body, tt.wantNot) {
				t.Errorf("the page says %q of a call with no look-alike letters", tt.wantNot)
			}
		})
	}
}
