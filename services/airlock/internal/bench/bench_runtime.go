package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// runtimeSpan is what the Go runtime did over a stretch of a bench: how
// often it collected, what collecting cost and how long it stopped the
// world — what a figure that swings between runs needs beside it.
type runtimeSpan struct {
	Seconds  float64 `json:"seconds"`
	GCCycles uint64  `json:"gc_cycles"`
	GCCPUms  float64 `json:"gc_cpu_ms"`
	// GCCPUShare: GC CPU over the CPU the process used in the span.
	GCCPUShare float64 `json:"gc_cpu_share"`
	PauseP50us float64 `json:"gc_pause_p50_us"`
	PauseMaxUs float64 `json:"gc_pause_max_us"`
	// HeapMB: the live heap after the last collection of the span.
	HeapMB float64 `json:"heap_mb"`

	t0      time.Time
	samples []metrics.Sample
}

var runtimeSpanMetrics = []string{
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
	"/sched/pauses/total/gc:seconds",
	"/gc/heap/live:bytes",
}

func readRuntime() []metrics.Sample {
	s := make([]metrics.Sample, len(runtimeSpanMetrics))
	for i, name := range runtimeSpanMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

func startRuntimeSpan() *runtimeSpan {
	return &runtimeSpan{t0: time.Now(), samples: readRuntime()}
}

// end returns the span's figures from its start to now.
func (r *runtimeSpan) end() runtimeSpan {
	now := readRuntime()
	out := runtimeSpan{Seconds: time.Since(r.t0).Seconds()}
	out.GCCycles = now[0].Value.Uint64() - r.samples[0].Value.Uint64()
	gc := now[1].Value.Float64() - r.samples[1].Value.Float64()
	// total counts every P's time, idle included: the process used the rest.
	all := now[2].Value.Float64() - r.samples[2].Value.Float64() - (now[3].Value.Float64() - r.samples[3].Value.Float64())
	out.GCCPUms = gc * 1e3
	if all > 0 {
		out.GCCPUShare = gc / all
	}
	out.PauseP50us, out.PauseMaxUs = histogramSince(r.samples[4].Value.Float64Histogram(), now[4].Value.Float64Histogram())
	out.HeapMB = float64(now[5].Value.Uint64()) / (1 << 20)
	return out
}

// histogramSince returns the median and the largest value (µs) of what a
// cumulative histogram gained between before and after (0 when nothing).
func histogramSince(before, after *metrics.Float64Histogram) (p50, maxUs float64) {
	var total uint64
	diff := make([]uint64, len(after.Counts))
	for i := range after.Counts {
		diff[i] = after.Counts[i] - before.Counts[i]
		total += diff[i]
	}
	if total == 0 {
		return 0, 0
	}
	var seen uint64
	for i, n := range diff {
		if n == 0 {
			continue
		}
		upper := after.Buckets[i+1]
		if seen < (total+1)/2 && seen+n >= (total+1)/2 {
			p50 = upper * 1e6
		}
		seen += n
		maxUs = upper * 1e6
	}
	return p50, maxUs
}

func writeProfile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	err = pprof.Lookup(name).WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// startProfiles profiles the CPU, contended mutexes and blocking from now
// until stop, which writes cpu.pprof, mutex.pprof, block.pprof and
// heap.pprof into dir (and heap-start.pprof, the heap profile at the start).
func startProfiles(dir string) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("profiles: %w", err)
	}
	// The heap profile's allocation counts run from the process's start:
	// the one taken now is the base to subtract (go tool pprof -base).
	if err := writeProfile(filepath.Join(dir, "heap-start.pprof"), "heap"); err != nil {
		pprof.StopCPUProfile()
		cpu.Close()
		return nil, err
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	return func() error {
		pprof.StopCPUProfile()
		errs := []error{cpu.Close()}
		for _, name := range []string{"mutex", "block", "heap"} {
			errs = append(errs, writeProfile(filepath.Join(dir, name+".pprof"), name))
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("profiles: %w", err)
		}
		return nil
	}, nil
}
