package svc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// stubService is a service whose Run the test scripts.
type stubService struct {
	ready Readiness
	run   func(ctx context.Context, ready *Readiness) error
	ended chan struct{}
}

func (s *stubService) Name() string           { return "stub" }
func (s *stubService) Ready() <-chan struct{} { return s.ready.Ready() }
func (s *stubService) Run(ctx context.Context) error {
	defer close(s.ended)
	return s.run(ctx, &s.ready)
}

// Start returns once the service is ready; when it fails, the service's
// Run has ended by then, so the caller may close what it uses.
func TestStartReturnsOnceReadyAndLeavesNothingRunningWhenItFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(ctx context.Context, ready *Readiness) error
		want string // in the error; "" for none
	}{
		{"ready", func(ctx context.Context, ready *Readiness) error { ready.Mark(); <-ctx.Done(); return nil }, ""},
		{"never_ready", func(ctx context.Context, _ *Readiness) error { <-ctx.Done(); return nil }, "not ready within"},
		{"fails_first", func(context.Context, *Readiness) error { return errors.New("no bucket") }, "stopped before it was ready: no bucket"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &stubService{run: tt.run, ended: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			within := 30 * time.Second
			if tt.name == "never_ready" {
				within = 50 * time.Millisecond
			}
			ended, err := Start(ctx, s, within)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				cancel()
				if err := <-ended; err != nil {
					t.Fatalf("Run after stopping: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start = %v; want an error with %q", err, tt.want)
			}
			select {
			case <-s.ended:
			default:
				t.Fatal("Start failed with the service's Run still running")
			}
		})
	}
}
