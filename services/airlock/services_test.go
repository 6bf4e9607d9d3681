package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/svc"
)

// startingService is a service that was built.
type startingService struct{ svc.Service }

// TestABuildJetStreamDidNotAnswerIsTriedAgain: buildTrying builds a service
// again after a failure the bus may get over, until the start wait has
// passed, and gives up at once on one it cannot (a missing bucket).
func TestABuildJetStreamDidNotAnswerIsTriedAgain(t *testing.T) {
	timedOut := fmt.Errorf("console bucket airlock_console: %w", context.DeadlineExceeded)
	missing := fmt.Errorf("console bucket airlock_console: %w (is the bus provisioned?)", jetstream.ErrBucketNotFound)
	for _, tc := range []struct {
		name      string
		failures  []error // the builds' errors before one succeeds
		startWait time.Duration
		wantTries int    // 0: more than once (how often depends on the machine's pace)
		wantErr   string // "" when it is built
	}{
		{"built_at_once", nil, time.Minute, 1, ""},
		{"built_after_timeouts", []error{timedOut, timedOut, timedOut}, time.Minute, 4, ""},
		{"a_cluster_without_a_leader_is_waited_for", []error{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}}, time.Minute, 2, ""},
		{"a_missing_bucket_fails_at_once", []error{missing, missing}, time.Minute, 1, "start console: console bucket airlock_console: nats: bucket not found (is the bus provisioned?)"},
		{"a_bus_that_never_answers_is_given_up_on_saying_what_to_check", []error{timedOut, timedOut, timedOut, timedOut, timedOut, timedOut, timedOut, timedOut}, 500 * time.Millisecond, 0,
			"start console: NATS JetStream did not answer within 500ms (console bucket airlock_console: context deadline exceeded): check that the NATS servers run and, in a cluster, that its streams have leaders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			mk := func(context.Context, svc.Deps) (svc.Service, error) {
				tries++
				if tries <= len(tc.failures) {
					return nil, tc.failures[tries-1]
				}
				return startingService{}, nil
			}
			deps := svc.Deps{Log: slog.New(slog.DiscardHandler)}
			s, err := buildTrying(context.Background(), deps, "console", mk, tc.startWait)
			if tc.wantErr == "" {
				if err != nil || s == nil {
					t.Fatalf("built %v, %v; want it built", s, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to say %q", err, tc.wantErr)
			}
			if tc.wantTries == 0 && tries < 2 || tc.wantTries > 0 && tries != tc.wantTries {
				t.Fatalf("built %d times, want %d (0: more than once)", tries, tc.wantTries)
			}
		})
	}
}

// TestABuildStopsWhenTheProcessDoes: a stop (ctx ended) ends the tries.
func TestABuildStopsWhenTheProcessDoes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	mk := func(context.Context, svc.Deps) (svc.Service, error) {
		tries++
		cancel()
		return nil, context.DeadlineExceeded
	}
	if _, err := buildTrying(ctx, svc.Deps{Log: slog.New(slog.DiscardHandler)}, "console", mk, time.Minute); err == nil || tries != 1 {
		t.Fatalf("built %d times, err = %v; want one try and an error", tries, err)
	}
}
