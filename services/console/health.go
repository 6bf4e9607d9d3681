package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/airlock-gate/airlock/services/shared/bus"
)

// healthView is what the health page shows: every micro service instance
// that answered $SRV.STATS, and the durable consumers of the events stream
// (how far behind each event-driven service is).
type healthView struct {
	NATS      string
	Services  []micro.Stats
	Consumers []consumerView
	Missing   []string
	// Stream is the events stream's use of stream.max_bytes (zero when it
	// could not be read); at the bound airlock decides no new call.
	Stream bus.StreamUse
}

type consumerView struct {
	Name                           string
	Pending, AckPending, Redeliver uint64
	LastActive                     time.Time
	Waiting                        int
}

// expectedServices are micro services the console relies on; the page says
// when one does not answer.
var expectedServices = []string{"approval"}

// microStats asks every micro service for its stats and collects the
// replies that arrive within wait.
func microStats(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]micro.Stats, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.STATS", inbox, nil); err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	deadline := time.Now().Add(wait)
	var out []micro.Stats
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		msg, err := sub.NextMsg(left)
		if err != nil {
			break // timeout: everyone who answers in time has
		}
		var s micro.Stats
		if json.Unmarshal(msg.Data, &s) == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (con *Console) health(ctx context.Context) (*healthView, error) {
	h := &healthView{NATS: con.nc.Status().String()}
	stats, err := microStats(ctx, con.nc, con.opts.HealthWait)
	if err != nil {
		return nil, err
	}
	h.Services = stats
	for _, want := range expectedServices {
		found := false
		for _, s := range stats {
			found = found || s.Name == want
		}
		if !found {
			h.Missing = append(h.Missing, want)
		}
	}
	stream, err := con.js.Stream(ctx, con.cfg.Stream.Name)
	if err == nil {
		h.Stream = bus.StreamUseOf(stream.CachedInfo())
		lister := stream.ListConsumers(ctx)
		for ci := range lister.Info() {
			if ci.Config.Durable == "" {
				continue // ordered consumers of Await calls and inboxes come and go
			}
			v := consumerView{Name: ci.Name, Pending: ci.NumPending, AckPending: uint64(ci.NumAckPending), Redeliver: uint64(ci.NumRedelivered), Waiting: ci.NumWaiting}
			if ci.Delivered.Last != nil {
				v.LastActive = *ci.Delivered.Last
			}
			h.Consumers = append(h.Consumers, v)
		}
	}
	return h, nil
}

func (con *Console) healthPage(c echo.Context) error {
	h, err := con.health(c.Request().Context())
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "health", &healthPageView{layout: layout{Title: "Health"}, Health: h})
}
