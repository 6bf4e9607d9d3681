package main

import (
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
	return out
}
