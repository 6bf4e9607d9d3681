package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLoadLayersFileThenEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.yaml")
	yaml := "nats:\n  url: nats://file:4222\nstream:\n  max_age: 48h\npolicy:\n  profiles:\n    bot: readonly\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, []string{
		"AIRLOCK_NATS_URL=nats://env:4222",
		"AIRLOCK_CLICKHOUSE_DSN=clickhouse://127.0.0.1:9000/airlock",
		"AIRLOCK_LIMITS_MAX_REQUEST_BYTES=1000",
		"AIRLOCK_APPROVAL_DEFAULT_TIMEOUT=2m",
		"AIRLOCK_NATS_TLS_CA_FILE=/etc/airlock/nats-tls/ca.crt",
		"UNRELATED=1",
		// Clients read names of their own; only a near miss of a setting's is refused.
		"AIRLOCK_URL=http://127.0.0.1:8080", "AIRLOCK_TOKEN=t",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"env_beats_file", cfg.NATS.URL, "nats://env:4222"},
		{"file_beats_default", cfg.Stream.MaxAge, 48 * time.Hour},
		{"env_sets_top_level_section", cfg.ClickHouse.DSN, "clickhouse://127.0.0.1:9000/airlock"},
		{"env_sets_integers", cfg.Limits.MaxRequestBytes, 1000},
		{"env_sets_durations", cfg.Approval.DefaultTimeout, 2 * time.Minute},
		{"env_sets_nested_sections", cfg.NATS.TLS.CAFile, "/etc/airlock/nats-tls/ca.crt"},
		{"file_sets_maps", cfg.Policy.Profiles["bot"], "readonly"},
		{"untouched_keeps_default", cfg.Stream.DuplicateWindow, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestLoadRefusesMistakes(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"unknown_key_names_its_section_and_the_keys_it_has", "nats:\n  ulr: x\n", nil, `line 2: nats has no setting "ulr" (a typo? it has url, credentials,`},
		{"unknown_top_level_key_lists_the_sections", "htp:\n  addr: x\n", nil, `line 1: there is no top-level setting "htp" (a typo? the top level has nats, stream,`},
		{"unknown_key_in_a_list_item_names_the_list", "webhooks:\n  - {nme: a}\n", nil, `webhooks[] has no setting "nme" (a typo? it has name, url, secret)`},
		{"unknown_key_deep_down_names_its_whole_path", "console:\n  webpush:\n    subjet: x\n", nil, `line 3: console.webpush has no setting "subjet"`},
		{"short_duplicate_window", "stream:\n  duplicate_window: 10s\n", nil, "at least 2m"},
		{"bad_env_duration", "", []string{"AIRLOCK_STREAM_MAX_AGE=soon"}, "AIRLOCK_STREAM_MAX_AGE"},
		{"env_name_with_letters_swapped", "", []string{"AIRLOCK_CLICKHOUSE_DNS=clickhouse://db:9000/airlock"}, "AIRLOCK_CLICKHOUSE_DNS is not a setting airlock knows: did you mean AIRLOCK_CLICKHOUSE_DSN?"},
		{"env_name_with_a_letter_more", "", []string{"AIRLOCK_NATS_URLS=nats://a:4222"}, "did you mean AIRLOCK_NATS_URL?"},
		{"env_name_with_a_letter_less", "", []string{"AIRLOCK_SECURITY_DECISION_KY=00"}, "did you mean AIRLOCK_SECURITY_DECISION_KEY?"},
		{"bad_sync", "dev:\n  sync: sometimes\n", nil, "dev.sync"},
		{"takeover_within_a_reconnect", "approval:\n  takeover_after: 900ms\n", nil, "approval.takeover_after is 900ms: set at least twice nats.reconnect_wait (1s)"},
		{"approvals_bucket_too_small_for_its_headroom", "approval:\n  max_bytes: 1048576\n", nil, "approval.max_bytes (1048576) must be at least 4194304 (16 times limits.max_request_bytes)"},
		{"an_agents_approval_bytes_under_four_requests", "approval:\n  max_bytes_per_agent: 1048575\n", nil, "approval.max_bytes_per_agent (1048575) must be between 1048576 (4 times limits.max_request_bytes) and approval.max_bytes (1073741824)"},
		{"an_agents_approval_bytes_over_the_bucket", "approval:\n  max_bytes: 4194304\n  max_bytes_per_agent: 4194305\n", nil, "approval.max_bytes_per_agent (4194305) must be between"},
		{"sso_without_client_id", "console:\n  oidc: {issuer: https://login.example.com, groups: {eng: {roles: [reviewer]}}}\n", nil, "console.oidc.client_id"},
		{"sso_without_any_group", "console:\n  oidc: {issuer: https://login.example.com, client_id: c}\n", nil, "console.oidc.groups is empty"},
		{"sso_with_an_unknown_role", "console:\n  oidc: {issuer: https://login.example.com, client_id: c, groups: {eng: {roles: [boss]}}}\n", nil, `unknown role "boss"`},
		{"sso_issuer_not_a_url", "console:\n  oidc: {issuer: login.example.com, client_id: c, groups: {eng: {roles: [reviewer]}}}\n", nil, "console.oidc.issuer"},
		{"passwords_off_without_sso", "console:\n  oidc: {disable_passwords: true}\n", nil, "nobody could sign in"},
		{"tls_cert_without_its_key", "nats:\n  tls: {cert_file: client.crt}\n", nil, "nats.tls.cert_file is set without nats.tls.key_file: give the private key"},
		{"an_agents_intake_share_over_a_sixteenth", "intake:\n  max_pending_per_agent: 1000\n", nil,
			"intake.max_pending_per_agent (1000) requests of up to 266240 bytes (limits.max_request_bytes and its headers) let one agent hold 266240000 bytes of the intake, over intake.max_bytes / 16 (67108864): 4 such agents would fill it"},
		{"no_agent_connection", "limits:\n  agent_connections: 0\n", nil, "limits.agent_connections (0) must be at least 1"},
		{"hook_snapshots_that_cannot_keep_one", "hooks:\n  snapshots:\n    max_bytes: 1048576\n    max_total_bytes: 1024\n", nil,
			"hooks.snapshots (max_bytes 1048576, max_total_bytes 1024, keep 168h0m0s) must keep at least one snapshot"},
		{"fewer_agent_subscriptions_than_the_sdks_hold", "limits:\n  agent_subscriptions: 8\n", nil, "limits.agent_subscriptions (8) must be at least 16"},
		{"no_room_for_one_agent_beside_the_services", "limits:\n  bus_connections: 300\n  agent_connections: 64\n  service_connections: 256\n", nil,
			"limits.bus_connections (300) must hold limits.service_connections (256) and at least one agent's limits.agent_connections (64)"},
		{"no_agent_call_budget", "limits:\n  agent_calls_per_minute: 0\n", nil, "limits.agent_calls_per_minute (0) must be at least 1"},
		{"agent_byte_budget_under_one_request", "limits:\n  agent_request_bytes_per_minute: 1000\n", nil,
			"limits.agent_request_bytes_per_minute (1000) must be at least limits.max_request_bytes (262144)"},
		{"no_http_read_timeout", "http:\n  read_timeout: 0s\n", nil, "http.read_timeout (0s), http.write_timeout (30s) and http.idle_timeout (2m0s) must be positive"},
		{"no_http_connection", "http:\n  max_connections: 0\n", nil, "http.max_connections (0) must be at least 1"},
		{"tls_key_without_its_cert", "", []string{"AIRLOCK_NATS_TLS_KEY_FILE=client.key"}, "nats.tls.key_file is set without nats.tls.cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// The single sign-on example in README.md's Configuration section loads.
func TestTheSingleSignOnExampleLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.yaml")
	yaml := `http:
  public_url: https://airlock.example.com
console:
  oidc:
    issuer: https://login.example.com/realms/eng
    client_id: airlock-console
    client_secret: "..."
    scopes: [email, profile, groups]
    name_claim: email
    groups_claim: groups
    groups:
      eng-oncall: {roles: [reviewer], groups: [reviewers, oncall]}
      security:   {roles: [auditor]}
      platform-admins: {roles: [admin]}
    allowed_domains: [example.com]
    display_name: Example SSO
    disable_passwords: true
slack:
  users: {U0123ABCD: alice@example.com}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, []string{"AIRLOCK_CONSOLE_OIDC_CLIENT_SECRET=from-the-environment"})
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Console.OIDC
	if !o.Enabled() || o.ClientSecret != "from-the-environment" || o.Groups["eng-oncall"].Groups[1] != "oncall" || !o.DisablePasswords {
		t.Fatalf("loaded %+v", o)
	}
}

func TestMissingExplicitFileIsAnError(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil); err == nil {
		t.Fatal("a missing config file was accepted")
	}
}

func TestMaxPreviewBytesIsBoundedSoAPendingRecordFitsOneMessage(t *testing.T) {
	tests := []struct {
		name  string
		bytes int
		ok    bool
	}{
		{"the_default_is_accepted", Default().Executor.MaxPreviewBytes, true},
		{"the_limit_is_accepted", MaxPreviewBytesLimit, true},
		{"one_byte_over_the_limit_is_refused", MaxPreviewBytesLimit + 1, false},
		{"a_megabyte_is_refused", 1 << 20, false},
		{"under_a_kilobyte_is_refused", 1023, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Default()
			cfg.Executor.MaxPreviewBytes = tc.bytes
			err := cfg.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("max_preview_bytes %d: Validate() = %v, want ok=%v", tc.bytes, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "set it to at most 262144") {
				t.Fatalf("the refusal does not say what to do: %v", err)
			}
		})
	}
}

// The defaults bound what one agent can make the bus hold: its share of
// the intake in bytes (intake.max_pending_per_agent of its largest
// request) is at most a sixteenth of the intake (R9 F0: 1,000 of 1 MiB
// were 98% of it), and each of its connections holds at most twice the
// subscriptions the SDKs need (R9 F2: 512, each a copy of every message on
// its subject, when the SDKs held one per awaited call).
func TestTheDefaultsBoundAnAgentsShareOfTheBus(t *testing.T) {
	c := Default()
	if share := c.Intake.MaxPendingPerAgent * int64(c.AgentPublishBytes()); share > c.Intake.MaxBytes/IntakeAgentsSharing {
		t.Errorf("one agent's intake share is %d bytes, over intake.max_bytes / %d (%d)", share, IntakeAgentsSharing, c.Intake.MaxBytes/IntakeAgentsSharing)
	}
	if got := c.Limits.AgentSubscriptions; got < SDKSubscriptions || got > 2*SDKSubscriptions {
		t.Errorf("limits.agent_subscriptions is %d, want between what the SDKs need (%d) and twice that", got, SDKSubscriptions)
	}
}

func TestApprovalBytesPerAgent(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxBytes, perAgent int64
		want               int64
	}{
		{"default: a sixteenth of the bucket", 1 << 30, 0, 64 << 20},
		{"a small bucket: still four of the largest call", 4 << 20, 0, 1 << 20},
		{"set", 1 << 30, 8 << 20, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Approval.MaxBytes, c.Approval.MaxBytesPerAgent = tc.maxBytes, tc.perAgent
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := c.ApprovalBytesPerAgent(); got != tc.want {
				t.Fatalf("ApprovalBytesPerAgent() = %d; want %d", got, tc.want)
			}
		})
	}
}
