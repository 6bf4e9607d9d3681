package main

import (
	"github.com/airlock-gate/airlock/services/email"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/lognotify"
	"github.com/airlock-gate/airlock/services/shared/notify/pagerduty"
	"github.com/airlock-gate/airlock/services/shared/notify/webhook"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// notifiers builds the process's notification channels from configuration:
// each one is told about every new pending call it wants and updated with
// the outcome by the approval service.
func notifiers(d svc.Deps) []notify.Notifier {
	var out []notify.Notifier
	if d.Config.Approval.LogNotifier {
		out = append(out, lognotify.New(d.Log))
	}
	out = append(out, slackNotifiers(d)...)
	return append(out, onCallNotifiers(d)...)
}

// onCallNotifiers are the email, webhook and PagerDuty channels that are
// configured (email.smtp_host, webhooks, pagerduty.routing_key). A channel
// that cannot start is left out with the reason logged as an error, rather
// than stopping the approval service.
func onCallNotifiers(d svc.Deps) []notify.Notifier {
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
