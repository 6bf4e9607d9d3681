package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit/local"
)

func TestServerStartsStopsAndRestartsOnTheSameData(t *testing.T) {
	s, err := local.New(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if err := s.Start(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %s", time.Since(start))
	s.Stop()
	if s.Running() {
		t.Fatal("still running after Stop")
	}
	start = time.Now()
	if err := s.Start(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %s", time.Since(start))
	s.Stop()
}
