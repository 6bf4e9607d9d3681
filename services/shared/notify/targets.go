package notify

import (
	"net/url"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// EscalatePrefix marks a notify entry that applies only once the call has
// escalated: "escalate:pagerduty" pages on-call when the rule's
// escalate_after passes, not at once.
const EscalatePrefix = "escalate:"

// Targets lists what rec's notify entries route to the channel called
// channel, in order, without repeats: "" for a bare entry ("email"), the
// rest for "channel:target" ("webhook:oncall" → "oncall"). Entries prefixed
// with EscalatePrefix count only once rec has escalated. Spaces around an
// entry or a target are ignored.
func Targets(rec *airlockv1.ApprovalRecord, channel string) []string {
	var out []string
	seen := map[string]bool{}
	for _, entry := range rec.GetDecision().GetNotify() {
		entry = strings.TrimSpace(entry)
		if rest, ok := strings.CutPrefix(entry, EscalatePrefix); ok {
			if !rec.GetEscalated() {
				continue
			}
			entry = strings.TrimSpace(rest)
		}
		var target string
		switch {
		case entry == channel:
		case strings.HasPrefix(entry, channel+":"):
			target = strings.TrimSpace(strings.TrimPrefix(entry, channel+":"))
			if target == "" {
				continue
			}
		default:
			continue
		}
		if !seen[target] {
			seen[target] = true
			out = append(out, target)
		}
	}
	return out
}

// ConsoleURL is the console page of a call under publicURL (config
// http.public_url): what every channel links to.
func ConsoleURL(publicURL, agent, callID string) string {
	return strings.TrimRight(publicURL, "/") + "/calls/" + url.PathEscape(agent) + "/" + url.PathEscape(callID)
}
