package policy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// The policy service is ready once everything that runs alongside it (the
// engine's endpoints and watchers) serves and its intake consumer is
// subscribed; one that fails, or has not said it serves, leaves it not
// ready however long the consumer has been deciding calls, and a failure
// is what Run returns.
func TestThePolicyServiceIsReadyOnlyOnceEverythingAlongsideItServes(t *testing.T) {
	broken := errors.New("watch rules: bucket gone")
	for _, tt := range []struct {
		name string
		// alongside runs with the service; decided is closed once the
		// service has decided a call (its intake consumer is subscribed).
		alongside func(decided <-chan struct{}) func(ctx context.Context, ready func()) error
		ready     bool
		err       error
	}{
		{"ready_when_its_alongside_serves", func(<-chan struct{}) func(context.Context, func()) error {
			return func(ctx context.Context, ready func()) error {
				ready()
				<-ctx.Done()
				return nil
			}
		}, true, nil},
		{"never_ready_when_its_alongside_fails_first", func(decided <-chan struct{}) func(context.Context, func()) error {
			return func(ctx context.Context, _ func()) error {
				select {
				case <-decided:
					return broken
				case <-ctx.Done():
					return nil
				}
			}
		}, false, broken},
		{"not_ready_while_its_alongside_has_not_said_it_serves", func(<-chan struct{}) func(context.Context, func()) error {
			return func(ctx context.Context, _ func()) error {
				<-ctx.Done()
				return nil
			}
		}, false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := testenv.StartNATS(t)
			deps := testenv.Deps(t, testenv.Config(n.URL()))
			engine, err := policy.NewEngine(context.Background(), deps)
			if err != nil {
				t.Fatal(err)
			}
			decided := make(chan struct{})
			s, err := policy.New(deps, engine, tt.alongside(decided))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			// A decided call shows the intake consumer subscribed: the
			// consumer is told so before it fetches the first request.
			submit(t, deps.JS, "bot", "r1", "demo", "echo", map[string]any{"text": "hi"})
			waitDecision(t, deps.JS, "bot", "r1")
			close(decided)
			if tt.ready {
				select {
				case <-s.Ready():
				case err := <-ran:
					t.Fatalf("Run returned %v before the service was ready", err)
				case <-time.After(30 * time.Second):
					t.Fatal("the policy service was not ready within 30s")
				}
			} else {
				select {
				case <-s.Ready():
					t.Fatal("the policy service says it is ready though what runs alongside it never said it serves")
				default:
				}
			}
			if tt.err == nil {
				cancel()
			}
			if err := <-ran; !errors.Is(err, tt.err) {
				t.Fatalf("Run returned %v, want %v", err, tt.err)
			}
			if !tt.ready {
				select {
				case <-s.Ready():
					t.Fatal("the policy service became ready as it stopped, though what runs alongside it never said it serves")
				default:
				}
			}
		})
	}
}
