package config

import (
	"fmt"
	"strings"
)

// Slack configures the Slack notifier and interactions endpoint.
type Slack struct {
	// BotToken (xoxb-...); empty disables Slack.
	BotToken string `yaml:"bot_token"`
	// SigningSecret verifies interaction posts (Slack app → Basic Information
	// → Signing Secret). Required where the interactions endpoint is served.
	SigningSecret string `yaml:"signing_secret"`
	// APIURL overrides the Slack Web API base (tests point it at a fake).
	APIURL string `yaml:"api_url"`
	// Channel receives calls whose policy says just "slack" in notify;
	// "slack:#ops" (or "slack:C0123456") names the channel itself.
	Channel string `yaml:"channel"`
	// Users maps Slack user ids (U0123456) to airlock principals ("alice").
	// A Slack user not listed here cannot decide anything; the attempt is
	// refused and recorded as unauthorized_attempt. Whether a mapped
	// principal may decide a given call is the approval service's decision.
	Users map[string]string `yaml:"users"`
}

func defaultSlack() Slack { return Slack{Channel: "#airlock"} }

// validate refuses Slack settings that cannot work. A bot token without a
// signing secret is allowed: a process that only posts cards (the approval
// service) does not verify clicks; the interactions endpoint refuses to
// mount without the secret and logs why.
func (s Slack) validate() []error {
	var errs []error
	for id, principal := range s.Users {
		if !strings.HasPrefix(id, "U") && !strings.HasPrefix(id, "W") {
			errs = append(errs, fmt.Errorf("slack.users: %q is not a Slack user id (U... or W...; Slack shows it under the profile's \"Copy member ID\")", id))
		}
		if strings.TrimSpace(principal) == "" {
			errs = append(errs, fmt.Errorf("slack.users: Slack user %s maps to an empty principal", id))
		}
	}
	return errs
}
