package config

import (
	"strings"
	"testing"
)

func TestNotifierSettingsThatCannotWorkAreRefused(t *testing.T) {
	mail := func(f func(*Email)) func(*Config) {
		return func(c *Config) {
			c.Email = Email{SMTPHost: "smtp.example.com", TLS: "starttls", From: "airlock <airlock@example.com>"}
			f(&c.Email)
		}
	}
	hook := Webhook{Name: "oncall", URL: "https://hooks.example.com/a", Secret: "0123456789abcdef"}
	for _, c := range []struct {
		name  string
		tweak func(*Config)
		want  string // "" = valid
	}{
		{"accepts_email_with_a_sender", mail(func(*Email) {}), ""},
		{"refuses_an_unknown_tls_mode", mail(func(e *Email) { e.TLS = "maybe" }), "email.tls"},
		{"refuses_email_without_a_sender", mail(func(e *Email) { e.From = "" }), "email.from"},
		{"refuses_an_address_that_is_not_one", mail(func(e *Email) { e.Addresses = map[string]string{"alice": "alice"} }), "email.addresses"},
		{"refuses_a_username_without_a_password", mail(func(e *Email) { e.Username = "u" }), "email.username"},
		{"accepts_a_webhook", func(c *Config) { c.Webhooks = []Webhook{hook} }, ""},
		{"refuses_a_webhook_with_a_short_secret", func(c *Config) { h := hook; h.Secret = "short"; c.Webhooks = []Webhook{h} }, "secret"},
		{"refuses_a_webhook_name_with_capitals", func(c *Config) { h := hook; h.Name = "OnCall"; c.Webhooks = []Webhook{h} }, "name"},
		{"refuses_two_webhooks_of_one_name", func(c *Config) { c.Webhooks = []Webhook{hook, hook} }, "two endpoints"},
		{"refuses_a_webhook_url_that_is_not_http", func(c *Config) { h := hook; h.URL = "file:///etc/passwd"; c.Webhooks = []Webhook{h} }, "url"},
		{"refuses_a_pagerduty_url_that_is_not_http", func(c *Config) { c.PagerDuty.RoutingKey, c.PagerDuty.URL = "k", "ftp://x" }, "pagerduty.url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			c.tweak(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate = %v, want an error about %s", err, c.want)
			}
		})
	}
}
