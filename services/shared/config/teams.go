package config

import (
	"fmt"
	"os"
	"strings"
)

// Teams configures the Microsoft Teams notifier (a Bot Framework bot) and
// the endpoint that receives its activities (POST /teams/messages).
type Teams struct {
	// AppID is the bot's Microsoft App ID; empty disables Teams. Inbound
	// activities must carry a token whose audience is this id.
	AppID string `yaml:"app_id"`
	// AppPassword is the bot's client secret; AppPasswordFile holds it in a
	// file instead (set one, not both).
	AppPassword     string `yaml:"app_password"`
	AppPasswordFile string `yaml:"app_password_file"`
	// TenantID is the bot's Microsoft Entra tenant (single-tenant bots);
	// empty means the Bot Framework's multi-tenant "botframework.com".
	TenantID string `yaml:"tenant_id"`
	// TokenURL is where the bot gets its token by client credentials.
	// Default: https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token.
	TokenURL string `yaml:"token_url"`
	// ServiceURL is the Bot Connector base the cards are posted to (Teams
	// gives it in every activity; it is per region).
	ServiceURL string `yaml:"service_url"`
	// Conversation receives calls whose policy says just "teams" in
	// notify; "teams:<conversation id>" names the conversation itself.
	Conversation string `yaml:"conversation"`
	// OpenIDMetadataURL is where the keys that sign inbound activities are
	// found (the Bot Framework's by default; tests point it at their own).
	OpenIDMetadataURL string `yaml:"openid_metadata_url"`
	// Users maps Teams users (their Entra object id, activity.from.aadObjectId,
	// or their Teams id, activity.from.id) to airlock principals: the same
	// names as slack.users and single sign-on. A Teams user not listed here
	// cannot decide anything; the attempt is refused and recorded.
	Users map[string]string `yaml:"users"`
}

// Bot Framework defaults.
const (
	TeamsServiceURL     = "https://smba.trafficmanager.net/teams/"
	TeamsOpenIDMetadata = "https://login.botframework.com/v1/.well-known/openidconfiguration"
	teamsDefaultTenant  = "botframework.com"
)

func defaultTeams() Teams {
	return Teams{ServiceURL: TeamsServiceURL, OpenIDMetadataURL: TeamsOpenIDMetadata}
}

// Token returns the token endpoint: TokenURL, or the tenant's.
func (t Teams) Token() string {
	if t.TokenURL != "" {
		return t.TokenURL
	}
	tenant := t.TenantID
	if tenant == "" {
		tenant = teamsDefaultTenant
	}
	return "https://login.microsoftonline.com/" + tenant + "/oauth2/v2.0/token"
}

// Password returns the bot's client secret from AppPassword or the file
// AppPasswordFile names.
func (t Teams) Password() (string, error) {
	if t.AppPasswordFile == "" {
		if t.AppPassword == "" {
			return "", fmt.Errorf("teams.app_password is empty: set it, or teams.app_password_file, to the bot's client secret (Azure portal → the bot's app registration → Certificates & secrets)")
		}
		return t.AppPassword, nil
	}
	b, err := os.ReadFile(t.AppPasswordFile)
	if err != nil {
		return "", fmt.Errorf("teams.app_password_file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("teams.app_password_file %s is empty: write the bot's client secret in it", t.AppPasswordFile)
	}
	return s, nil
}

func (t Teams) validate() []error {
	var errs []error
	if t.AppPassword != "" && t.AppPasswordFile != "" {
		errs = append(errs, fmt.Errorf("teams: set app_password or app_password_file, not both"))
	}
	for id, principal := range t.Users {
		if strings.TrimSpace(id) == "" || strings.TrimSpace(principal) == "" {
			errs = append(errs, fmt.Errorf("teams.users: %q → %q: both the Teams user and the principal must be named", id, principal))
		}
	}
	return errs
}
