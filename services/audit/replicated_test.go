package audit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/store"
)

// The sink writes to the first of two replicas; killing it under load must
// move the writes to the other one, and once it is back both hold every
// event exactly once with a chain that verifies.
func TestAReplicaKilledUnderLoadLosesNothingDoublesNothingAndBothReplicasVerify(t *testing.T) {
	c := chtest.StartCluster(t, 2)
	db := chtest.DBName(t)
	e := newEnv(t, nil)
	e.dsn = c.DSN(db)
	st := e.open(e.dsn) // migrates ON CLUSTER before the sink starts
	second := openReplica(t, c, 1, db)
	e.sink(e.dsn)

	e.publishAsync(simpleEvents(t, "a", 1000))
	waitRows(t, st, 1000, 30*time.Second)
	waitRows(t, second, 1000, 30*time.Second) // replicated from the first

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.publishAsync(simpleEvents(t, "b", 2000))
	}()
	retries := e.deps.Metrics.Handled.WithLabelValues("audit", "retry")
	before := testutil.ToFloat64(retries)
	c.Replicas[0].Kill()
	wg.Wait()
	e.publishAsync(simpleEvents(t, "c", 500))
	total := e.streamCount()
	if total != 3500 {
		t.Fatalf("stream holds %d events, want 3500", total)
	}
	// Every event reaches the surviving replica while the first is down:
	// the sink failed over rather than waiting for it.
	// (The 500 published after the kill can only have come from the sink.)
	waitRows(t, second, total, 60*time.Second)
	t.Logf("failed over after %.0f failed commits", testutil.ToFloat64(retries)-before)

	if err := c.Replicas[0].Start(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	first := openReplica(t, c, 0, db)
	for i, r := range []*store.ClickHouse{first, second} {
		rows := waitRows(t, r, total, 60*time.Second)
		for j, row := range rows {
			if row.Seq != uint64(j+1) {
				t.Fatalf("replica %d: row %d has seq %d: a sequence is missing or repeated", i+1, j, row.Seq)
			}
		}
		if res := e.verify(r); !res.OK || res.Count != total {
			t.Fatalf("verify replica %d: %+v", i+1, res)
		}
	}
}

// The worst failover: the replica being written dies for good before the
// other fetched its latest rows. The sink, now on the survivor, must write
// those rows again from the stream, so the survivor alone holds them all.
func TestAReplicaLostBeforeTheOtherFetchedItsRowsLosesNothing(t *testing.T) {
	c := chtest.StartCluster(t, 2)
	db := chtest.DBName(t)
	e := newEnv(t, nil)
	e.dsn = c.DSN(db)
	st := e.open(e.dsn)
	second := openReplica(t, c, 1, db)
	e.sink(e.dsn)

	e.publishAsync(simpleEvents(t, "a", 200))
	waitRows(t, st, 200, 30*time.Second)
	waitRows(t, second, 200, 30*time.Second)
	// The survivor stops fetching, the first replica takes more rows and dies.
	if err := second.Conn().Exec(context.Background(), "SYSTEM STOP FETCHES "+db+".events"); err != nil {
		t.Fatal(err)
	}
	e.publishAsync(simpleEvents(t, "b", 800))
	waitRows(t, st, 1000, 30*time.Second)
	c.Replicas[0].Kill()
	if err := second.Conn().Exec(context.Background(), "SYSTEM START FETCHES "+db+".events"); err != nil {
		t.Fatal(err)
	}
	if n, err := second.Count(context.Background(), store.Filter{}); err != nil || n != 200 {
		t.Fatalf("the survivor holds %d rows (%v) before the sink moved to it, want 200: the test lost its premise", n, err)
	}

	e.publishAsync(simpleEvents(t, "c", 300))
	rows := waitRows(t, second, 1300, 60*time.Second)
	for j, row := range rows {
		if row.Seq != uint64(j+1) {
			t.Fatalf("row %d has seq %d: a sequence is missing or repeated", j, row.Seq)
		}
	}
	if res := e.verify(second); !res.OK || res.Count != 1300 {
		t.Fatalf("verify the survivor: %+v", res)
	}
}

// openReplica reads database db of replica i alone, until the test ends.
func openReplica(t *testing.T, c *chtest.Cluster, i int, db string) *store.ClickHouse {
	t.Helper()
	r, err := store.Open(context.Background(), c.ReplicaDSN(i, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
