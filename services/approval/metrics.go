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

func gauge(reg *prometheus.Registry, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	if err := reg.Register(g); err != nil {
		// A second approval service in the same process (tests) shares the first one's gauge.
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(prometheus.Gauge); ok {
				return existing
			}
		}
	}
	return g
}
