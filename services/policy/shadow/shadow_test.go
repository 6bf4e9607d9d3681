package shadow_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/shadow"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func decision(a airlockv1.Action) *airlockv1.Decision { return &airlockv1.Decision{Action: a} }

func TestTheRunnerSurvivesEveryWayACandidateCanFail(t *testing.T) {
	call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "demo", Tool: "echo"}
	live := decision(airlockv1.Action_ACTION_ALLOW)
	recorded := make(chan shadow.Divergence, 16)
	record := func(_ context.Context, d shadow.Divergence) error { recorded <- d; return nil }
	asks := &shadow.Candidate{Digest: "asks", Decide: func(context.Context, *airlockv1.ToolCall, *airlockv1.Decision, time.Time) (*airlockv1.Decision, error) {
		return decision(airlockv1.Action_ACTION_ASK), nil
	}}
	tests := []struct {
		name   string
		decide func(ctx context.Context, _ *airlockv1.ToolCall, _ *airlockv1.Decision, _ time.Time) (*airlockv1.Decision, error)
	}{
		{"a_panic_is_a_failure", func(context.Context, *airlockv1.ToolCall, *airlockv1.Decision, time.Time) (*airlockv1.Decision, error) {
			panic("candidate bug")
		}},
		{"a_deadline_is_a_failure", func(ctx context.Context, _ *airlockv1.ToolCall, _ *airlockv1.Decision, _ time.Time) (*airlockv1.Decision, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := shadow.New(slog.New(slog.NewTextHandler(io.Discard, nil)), record, shadow.Options{Timeout: 20 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Run(ctx) }()
			r.Set(&shadow.Candidate{Digest: "broken", Decide: tt.decide})
			r.Offer(call, live)
			testenv.Eventually(t, 10*time.Second, "the failure counted", func() bool { return r.Stats().Failed == 1 })
			// The runner goes on: the next candidate's divergence is recorded.
			r.Set(asks)
			r.Offer(call, live)
			select {
			case d := <-recorded:
				if d.Digest != "asks" || d.Live != live || d.Candidate.GetAction() != airlockv1.Action_ACTION_ASK {
					t.Errorf("divergence %+v", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no divergence recorded after the failed candidate")
			}
			cancel()
			<-done
		})
	}
}

func TestOfferNeverWaitsForACandidateThatFallsBehind(t *testing.T) {
	release := make(chan struct{})
	stuck := &shadow.Candidate{Digest: "stuck", Decide: func(context.Context, *airlockv1.ToolCall, *airlockv1.Decision, time.Time) (*airlockv1.Decision, error) {
		<-release
		return decision(airlockv1.Action_ACTION_ALLOW), nil
	}}
	r := shadow.New(slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context, shadow.Divergence) error { return nil },
		shadow.Options{Queue: 8, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	r.Set(stuck)
	offered := make(chan struct{})
	go func() {
		defer close(offered)
		for range 100 {
			r.Offer(&airlockv1.ToolCall{}, decision(airlockv1.Action_ACTION_ALLOW))
		}
	}()
	select {
	case <-offered:
	case <-time.After(5 * time.Second):
		t.Fatal("Offer waited for a candidate that does not finish")
	}
	if s := r.Stats(); s.Dropped < 100-8-1 {
		t.Errorf("dropped %d of 100 offers with a queue of 8 and a stuck candidate, want at least 91", s.Dropped)
	}
	r.Set(nil)
	before := r.Stats().Dropped
	r.Offer(&airlockv1.ToolCall{}, decision(airlockv1.Action_ACTION_ALLOW))
	if r.Stats().Dropped != before {
		t.Errorf("with no candidate an offer was queued or dropped")
	}
	close(release)
	cancel()
	<-done
}

// An agent flooding its own calls cannot keep the candidate from another
// agent's: its share of the queue is a quarter.
func TestOneAgentFloodingCannotCrowdOutAnother(t *testing.T) {
	release := make(chan struct{})
	seen := make(chan string, 64)
	stuck := &shadow.Candidate{Digest: "stuck", Decide: func(_ context.Context, call *airlockv1.ToolCall, _ *airlockv1.Decision, _ time.Time) (*airlockv1.Decision, error) {
		<-release
		seen <- call.GetAgentId()
		return decision(airlockv1.Action_ACTION_ALLOW), nil
	}}
	r := shadow.New(slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context, shadow.Divergence) error { return nil },
		shadow.Options{Queue: 16, Timeout: time.Hour})
	r.Set(stuck)
	for range 200 {
		r.Offer(&airlockv1.ToolCall{AgentId: "flood"}, decision(airlockv1.Action_ACTION_ALLOW))
	}
	if d := r.Stats().Dropped; d != 200-16/4 {
		t.Fatalf("the flooding agent had %d of 200 offers dropped, want all but a quarter of the queue (196)", d)
	}
	r.Offer(&airlockv1.ToolCall{AgentId: "other"}, decision(airlockv1.Action_ACTION_ALLOW))
	if d := r.Stats().Dropped; d != 196 {
		t.Fatalf("another agent's call was dropped behind the flood")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	close(release)
	got := map[string]int{}
	for range 5 {
		got[<-seen]++
	}
	if got["other"] != 1 || got["flood"] != 4 {
		t.Errorf("the candidate decided %v, want flood's 4 and other's 1", got)
	}
}

// The candidate decides at the live decision's own time, so a policy that
// reads the time decides as the live one did; a live decision without a
// time is decided at the runner's clock.
func TestTheCandidateDecidesAtTheLiveDecisionsTime(t *testing.T) {
	decidedAt := time.Date(2025, 1, 1, 11, 59, 59, 999_000_000, time.UTC)
	clock := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		live *airlockv1.Decision
		want time.Time
	}{
		{"its_decided_at", &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, DecidedAt: timestamppb.New(decidedAt)}, decidedAt},
		{"the_clock_without_one", decision(airlockv1.Action_ACTION_ALLOW), clock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			at := make(chan time.Time, 1)
			r := shadow.New(slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context, shadow.Divergence) error { return nil },
				shadow.Options{Now: func() time.Time { return clock }})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Run(ctx) }()
			defer func() { cancel(); <-done }()
			r.Set(&shadow.Candidate{Digest: "clock", Decide: func(_ context.Context, _ *airlockv1.ToolCall, _ *airlockv1.Decision, now time.Time) (*airlockv1.Decision, error) {
				at <- now
				return decision(airlockv1.Action_ACTION_ALLOW), nil
			}})
			r.Offer(&airlockv1.ToolCall{AgentId: "bot", CallId: "c1"}, tt.live)
			select {
			case got := <-at:
				if !got.Equal(tt.want) {
					t.Errorf("the candidate decided at %s, want %s", got, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the candidate never decided")
			}
		})
	}
}
