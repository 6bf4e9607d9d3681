package main

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/svc"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// slackNotifiers returns the Slack notifier when slack.bot_token is set.
// It cannot fail in practice (the bus is provisioned before services are
// built); if it does, the reason is logged as an error and Slack is left out
// rather than stopping the approval service.
func slackNotifiers(d svc.Deps) []notify.Notifier {
	if !airlockslack.Enabled(d) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := airlockslack.NewNotifier(ctx, d)
	if err != nil {
		d.Log.Error("Slack notifier not started: pending calls will not be posted to Slack", "err", err)
		return nil
	}
	return []notify.Notifier{n}
}

// mountSlack serves Slack's interactivity request URL (POST
// /slack/interactions) in a process configured with the signing secret. It
// needs the bot token too (to redraw cards and open modals); without it the
// route is not mounted and the reason is logged as an error.
func mountSlack(e *echo.Echo, d svc.Deps, opts ...airlockslack.Option) {
	if d.Config.Slack.SigningSecret == "" {
		if airlockslack.Enabled(d) {
			d.Log.Info("Slack clicks are not served by this process: set slack.signing_secret where /slack/interactions is reachable")
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := airlockslack.NewInteractions(ctx, d, opts...)
	if err != nil {
		d.Log.Error("Slack interactions endpoint not mounted: clicks in Slack will fail", "err", err)
		return
	}
	e.POST(airlockslack.InteractionsPath, echo.WrapHandler(h))
}
