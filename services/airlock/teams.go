package main

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/svc"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// teamsNotifiers returns the Teams notifier when teams.app_id is set. If it
// cannot start (no secret, bucket missing), the reason is logged as an
// error and Teams is left out rather than stopping the approval service.
func teamsNotifiers(d svc.Deps) []notify.Notifier {
	if !airlockteams.Enabled(d) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := airlockteams.NewNotifier(ctx, d)
	if err != nil {
		d.Log.Error("Teams notifier not started: pending calls will not be posted to Teams", "err", err)
		return nil
	}
	return []notify.Notifier{n}
}

// mountTeams serves the bot's messaging endpoint (POST /teams/messages)
// when teams.app_id is set; if the handler cannot start, the route is not
// mounted and the reason is logged as an error.
func mountTeams(e *echo.Echo, d svc.Deps, opts ...airlockteams.Option) {
	if !airlockteams.Enabled(d) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := airlockteams.NewActivities(ctx, d, opts...)
	if err != nil {
		d.Log.Error("Teams messaging endpoint not mounted: actions on Teams cards will fail", "err", err)
		return
	}
	e.POST(airlockteams.MessagesPath, echo.WrapHandler(h))
}
