package grant

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		g    *airlockv1.StandingGrant
		want string
		live bool
	}{
		{"an_unlimited_grant_is_active", &airlockv1.StandingGrant{}, "active", true},
		{"a_revoked_grant_names_who_revoked_it", &airlockv1.StandingGrant{Revoked: true, RevokedBy: &airlockv1.Actor{Id: "bob"}}, "revoked by bob", false},
		{"a_grant_expires_at_its_expiry_instant", &airlockv1.StandingGrant{ExpiresAt: timestamppb.New(now)}, "expired", false},
		{"a_grant_lives_until_its_expiry", &airlockv1.StandingGrant{ExpiresAt: timestamppb.New(now.Add(time.Second))}, "active", true},
		{"a_limited_grant_without_uses_is_used_up", &airlockv1.StandingGrant{LimitedUses: true}, "used up", false},
		{"a_limited_grant_with_a_use_is_active", &airlockv1.StandingGrant{LimitedUses: true, UsesLeft: 1}, "active", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, live := Status(tt.g, now)
			if got != tt.want || live != tt.live || Live(tt.g, now) != tt.live {
				t.Errorf("Status = %q %v, want %q %v", got, live, tt.want, tt.live)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	multi := structpb.NewStringValue("line one\nline \"two\"")
	tests := []struct {
		name string
		g    *airlockv1.StandingGrant
		want []string
	}{
		{"pinned_values_read_as_exact_json_including_newlines",
			&airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "write_file", OnlyListedArguments: true, LimitedUses: true, UsesLeft: 3,
				ArgumentValues: map[string]*structpb.Value{"/content": multi, "/mode": structpb.NewNumberValue(420)}},
			[]string{`agent bot may run demo__write_file without asking when /content is exactly "line one\nline \"two\"" and /mode is exactly 420 and no other argument is given`, "3 use(s)", "never expires"}},
		{"a_glob_says_matches_and_other_arguments_stay_open",
			&airlockv1.StandingGrant{AgentId: "bot", Server: "fs", Tool: "read_file", ArgumentGlobs: map[string]string{"/path": "/tmp/**"}},
			[]string{"when /path matches /tmp/**; any other argument may take any value", "unlimited uses"}},
		{"a_range_reads_as_its_two_ends_in_their_shortest_exact_form",
			&airlockv1.StandingGrant{AgentId: "bot", Server: "cloud", Tool: "resize", OnlyListedArguments: true,
				ArgumentRanges: map[string]*airlockv1.NumberRange{"/size": {Min: 0.25, Max: 4096}, "/replicas": {Min: -1, Max: 1e21}}},
			[]string{"when /replicas is a number from -1 to 1e+21 and /size is a number from 0.25 to 4096 and no other argument is given"}},
		{"no_constraint_says_any_arguments",
			&airlockv1.StandingGrant{Tool: "echo", ExpiresAt: timestamppb.New(time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC))},
			[]string{"any agent may run echo without asking with any arguments", "until 2026-01-02 15:04 UTC"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Describe(tt.g)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Describe = %q\nwant it to contain %q", got, w)
				}
			}
		})
	}
}
