package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Teams example in README.md's Configuration section loads, the secret
// read from its file and the defaults kept.
func TestTheTeamsExampleLoads(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "teams-secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "airlock.yaml")
	yaml := `teams:
  app_id: 8c4b1d3e-0000-4000-8000-000000000000
  app_password_file: ` + secret + `
  tenant_id: 72f988bf-0000-4000-8000-000000000000
  conversation: "19:0a1b2c3d@thread.tacv2"
  users:
    3f2a1e5c-0000-4000-8000-000000000000: alice@example.com
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm := cfg.Teams
	pw, err := tm.Password()
	if err != nil || pw != "s3cret" {
		t.Fatalf("password %q, %v", pw, err)
	}
	if tm.Token() != "https://login.microsoftonline.com/72f988bf-0000-4000-8000-000000000000/oauth2/v2.0/token" ||
		tm.ServiceURL != TeamsServiceURL || tm.OpenIDMetadataURL != TeamsOpenIDMetadata ||
		tm.Users["3f2a1e5c-0000-4000-8000-000000000000"] != "alice@example.com" || cfg.Buckets.TeamsSeen == "" {
		t.Fatalf("loaded %+v", tm)
	}
}

func TestTeamsSettingsThatCannotWorkAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Teams
		want string
	}{
		{"both_a_secret_and_a_secret_file", Teams{AppID: "a", AppPassword: "x", AppPasswordFile: "/f"}, "not both"},
		{"a_user_mapped_to_nobody", Teams{Users: map[string]string{"aad-1": " "}}, "teams.users"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.t.validate()
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errors %v, want one mentioning %q", errs, tc.want)
			}
		})
	}
}
