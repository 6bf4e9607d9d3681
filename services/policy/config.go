package policy

import (
	"context"
	"time"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// streamUseEvery is how often the policy service reads the events stream's
// use: it fills over hours or days, and one read is one JetStream request.
const streamUseEvery = time.Minute

// NewFromConfig builds the policy service as configured: the Rego engine
// (cfg.Policy.Dir or the built-in default policy, run-time rules from the
// policy bucket, profile bindings from cfg.Policy.Profiles, standing grants)
// and, because the engine can be edited, the rules endpoints. It watches
// the events stream's use (bus.StreamWatch): at stream.max_bytes the
// stream refuses the requests this service records, so it warns before,
// and its process's /healthz reads the watch (EventsStreamUse).
func NewFromConfig(ctx context.Context, deps svc.Deps) (*Service, error) {
	e, err := NewEngine(ctx, deps)
	if err != nil {
		return nil, err
	}
	watch := bus.NewStreamWatch(deps.JS, deps.Config.Stream.Name, deps.Log, deps.Metrics)
	s, err := New(deps, e, e.Serve, func(ctx context.Context, ready func()) error { return watch.Run(ctx, streamUseEvery, ready) })
	if err != nil {
		return nil, err
	}
	s.streamWatch = watch
	return s, nil
}

// EventsStreamUse is the events stream's use as the service last read it
// (every minute, every few seconds near its bound); false before the first
// reading, or for a service built by New, which watches nothing. It asks
// JetStream nothing: /healthz calls it on every request.
func (s *Service) EventsStreamUse() (bus.StreamUse, bool) {
	if s.streamWatch == nil {
		return bus.StreamUse{}, false
	}
	return s.streamWatch.Last()
}
