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
// subscribed; one that fails first leaves it never ready, and Run returns
// the failure.
func TestThePolicyServiceIsReadyOnlyOnceEverythingAlongsideItServes(t *testing.T) {
	broken := errors.New("watch rules: bucket gone")
	for _, tt := range []struct {
		name      string
		alongside func(ctx context.Context, ready func()) error
		ready     bool
	}{
		{"ready_when_its_alongside_serves", func(ctx context.Context, ready func()) error {
			ready()
			<-ctx.Done()
			return nil
		}, true},
		{"never_ready_when_its_alongside_fails_first", func(context.Context, func()) error { return broken }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := testenv.StartNATS(t)
			deps := testenv.Deps(t, testenv.Config(n.URL()))
			engine, err := policy.NewEngine(context.Background(), deps)
			if err != nil {
				t.Fatal(err)
			}
			s, err := policy.New(deps, engine, tt.alongside)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			if tt.ready {
				select {
				case <-s.Ready():
				case err := <-ran:
					t.Fatalf("Run returned %v before the service was ready", err)
				case <-time.After(30 * time.Second):
					t.Fatal("the policy service was not ready within 30s")
				}
				cancel()
				if err := <-ran; err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			defer cancel()
			if err := <-ran; !errors.Is(err, broken) {
				t.Fatalf("Run returned %v, want the alongside function's failure", err)
			}
			select {
			case <-s.Ready():
				t.Fatal("the policy service says it is ready though what runs alongside it failed before serving")
			default:
			}
		})
	}
}
