package airlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Status is how a call ended, from the agent's point of view.
type Status string

const (
	StatusCompleted        Status = "completed"
	StatusFailed           Status = "failed"
	StatusDenied           Status = "denied"
	StatusRejected         Status = "rejected"
	StatusChangesRequested Status = "changes_requested"
	StatusExpired          Status = "expired"
	StatusCanceled         Status = "canceled"
	StatusInvalid          Status = "invalid"
)

// Outcome is the end of one call revision.
type Outcome struct {
	CallID   string `json:"call_id"`
	Revision uint32 `json:"revision"`
	Status   Status `json:"status"`
	// Result is the tool's JSON result when Status is completed.
	Result    json.RawMessage `json:"result,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// Reason says why the call did not complete: the policy's or reviewer's
	// reason, the failure code, or why the request was invalid.
	Reason string `json:"reason,omitempty"`
	// Feedback from a reviewer who requested changes; submit a new revision.
	Feedback string `json:"feedback,omitempty"`
	// FailureOutcome is "error" or "indeterminate" (the tool may have run).
	FailureOutcome string `json:"failure_outcome,omitempty"`
	// DecidedBy is the reviewer or service whose decision ended the call.
	DecidedBy string `json:"decided_by,omitempty"`
	// Decision is the policy decision document, when one was made.
	Decision *airlockv1.Decision `json:"-"`
}

// Completed reports whether the tool ran and returned a result.
func (o Outcome) Completed() bool { return o.Status == StatusCompleted }

// Await returns the outcome of the call's latest revision. It reads the
// call's history from the stream, then follows it live, so it works when it
// starts after the outcome was published, after the agent restarted, and
// across NATS reconnects. It returns when ctx ends without an outcome.
func (c *Client) Await(ctx context.Context, callID string) (Outcome, error) {
	cons, err := c.js.OrderedConsumer(ctx, c.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject.OfCall(c.agent, callID)},
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("await call %s: %w", callID, err)
	}
	f := follower{callID: callID, ends: map[uint32]Outcome{}}
	for {
		if err := ctx.Err(); err != nil {
			return Outcome{}, fmt.Errorf("await call %s: %w", callID, err)
		}
		fetchCtx, cancel := context.WithTimeout(ctx, pollInterval)
		m, err := cons.Next(jetstream.FetchContext(fetchCtx))
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, jetstream.ErrNoMessages) {
				continue
			}
			// Connection trouble: the ordered consumer resumes where it was.
			continue
		}
		ev, err := envelope.Decode(m.Data(), m.Headers())
		if err != nil {
			continue // an undecodable message is the policy service's to refuse, not ours
		}
		f.add(ev)
		meta, _ := m.Metadata()
		if meta != nil && meta.NumPending > 0 {
			continue // still catching up: a later revision may follow
		}
		if out, ok := f.ends[f.latest]; ok {
			if out.Status == StatusInvalid {
				return out, fmt.Errorf("%w: %s", ErrInvalid, out.Reason)
			}
			return out, nil
		}
	}
}

// follower folds a call's events into the outcome of each revision.
type follower struct {
	callID string
	latest uint32
	ends   map[uint32]Outcome
}

func (f *follower) add(ev *airlockv1.Event) {
	rev := ev.GetRevision()
	if rev == 0 {
		rev = 1
	}
	if rev > f.latest {
		f.latest = rev
	}
	out := Outcome{CallID: f.callID, Revision: rev}
	if a := ev.GetActor(); a != nil {
		out.DecidedBy = a.GetId()
	}
	switch b := ev.Body.(type) {
	case *airlockv1.Event_Denied:
		out.Status, out.Reason, out.Decision = StatusDenied, b.Denied.GetDecision().GetReason(), b.Denied.GetDecision()
	case *airlockv1.Event_Rejected:
		out.Status, out.Reason = StatusRejected, b.Rejected.GetReason()
	case *airlockv1.Event_ChangesRequested:
		out.Status, out.Feedback, out.Reason = StatusChangesRequested, b.ChangesRequested.GetFeedback(), "changes requested"
	case *airlockv1.Event_Expired:
		out.Status, out.Reason = StatusExpired, "no decision before the deadline"
	case *airlockv1.Event_Canceled:
		out.Status, out.Reason = StatusCanceled, b.Canceled.GetReason()
	case *airlockv1.Event_Completed:
		out.Status, out.Truncated = StatusCompleted, b.Completed.GetTruncated()
		if r := b.Completed.GetResultJson(); r != "" {
			out.Result = json.RawMessage(r)
		}
	case *airlockv1.Event_Failed:
		out.Status, out.Reason, out.FailureOutcome = StatusFailed, b.Failed.GetReason(), b.Failed.GetOutcome()
		if msg := b.Failed.GetMessage(); msg != "" {
			out.Reason += ": " + msg
		}
	case *airlockv1.Event_Invalid:
		out.Status, out.Reason = StatusInvalid, b.Invalid.GetReason()
	default:
		return
	}
	if _, done := f.ends[rev]; !done { // the first end of a revision is its end
		f.ends[rev] = out
	}
}
