package approval

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// pendingGauge is airlock_approvals_pending: calls waiting for a person, as
// this replica's index sees them (refreshed every sweep).
func pendingGauge(reg *prometheus.Registry) prometheus.Gauge {
	return gauge(reg, "airlock_approvals_pending", "Calls waiting for a person's decision.")
}

// bucketFillGauge is airlock_approvals_bucket_fill: the share of
// approval.max_bytes the approvals bucket holds (refreshed every sweep and
// every new call); past config.ApprovalRefusalMark new calls are refused.
func bucketFillGauge(reg *prometheus.Registry) prometheus.Gauge {
	return gauge(reg, "airlock_approvals_bucket_fill",
		"Share of approval.max_bytes the approvals bucket holds; past 0.9 new calls that need a person are canceled at once.")
}

// untrackedCounter is airlock_in_doubt_untracked_total: calls that ended
// in doubt and got no "did it happen?" task, by why: agent_share (the agent
// had approval.max_in_doubt_per_agent open tasks) or bucket_full (the
// in-doubt bucket held config.InDoubtRefusalMark of
// buckets.in_doubt_max_bytes, or all of it).
func untrackedCounter(reg *prometheus.Registry) *prometheus.CounterVec {
	return registered(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_in_doubt_untracked_total",
		Help: "Calls that ended in doubt and got no task asking a person whether they happened, by why (agent_share, bucket_full)."}, []string{"why"}))
}

func gauge(reg *prometheus.Registry, name, help string) prometheus.Gauge {
	return registered(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// registered registers c, or returns the collector of its name already
// registered: a second approval service in the same process (tests)
// shares the first one's.
func registered[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
