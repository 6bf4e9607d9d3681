package svc

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// tuneRuntime applies rt to this process, which runs services: the
// garbage collector's target (runtime.gc_percent) unless the operator set
// GOGC, which the Go runtime has applied already, and a memory limit of
// 90% of the container's unless the operator set GOMEMLIMIT. Every service
// a process runs calls it with the process's one configuration, so it sets
// the same values each time.
func tuneRuntime(rt config.Runtime, log *slog.Logger) {
	_, gogc := os.LookupEnv("GOGC")
	if p, ok := gcPercent(rt, gogc); ok {
		if debug.SetGCPercent(p) != p {
			log.Debug("garbage collector target set", "gc_percent", p)
		}
	}
	_, gomemlimit := os.LookupEnv("GOMEMLIMIT")
	if m, ok := memoryLimit(gomemlimit, os.ReadFile); ok {
		if debug.SetMemoryLimit(m.limit) != m.limit {
			log.Info("Go memory limit set to 90% of the container's (GOMEMLIMIT, when set, wins)",
				"memory_limit_bytes", m.limit, "container_limit_bytes", m.cgroup, "from", m.file)
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

// The files that hold this process's cgroup memory limit, v2's then v1's.
const (
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// noMemoryLimit is where a cgroup v1 limit means none: v1 writes
// "unlimited" as the largest page multiple below 2^63.
const noMemoryLimit = 1 << 62

// goMemoryLimit is the memory limit to set for the Go runtime, and the
// cgroup limit it comes from.
type goMemoryLimit struct {
	limit, cgroup int64
	file          string
}

// memoryLimit is the Go memory limit to set: 90% of the process's cgroup
// memory limit (cgroup v2, else v1, as read reads them), none when
// GOMEMLIMIT is set, the cgroup has no limit ("max", or v1's huge value)
// or neither file reads as one.
func memoryLimit(gomemlimitSet bool, read func(name string) ([]byte, error)) (goMemoryLimit, bool) {
	if gomemlimitSet {
		return goMemoryLimit{}, false
	}
	for _, file := range []string{cgroupV2MemoryMax, cgroupV1MemoryMax} {
		data, err := read(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return goMemoryLimit{}, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || n <= 0 || n >= noMemoryLimit {
			return goMemoryLimit{}, false // "max", or no limit to speak of
		}
		return goMemoryLimit{limit: n - n/10, cgroup: n, file: file}, true
	}
	return goMemoryLimit{}, false
}
