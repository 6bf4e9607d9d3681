// Package channels builds the notification channels that more than one
// command of the airlock binary starts (the approval service, airlock bench).
package channels

import (
	"github.com/airlock-gate/airlock/services/email"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/pagerduty"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// OnCall are the email, webhook and PagerDuty channels that are
// configured (email.smtp_host, webhooks, pagerduty.routing_key). A channel
// that cannot start is left out with the reason logged as an error, rather
// than stopping the approval service.
func OnCall(d svc.Deps) []notify.Notifier {
	var out []notify.Notifier
	if email.Enabled(d.Config) {
		n, err := email.New(d.Config, d.Log)
		if err != nil {
			d.Log.Error("email notifier not started: pending calls will not be mailed", "err", err)
		} else {
			out = append(out, n)
		}
	}
	for _, ep := range d.Config.Webhooks {
		out = append(out, webhook.New(ep, d.Config.HTTP.PublicURL, nil))
	}
	if d.Config.PagerDuty.RoutingKey != "" {
		out = append(out, pagerduty.New(d.Config.PagerDuty, d.Config.HTTP.PublicURL, nil))
	}
	return out
}
