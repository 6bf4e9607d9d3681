package approval

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// pendingGauge is airlock_approvals_pending: calls waiting for a person, as
// this replica's index sees them (refreshed every sweep).
func pendingGauge(reg *prometheus.Registry) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "airlock_approvals_pending", Help: "Calls waiting for a person's decision.",
	})
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
