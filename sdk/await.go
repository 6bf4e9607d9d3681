package airlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
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
	f := follower{callID: callID, ends: map[uint32]Outcome{}}
	var lastSeq uint64
	for {
		out, done, err := c.follow(ctx, callID, &f, &lastSeq)
		if done || err != nil {
			return out, err
		}
		// The call was quiet for a while: recreate the consumer from where we
		// were. nats.go's ordered consumer resets itself on missed
		// heartbeats, but during a cluster leader change it can stall
		// silently; a fresh consumer costs one request per idle period.
	}
}

// follow reads the call's events from lastSeq+1 until an outcome (done), an
// error, or idleRecreate passes without a message (neither). It uses a
// plain ephemeral consumer (memory, R1, no acks) it controls fully, rather
// than nats.go's ordered consumer, whose reset can stall silently while a
// cluster elects a new stream leader.
func (c *Client) follow(ctx context.Context, callID string, f *follower, lastSeq *uint64) (Outcome, bool, error) {
	cc := jetstream.ConsumerConfig{
		Name:              ids.New("await"),
		FilterSubject:     subject.OfCall(c.agent, callID),
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: 2 * idleRecreate,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if *lastSeq > 0 {
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *lastSeq+1
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	cons, err := c.js.CreateConsumer(cctx, c.stream, cc)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return Outcome{}, false, fmt.Errorf("await call %s: %w", callID, ctx.Err())
		}
		if isPermanent(err) {
			return Outcome{}, false, fmt.Errorf("await call %s: %w", callID, err)
		}
		// The cluster may be electing a leader or the connection reconnecting.
		select {
		case <-ctx.Done():
		case <-time.After(heartbeat):
		}
		return Outcome{}, false, nil
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), requestTimeout)
		defer dcancel()
		_ = c.js.DeleteConsumer(dctx, c.stream, cc.Name) // best effort: InactiveThreshold cleans up otherwise
	}()
	lastMsg := time.Now()
	reconnects := c.nc.Stats().Reconnects
	for {
		fctx, fcancel := context.WithTimeout(ctx, heartbeat)
		m, err := cons.Next(jetstream.FetchContext(fctx))
		fcancel()
		if ctx.Err() != nil {
			return Outcome{}, false, fmt.Errorf("await call %s: %w", callID, ctx.Err())
		}
		if err != nil {
			// Recreate after a reconnect (the server may have lost the
			// in-memory consumer), after a long quiet spell, or on any other error.
			if c.nc.Stats().Reconnects != reconnects || time.Since(lastMsg) > idleRecreate ||
				!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
				return Outcome{}, false, nil // recreate from lastSeq+1
			}
			continue
		}
		lastMsg = time.Now()
		meta, _ := m.Metadata()
		if meta != nil {
			*lastSeq = meta.Sequence.Stream
		}
		ev, err := envelope.Decode(m.Data(), m.Headers())
		if err != nil {
			continue // an undecodable message is the policy service's to refuse, not ours
		}
		f.add(ev)
		if meta != nil && meta.NumPending > 0 {
			continue // still catching up: a later revision may follow
		}
		if out, ok := f.ends[f.latest]; ok {
			if out.Status == StatusInvalid {
				return out, true, fmt.Errorf("%w: %s", ErrInvalid, out.Reason)
			}
			return out, true, nil
		}
	}
}

// isPermanent reports errors that retrying will not fix: no such stream,
// or no permission to read this call.
func isPermanent(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.Code == 403 || apiErr.Code == 404 && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound) {
		return true
	}
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation")
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
