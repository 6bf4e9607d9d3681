package config

// Slack configures the Slack notifier and interactions endpoint.
type Slack struct {
	// BotToken (xoxb-...); empty disables Slack.
	BotToken string `yaml:"bot_token"`
	// SigningSecret verifies interaction posts.
	SigningSecret string `yaml:"signing_secret"`
	// APIURL overrides the Slack Web API base (tests point it at a fake).
	APIURL string `yaml:"api_url"`
	// Users maps Slack user ids to airlock principals.
	Users map[string]string `yaml:"users"`
}

func defaultSlack() Slack { return Slack{} }
