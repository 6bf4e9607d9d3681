package svc

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// tuneRuntime applies rt to this process, which runs services: the
// garbage collector's target (runtime.gc_percent) unless the operator set
// GOGC, which the Go runtime has applied already. Every service a process
// runs calls it with the process's one configuration, so it sets the same
// value each time.
func tuneRuntime(rt config.Runtime, log *slog.Logger) {
	_, gogc := os.LookupEnv("GOGC")
	if p, ok := gcPercent(rt, gogc); ok {
		if debug.SetGCPercent(p) != p {
			log.Debug("garbage collector target set", "gc_percent", p)
		}
	}
}

// gcPercent is the GC target to set for rt: none when GOGC is set or rt
// leaves Go's own setting.
func gcPercent(rt config.Runtime, gogcSet bool) (int, bool) {
	if gogcSet || rt.GCPercent <= 0 {
		return 0, false
	}
	return rt.GCPercent, true
}
