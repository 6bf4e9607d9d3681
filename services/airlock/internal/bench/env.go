package bench

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// Env is what the benchmarks take from the airlock command that runs them.
type Env struct {
	// Load reads the configuration as the command's flags and environment give it.
	Load func() (config.Config, error)
	// LogLevelSet reports whether --log-level was given (the benchmarks
	// quiet the services' logs otherwise).
	LogLevelSet func() bool
}

// ErrGoalMissed ends a benchmark that printed its figures and missed a goal:
// the command exits 1 without another message.
var ErrGoalMissed = errors.New("a benchmark goal was missed")

// StartCPUProfile writes a CPU profile to path until the returned stop is called.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
