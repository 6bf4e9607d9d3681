package main

import (
	"context"
	"time"

	"github.com/airlock-gate/airlock/services/airlock/internal/channels"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/lognotify"
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
	out = append(out, teamsNotifiers(d)...)
	out = append(out, pushNotifiers(d)...)
	return append(out, channels.OnCall(d)...)
}

// pushNotifiers returns the Web Push notifier when console.webpush is
// configured. Like Slack's, a failure to build it is logged as an error
// and leaves the channel out rather than stopping the approval service.
func pushNotifiers(d svc.Deps) []notify.Notifier {
	if !d.Config.Console.WebPush.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := console.NewPushNotifier(ctx, d)
	if err != nil {
		d.Log.Error("Web Push notifier not started: no device will be told of pending calls", "err", err)
		return nil
	}
	return []notify.Notifier{n}
}
