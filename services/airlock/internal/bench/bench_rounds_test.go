package bench

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// A part of the CPU rounds pays for its own garbage: no collection runs
// within it, and it is charged in proportion to what it allocated; a part
// that allocates nothing is charged next to nothing; the collector's
// setting is the same after a part as before.
func TestAPartIsChargedForTheCollectionsItsAllocationsCause(t *testing.T) {
	prev := debug.SetGCPercent(400)
	defer debug.SetGCPercent(prev)
	// A live heap to mark, so that a collection costs measurable CPU.
	live := make([]*[1024]byte, 32<<10)
	for i := range live {
		live[i] = new([1024]byte)
	}
	pm := partMeter{tail: 20 * time.Millisecond}
	if err := pm.measureIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sink *[1024]byte
	allocating, err := pm.part(context.Background(), nil, func() error {
		for range 256 << 10 { // 256 MiB, over GOGC 400's 4× the live heap: a collection would start
			sink = new([1024]byte)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := pm.part(context.Background(), nil, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = sink
	if allocating.Collections != 0 {
		t.Errorf("%d collections ran within the part, want none", allocating.Collections)
	}
	if allocating.Allocated < 250<<20 { // the runtime counts allocations a cache at a time
		t.Errorf("the part allocated %d bytes, want about 256 MiB counted", allocating.Allocated)
	}
	if !(allocating.ChargeSeconds > 0) || !(quiet.ChargeSeconds < allocating.ChargeSeconds/100) {
		t.Errorf("charges: %v s for 256 MiB allocated, %v s for nothing; want the first above 0 and the second under a hundredth of it", allocating.ChargeSeconds, quiet.ChargeSeconds)
	}
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("the collector's setting after a part is %d, want 400 as before", got)
	}
	runtime.KeepAlive(live)
}

// With the collector off (GOGC=off), a part is charged nothing for it.
func TestAPartIsChargedNoCollectionWhenTheCollectorIsOff(t *testing.T) {
	prev := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(prev)
	pm := partMeter{tail: 10 * time.Millisecond}
	var sink []byte
	c, err := pm.part(context.Background(), nil, func() error { sink = make([]byte, 8<<20); return nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = sink
	if c.ChargeSeconds != 0 {
		t.Errorf("charged %v s with the collector off", c.ChargeSeconds)
	}
}

// A part is counted through its tail, and the process's background CPU
// (idle) runs through all of it: what is subtracted is idle over the run
// and the tail, not over the tail alone.
func TestAPartIsRelievedOfTheBackgroundOverItsWholeCount(t *testing.T) {
	pm := partMeter{tail: 20 * time.Millisecond, idle: 0.5}
	c, err := pm.part(context.Background(), nil, func() error { return sleepCtx(context.Background(), 200*time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 s a second over the whole count (at least 220 ms; the tail alone
	// would be 10 ms), however long a loaded machine made it.
	if c.SpanSeconds < 0.22 || math.Abs(c.IdleSeconds-0.5*c.SpanSeconds) > 1e-9 {
		t.Errorf("subtracted %v s of background over a count of %v s (a 200 ms run and a 20 ms tail) at 0.5 s a second, want half the count", c.IdleSeconds, c.SpanSeconds)
	}
}

// The background is measured as the parts run: with the collector off (so
// the runtime's scavenger, whose goal follows the heap goal, is paused as
// in them), over at least a second, the collector's setting restored after.
func TestTheBackgroundIsMeasuredWithTheCollectorOffAsInTheParts(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	pm := partMeter{tail: 10 * time.Millisecond}
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- pm.measureIdle(context.Background()) }()
	var sawOff bool
	for wait := true; wait; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			wait = false
		case <-time.After(20 * time.Millisecond):
			sawOff = sawOff || int64(readGCMetric("/gc/gogc:percent")) < 0
		}
	}
	if !sawOff {
		t.Error("the collector was on while the background was measured")
	}
	if took := time.Since(t0); took < time.Second {
		t.Errorf("the background was measured over %v, want at least a second", took)
	}
	if got := readGCMetric("/gc/gogc:percent"); got != 100 {
		t.Errorf("the collector's setting after measuring the background is %d, want 100 as before", got)
	}
	if !(pm.idle >= 0) {
		t.Errorf("background CPU %v s a second", pm.idle)
	}
}

// The work of a call is timed as a part is counted: right after a part
// that left garbage with the collector just back on, no collection lands
// in a piece's loop (the garbage is collected before it, uncounted), the
// piece is relieved of the background over its loop, and the collector's
// setting is the same after as before.
func TestTheWorkIsTimedWithNoCollectionAndWithoutTheBackground(t *testing.T) {
	prev := debug.SetGCPercent(50)
	defer debug.SetGCPercent(prev)
	pm := partMeter{tail: 10 * time.Millisecond, idle: 0.5}
	var sink []byte
	// A part that leaves garbage, as the minimal chain does.
	if _, err := pm.part(context.Background(), nil, func() error {
		for range 4096 {
			sink = make([]byte, 16<<10)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A piece that allocates: with the collector on, its loop (workOps ×
	// 32 KiB, far over half the live heap) would start collections.
	costs, err := pm.timeWork(context.Background(), []workPiece{{name: "allocate", do: func() error { sink = make([]byte, 32<<10); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	_ = sink
	c := costs[0]
	if c.Collections != 0 {
		t.Errorf("%d collections ran within the piece's loop, want none", c.Collections)
	}
	if !(c.SpanSeconds > 0) || math.Abs(c.IdleSeconds-0.5*c.SpanSeconds) > 1e-9 {
		t.Errorf("subtracted %v s of background over a loop of %v s at 0.5 s a second, want %v", c.IdleSeconds, c.SpanSeconds, 0.5*c.SpanSeconds)
	}
	if w := workCosts([]workPiece{{name: "allocate"}}, costs); math.Abs(w[0].CPUus-c.Seconds()*1e6/workOps) > 1e-9 {
		t.Errorf("the piece's figure %v µs per call is not its count less the background over workOps", w[0].CPUus)
	}
	if got := debug.SetGCPercent(50); got != 50 {
		t.Errorf("the collector's setting after the work is %d, want 50 as before", got)
	}
}

func TestTheMedianOfTheRounds(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{-1, 1}, 0},
	} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

// A round whose background, subtracted, left a figure at or below 0 (a
// loaded machine; CI saw a floor of -32.7 µs) is left out of a bound's
// median, not counted as a ratio.
func TestARoundMeasuredBelowZeroIsLeftOutOfTheLeastRatio(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		beforeUs, beforeFloor []float64
		afterUs, afterFloor   []float64
		want                  float64
	}{
		{"all measured", []float64{20, 30, 40}, []float64{10, 10, 10}, []float64{30, 20, 50}, []float64{10, 10, 10}, 2},
		{"one floor below 0", []float64{20, 30, 40}, []float64{-32.7, 10, 10}, []float64{30, 20, 50}, []float64{10, 10, 10}, 3},
		{"a chain and its floor both below 0", []float64{-20, 30, 40}, []float64{-10, 10, 10}, []float64{30, 20, 50}, []float64{10, 10, 10}, 3},
		{"no round measured", []float64{20}, []float64{-1}, []float64{20}, []float64{0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := medianLeastRatio(ratios(tc.beforeUs, tc.beforeFloor), ratios(tc.afterUs, tc.afterFloor))
			if got != tc.want {
				t.Errorf("least ratio %v, want %v", got, tc.want)
			}
		})
	}
}
