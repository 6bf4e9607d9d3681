package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestServeStartsOnceTheClusterAnswers: `airlock serve` starting beside a
// cluster whose replicated streams have no leader yet — its JetStream
// requests unanswered until they time out, as at a cluster's start or on a
// machine too busy to answer in time (a console replica of `airlock
// chaos`'s production layout once exited so: "console bucket
// airlock_console: context deadline exceeded") — keeps building its
// services and starts once the cluster answers, instead of exiting at the
// first request that timed out. A bus that is not provisioned still fails
// at once (TestServeAndTheHTTPGatewaySayWhereTheyConnectAndWhatToDo's
// neighbours in services/airlock).
func TestServeStartsOnceTheClusterAnswers(t *testing.T) {
	t.Parallel() // it mostly waits for the cluster to come back
	servers, err := embedded.StartCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	stopped := map[int]bool{}
	t.Cleanup(func() {
		for i, s := range servers {
			if !stopped[i] {
				s.Stop()
			}
		}
	})
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL())
	}
	cfg := testenv.Config(strings.Join(urls, ","))
	cfg.Stream.Replicas, cfg.Buckets.Replicas = 3, 3
	testenv.Deps(t, cfg) // provisions every stream and bucket on all three

	// Two of three nodes go: no stream has a quorum, and a request to the
	// one left goes unanswered until it times out.
	restart := []embedded.Options{servers[1].Options(), servers[2].Options()}
	for i := 1; i < 3; i++ {
		servers[i].Stop()
		stopped[i] = true
	}

	// They come back a while after serve started trying: long enough for
	// its first requests to time out (a JetStream request waits 5 s).
	back := make(chan error, 1)
	go func() {
		time.Sleep(8 * time.Second)
		for i, o := range restart {
			s, err := startAgain(o)
			if err != nil {
				back <- fmt.Errorf("start node %s again: %w", o.Name, err)
				return
			}
			servers[i+1] = s
			stopped[i+1] = false
		}
		back <- nil
	}()
	t.Cleanup(func() { <-back }) // before the nodes are stopped (cleanups run last first)

	env := []string{"AIRLOCK_SECURITY_DECISION_KEY=" + cfg.Security.DecisionKey, "AIRLOCK_SECURITY_FRONTEND_KEY=" + cfg.Security.FrontendKey,
		"AIRLOCK_STREAM_REPLICAS=3", "AIRLOCK_BUCKETS_REPLICAS=3"}
	// Ready (/healthz 200) means every service it runs is built and serving.
	p := startServe(t, servers[0].URL(), env, "policy", "approval", "console", "--connect-wait", "60s")
	if out := p.Output(); !strings.Contains(out, "JetStream did not answer; trying again") {
		t.Fatalf("airlock serve became ready without saying it waited for the cluster to answer; its output:\n%s", out)
	}
}

// startAgain starts a stopped node with its options, once its ports are
// free again.
func startAgain(o embedded.Options) (*embedded.Server, error) {
	var err error
	for range 50 {
		var s *embedded.Server
		if s, err = embedded.Start(o); err == nil {
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}
