package svc

import (
	"testing"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// A process running services collects garbage at runtime.gc_percent,
// unless the operator set GOGC or the setting leaves Go's own.
func TestTheGCTargetIsTheConfiguredOneUnlessGOGCIsSet(t *testing.T) {
	for _, tt := range []struct {
		name    string
		percent int
		gogcSet bool
		want    int
		set     bool
	}{
		{"the_default", config.Default().Runtime.GCPercent, false, 400, true},
		{"a_configured_target", 150, false, 150, true},
		{"gogc_set_wins", 150, true, 0, false},
		{"zero_leaves_gos_own", 0, false, 0, false},
		{"negative_leaves_gos_own", -1, false, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, set := gcPercent(config.Runtime{GCPercent: tt.percent}, tt.gogcSet)
			if got != tt.want || set != tt.set {
				t.Fatalf("gcPercent(%d, GOGC set %v) = %d, %v; want %d, %v", tt.percent, tt.gogcSet, got, set, tt.want, tt.set)
			}
		})
	}
}
