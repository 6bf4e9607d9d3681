package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGatewayEndpointsAreValidated(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"a_well_formed_endpoint_loads", "gateway:\n  endpoints:\n    - {name: bot, agent: bot, token: 0123456789abcdef, on_behalf_of: dana}\n", ""},
		{"a_name_outside_the_id_alphabet_is_refused", "gateway:\n  endpoints:\n    - {name: 'b o t', agent: bot}\n", "name must be"},
		{"a_reserved_agent_is_refused", "gateway:\n  endpoints:\n    - {name: bot, agent: _system}\n", "must be an agent id"},
		{"two_endpoints_on_one_path_are_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a, path: /mcp}\n    - {name: b, agent: b, path: /mcp}\n", "must start with / and be unique"},
		{"a_duplicate_name_is_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a}\n    - {name: a, agent: b}\n", "used by another endpoint"},
		{"a_short_token_is_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a, token: short}\n", "too short"},
		{"token_and_token_file_together_are_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a, token: 0123456789abcdef, token_file: /x}\n", "not both"},
		{"an_unknown_fallback_is_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a, elicitation_fallback: allow}\n", "use deny or wait"},
		{"an_answer_bound_past_ten_minutes_is_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a, answer_within: 11m}\n", "below the time your MCP clients wait"},
		{"a_negative_abandon_after_is_refused", "gateway:\n  endpoints:\n    - {name: a, agent: a, abandon_after: -1s}\n", "set 0 (keep a call nobody waits for pending"},
		{"fewer_script_places_than_run_code_agents_are_refused", "gateway:\n  run_code_max_running: 1\n  endpoints:\n    - {name: a, agent: a, run_code: {enabled: true}}\n    - {name: b, agent: b, run_code: {enabled: true}}\n", "set it to at least 2"},
		{"endpoints_of_one_agent_share_its_script_places", "gateway:\n  run_code_max_running: 1\n  endpoints:\n    - {name: a, agent: a, run_code: {enabled: true}}\n    - {name: b, agent: a, run_code: {enabled: true}}\n", ""},
		{"a_heartbeat_over_30s_is_refused", "gateway:\n  heartbeat: 45s\n", "at most 30s"},
		{"a_zero_heartbeat_is_refused", "gateway:\n  heartbeat: 0s\n", "at most 30s"},
		{"a_zero_session_timeout_is_refused", "gateway:\n  session_timeout: 0s\n", "gateway.session_timeout"},
		{"an_endpoints_profile_binds_its_agent", "gateway:\n  endpoints:\n    - {name: a, agent: a, profile: safe}\n", ""},
		{"a_conflicting_profile_binding_is_refused", "policy:\n  profiles: {a: supervised}\ngateway:\n  endpoints:\n    - {name: a, agent: a, profile: safe}\n", "an agent has one profile"},
		{"a_conflicting_person_binding_is_refused", "policy:\n  on_behalf_of: {a: erin}\ngateway:\n  endpoints:\n    - {name: a, agent: a, on_behalf_of: dana}\n", "make them agree"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "airlock.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path, nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if c.name == "an_endpoints_profile_binds_its_agent" && cfg.Policy.Profiles["a"] != "safe" {
				t.Fatalf("policy.profiles = %v", cfg.Policy.Profiles)
			}
		})
	}
}

func TestGatewayEndpointDefaults(t *testing.T) {
	e := GatewayEndpoint{Name: "bot"}
	if e.HTTPPath() != "/mcp/bot" || e.Fallback() != FallbackDeny {
		t.Fatalf("path %s fallback %s", e.HTTPPath(), e.Fallback())
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
}
