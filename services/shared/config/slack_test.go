package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlackSettings(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, yaml string
		env        []string
		want       string // "" means accepted
	}{
		{"no_token_means_slack_is_off", "", nil, ""},
		{"token_and_secret_from_the_environment", "slack:\n  users:\n    U0123: alice\n",
			[]string{"AIRLOCK_SLACK_BOT_TOKEN=xoxb-1", "AIRLOCK_SLACK_SIGNING_SECRET=s"}, ""},
		{"token_without_signing_secret_is_allowed_for_a_posting_only_process", "slack:\n  bot_token: xoxb-1\n", nil, ""},
		{"user_ids_must_be_slack_ids", "slack:\n  bot_token: xoxb-1\n  signing_secret: s\n  users:\n    alice@example.com: alice\n", nil, "not a Slack user id"},
		{"principals_must_not_be_empty", "slack:\n  bot_token: xoxb-1\n  signing_secret: s\n  users:\n    U0123: \"\"\n", nil, "empty principal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path, tt.env)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cfg.Slack.Channel != "#airlock" {
					t.Fatalf("default channel is %q", cfg.Slack.Channel)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}
