// Package notifytest is the contract test suite every notify.Notifier must
// pass (log, web console, Slack, ...). A channel's own test calls Run with a
// factory and, when the channel can be observed (a fake Slack API, a log
// buffer), a Delivered hook so the suite checks that deliveries really arrive.
//
//	func TestContract(t *testing.T) {
//		notifytest.Run(t, notifytest.Suite{New: func(t *testing.T) notify.Notifier { return mychannel.New(...) }})
//	}
package notifytest

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
)

// Suite describes the notifier under test.
type Suite struct {
	// New returns a fresh notifier (with its fakes started) for one subtest.
	New func(t *testing.T) notify.Notifier
	// Delivered, if set, reports whether the channel received a delivery of
	// kind ("announce", "remind", "update") for rec under ref. The suite
	// polls it until it is true or a few seconds pass.
	Delivered func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool
	// Timeout bounds each call into the notifier (default 5s).
	Timeout time.Duration
}

var namePattern = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Record returns a pending approval record as the approval service passes
// it to notifiers, for call id callID; its decision notifies "console",
// "slack", "teams" and "log".
func Record(callID string) *airlockv1.ApprovalRecord {
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/notes.txt", "text": "hello <b>world</b> & \"quotes\""})
	now := time.Now()
	return &airlockv1.ApprovalRecord{
		Call: &airlockv1.ToolCall{
			CallId: callID, AgentId: "bot", ThreadId: "thread-1", OnBehalfOf: "zoe",
			Server: "fs", Tool: "write_file", Arguments: args, Reason: "save the notes", Revision: 1,
			CreatedAt: timestamppb.New(now),
		},
		Decision: &airlockv1.Decision{
			Action: airlockv1.Action_ACTION_ASK, Reason: "writes need a person", RuleId: "r-writes",
			Risk: airlockv1.Risk_RISK_HIGH, Approvers: []string{"group:reviewers"}, Quorum: 1,
			Timeout: durationpb.New(5 * time.Minute), Notify: []string{"console", "slack", "teams", "log"},
			PolicyRevision: "rev-1",
		},
		State:     airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		Deadline:  timestamppb.New(now.Add(5 * time.Minute)),
		CreatedAt: timestamppb.New(now),
		UpdatedAt: timestamppb.New(now),
	}
}

// finals are the outcomes a channel must be able to show.
var finals = []airlockv1.ApprovalState{
	airlockv1.ApprovalState_APPROVAL_STATE_APPROVED,
	airlockv1.ApprovalState_APPROVAL_STATE_REJECTED,
	airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED,
	airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED,
	airlockv1.ApprovalState_APPROVAL_STATE_CANCELED,
	airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED,
	airlockv1.ApprovalState_APPROVAL_STATE_FAILED,
}

// Run runs the contract as subtests of t.
func Run(t *testing.T, s Suite) {
	if s.Timeout == 0 {
		s.Timeout = 5 * time.Second
	}
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), s.Timeout)
		t.Cleanup(cancel)
		return c
	}
	announce := func(t *testing.T, n notify.Notifier, rec *airlockv1.ApprovalRecord) string {
		t.Helper()
		ref, err := n.Announce(ctx(t), rec)
		if err != nil {
			t.Fatalf("Announce: %v", err)
		}
		s.waitDelivered(t, "announce", rec, ref)
		return ref
	}

	t.Run("name_is_a_stable_lowercase_token", func(t *testing.T) {
		n := s.New(t)
		if !namePattern.MatchString(n.Name()) {
			t.Fatalf("Name() = %q: use 1-32 characters from a-z 0-9 _ -", n.Name())
		}
		if n.Name() != n.Name() {
			t.Fatal("Name() changes between calls")
		}
	})
	t.Run("wants_answers_for_sparse_records_without_panicking", func(t *testing.T) {
		n := s.New(t)
		_ = n.Wants(&airlockv1.ApprovalRecord{})
		_ = n.Wants(&airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{CallId: "c"}})
		_ = n.Wants(Record("c-wants"))
	})
	t.Run("announces_a_pending_call", func(t *testing.T) {
		n := s.New(t)
		announce(t, n, Record("c-announce"))
	})
	t.Run("announcing_the_same_call_again_does_not_fail", func(t *testing.T) {
		n := s.New(t)
		rec := Record("c-again")
		announce(t, n, rec)
		announce(t, n, rec)
	})
	t.Run("reminds_on_the_announced_message", func(t *testing.T) {
		n := s.New(t)
		rec := Record("c-remind")
		ref := announce(t, n, rec)
		rec.Reminded = true
		if err := n.Remind(ctx(t), rec, ref); err != nil {
			t.Fatalf("Remind: %v", err)
		}
		s.waitDelivered(t, "remind", rec, ref)
	})
	for _, st := range finals {
		t.Run(fmt.Sprintf("updates_the_message_with_outcome_%s", st), func(t *testing.T) {
			n := s.New(t)
			rec := Record("c-update")
			ref := announce(t, n, rec)
			rec.State = st
			rec.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}
			rec.Reason = "because"
			if err := n.Update(ctx(t), rec, ref); err != nil {
				t.Fatalf("Update to %s: %v", st, err)
			}
			s.waitDelivered(t, "update", rec, ref)
		})
	}
	t.Run("returns_promptly_when_the_context_is_canceled", func(t *testing.T) {
		n := s.New(t)
		c, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			ref, _ := n.Announce(c, Record("c-canceled"))
			_ = n.Update(c, Record("c-canceled"), ref)
		}()
		select {
		case <-done:
		case <-time.After(s.Timeout):
			t.Fatalf("Announce/Update with a canceled context did not return within %s", s.Timeout)
		}
	})
	t.Run("is_safe_for_concurrent_use", func(t *testing.T) {
		n := s.New(t)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := Record(fmt.Sprintf("c-conc-%d", i))
				ref, err := n.Announce(ctx(t), rec)
				if err != nil {
					errs <- err
					return
				}
				rec.State = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
				if err := n.Update(ctx(t), rec, ref); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent delivery: %v", err)
		}
	})
}

func (s Suite) waitDelivered(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) {
	t.Helper()
	if s.Delivered == nil {
		return
	}
	deadline := time.Now().Add(s.Timeout)
	for !s.Delivered(t, kind, rec, ref) {
		if time.Now().After(deadline) {
			t.Fatalf("the channel did not receive the %s of call %s (ref %q) within %s", kind, rec.GetCall().GetCallId(), ref, s.Timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
