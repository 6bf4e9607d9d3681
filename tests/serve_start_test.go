package tests

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
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
	serve := exec.Command(airlockBinary(t), "serve", "policy", "approval", "console", "--connect-wait", "60s",
		"--nats", servers[0].URL(), "--http", httpAddr)
	serve.Env = append(os.Environ(), env...)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = serve.Stdout
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var output strings.Builder
	retried, exited := make(chan struct{}), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			output.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "JetStream did not answer; trying again") {
				once.Do(func() { close(retried) })
			}
		}
		exited <- serve.Wait()
	}()
	said := func() string { mu.Lock(); defer mu.Unlock(); return output.String() }
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = serve.Process.Kill()
		}
	})
	select {
	case <-retried:
	case err := <-exited:
		exited <- err
		t.Fatalf("airlock serve exited (%v) instead of waiting for the cluster to answer:\n%s", err, said())
	case <-time.After(60 * time.Second):
		t.Fatalf("airlock serve did not say within 60s that it waits for JetStream to answer:\n%s", said())
	}
	for i, o := range restart {
		s, err := embedded.Restart(o)
		if err != nil {
			t.Fatalf("start node %s again: %v", o.Name, err)
		}
		servers[i+1], stopped[i+1] = s, false
	}

	// Ready (/healthz 200) means every service it runs is built and serving.
	testenv.Eventually(t, 60*time.Second, "airlock serve ready once the cluster answers", func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("airlock serve exited (%v):\n%s", err, said())
		default:
		}
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
