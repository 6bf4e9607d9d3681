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
// at once (services/airlock TestABuildJetStreamDidNotAnswerIsTriedAgain).
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

	// They come back once serve has said that a build's request went
	// unanswered and it tries again (a JetStream request waits 5 s).
	env := []string{"AIRLOCK_SECURITY_DECISION_KEY=" + cfg.Security.DecisionKey, "AIRLOCK_SECURITY_FRONTEND_KEY=" + cfg.Security.FrontendKey,
		"AIRLOCK_STREAM_REPLICAS=3", "AIRLOCK_BUCKETS_REPLICAS=3"}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	serve := testenv.LaunchAirlock(t, httpAddr, env, "serve", "policy", "approval", "console", "--connect-wait", "60s",
		"--nats", servers[0].URL(), "--http", httpAddr)
	serve.WaitForOutput("JetStream did not answer; trying again", 60*time.Second)
	for i, o := range restart {
		s, err := embedded.Restart(o)
		if err != nil {
			t.Fatalf("start node %s again: %v", o.Name, err)
		}
		servers[i+1], stopped[i+1] = s, false
	}
	// Ready (/healthz 200) means every service it runs is built and serving.
	serve.WaitReady(60 * time.Second)
}
