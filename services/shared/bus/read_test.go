package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// On a cluster every ReadStored creates its consumer on a server the meta
// leader picks, and its first pull can reach this client's server before the
// consumer's interest does: CI once failed a test with "no responders" that
// way. Reads right after writes never fail; a read may come from a replica a
// write or two behind, and once the writes stop a read finds them all.
func TestReadStoredOnAClusterNeverFails(t *testing.T) {
	_, js, cfg := provisionedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writes = 200
	count := func() int {
		n := 0
		if err := bus.ReadStored(ctx, js, cfg.Stream.Name, []string{"airlock.evt.bot.*.exec.started"}, func(jetstream.Msg) bool {
			n++
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range writes {
		if _, err := js.Publish(ctx, fmt.Sprintf("airlock.evt.bot.c%d.exec.started", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if n := count(); n > i+1 {
			t.Fatalf("read %d found %d messages, more than were written", i, n)
		}
	}
	testenv.Eventually(t, 10*time.Second, "a read to find every write", func() bool { return count() == writes })
}
