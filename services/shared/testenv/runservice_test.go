package testenv

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/svc"
)

// startingService is a service whose Run does what run says.
type startingService struct {
	ready svc.Readiness
	run   func(ctx context.Context, ready *svc.Readiness) error
}

func (s *startingService) Name() string                  { return "starting" }
func (s *startingService) Ready() <-chan struct{}        { return s.ready.Ready() }
func (s *startingService) Run(ctx context.Context) error { return s.run(ctx, &s.ready) }

// recordingTB records what a test would have been told, and ends the
// goroutine at Fatalf as testing does.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// RunService returns once the service says it is ready, and fails the
// test with the service's name when it is not ready in time or stops
// before.
func TestRunServiceReturnsOnceTheServiceIsReady(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(ctx context.Context, ready *svc.Readiness) error
		want string // in the one failure; "" for none
		// within bounds the start: short only where the case waits it out,
		// long where the outcome must not depend on a loaded machine's pace.
		within time.Duration
	}{
		{"a_service_that_says_it_is_ready_is_returned", func(ctx context.Context, ready *svc.Readiness) error {
			ready.Mark()
			<-ctx.Done()
			return nil
		}, "", 30 * time.Second},
		{"a_service_never_ready_fails_the_test_naming_it", func(ctx context.Context, _ *svc.Readiness) error {
			<-ctx.Done()
			return nil
		}, "service starting was not ready within 100ms", 100 * time.Millisecond},
		{"a_service_that_fails_before_it_is_ready_fails_the_test_with_its_error", func(context.Context, *svc.Readiness) error {
			return errors.New("bucket AIRLOCK_X not found")
		}, "service starting stopped before it was ready: bucket AIRLOCK_X not found", 30 * time.Second},
		{"a_service_that_stops_before_it_is_ready_fails_the_test", func(context.Context, *svc.Readiness) error {
			return nil
		}, "service starting stopped before it was ready: Run returned without an error", 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &startingService{run: tt.run}
			tb := &recordingTB{TB: t}
			returned := make(chan bool, 1)
			go func() {
				defer close(returned)
				runService(tb, s, tt.within)
				select {
				case <-s.Ready():
					returned <- true
				default:
					returned <- false
				}
			}()
			readyAtReturn, ok := <-returned
			for i := len(tb.cleanups) - 1; i >= 0; i-- {
				tb.cleanups[i]()
			}
			if tt.want == "" {
				if !ok || !readyAtReturn || len(tb.failures) > 0 {
					t.Fatalf("returned %v, ready when it returned %v, failures %q; want a return once ready and no failure", ok, readyAtReturn, tb.failures)
				}
				return
			}
			if ok || len(tb.failures) != 1 || !strings.Contains(tb.failures[0], tt.want) {
				t.Fatalf("returned %v, failures %q; want the test failed with %q", ok, tb.failures, tt.want)
			}
		})
	}
}
