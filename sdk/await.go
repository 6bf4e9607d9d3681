package airlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/lastevents"
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
	// StatusAllowed and StatusApproved end a gate-only call (Call.AgentRuns)
	// for Await, AwaitRevision and AwaitDecision: the agent may now run the
	// tool itself (and then Report it).
	StatusAllowed  Status = "allowed"
	StatusApproved Status = "approved"
)

// Outcome is the end of one call revision.
type Outcome struct {
	CallID   string `json:"call_id"`
	Revision uint32 `json:"revision"`
	Status   Status `json:"status"`
	// Result is the tool's JSON result when Status is completed, and the
	// tool's own error result when Status is failed and the tool gave one
	// (an MCP CallToolResult with isError).
	Result    json.RawMessage `json:"result,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// Reason says why the call did not complete: the policy's or reviewer's
	// reason, the failure code, or why the request was invalid.
	Reason string `json:"reason,omitempty"`
	// Feedback from a reviewer who requested changes; submit a new revision.
	Feedback string `json:"feedback,omitempty"`
	// FailureOutcome is "error" or "indeterminate" (the tool may have run).
	FailureOutcome string `json:"failure_outcome,omitempty"`
	// Resolution is a person's answer to whether an indeterminate call
	// happened, when one was given by the time the outcome was read
	// (AwaitResolution waits for it).
	Resolution *Resolution `json:"resolution,omitempty"`
	// DecidedBy is who decided the call: the reviewer who approved, rejected
	// or requested changes, "policy" when the policy allowed or denied it,
	// "approval" for an expiry. For a call that ran (completed, failed) it is
	// who let it run, never the executor; empty when that is not known (the
	// Watcher sees only the ends of calls).
	DecidedBy string `json:"decided_by,omitempty"`
	// Decision is the policy decision document, when one was made.
	// AgentRan: the agent ran the tool itself (a gate-only call) and the
	// result is its report; airlock's executor never ran it.
	AgentRan bool `json:"agent_ran,omitempty"`
	// ArgumentsDiffer: the agent reported running other arguments than the
	// ones airlock decided on.
	ArgumentsDiffer bool `json:"arguments_differ,omitempty"`
	// ArgumentsEdited: a reviewer edited the arguments before approving, so
	// the tool ran (or, for a gate-only call, may run) with Arguments, not
	// with the arguments the agent asked for.
	ArgumentsEdited bool `json:"arguments_edited,omitempty"`
	// Arguments are the edited arguments that ran, as a JSON object; set
	// only when ArgumentsEdited.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// At is when airlock recorded the end (the time of its event).
	At       time.Time           `json:"-"`
	Decision *airlockv1.Decision `json:"-"`
	// Call is the call as airlock decided it (allowed, approved, denied).
	// An agent that runs a gate-only call itself compares it with what it
	// asked before it runs anything: a call id used before answers with the
	// decision on that earlier call.
	Call *airlockv1.ToolCall `json:"-"`
}

// Completed reports whether the tool ran and returned a result.
func (o Outcome) Completed() bool { return o.Status == StatusCompleted }

// Allowed reports whether a gate-only call may run: the policy allowed it
// or a person approved it.
func (o Outcome) Allowed() bool { return o.Status == StatusAllowed || o.Status == StatusApproved }

// Await returns the outcome of the call's newest revision. It reads the
// call's last events from the stream, then follows it live, so it works when
// it starts after the outcome was published, after the agent restarted, and
// across NATS reconnects. It returns when ctx ends without an outcome. A
// gate-only call (Call.AgentRuns) ends, as far as airlock is concerned, when
// it is allowed or approved (Outcome.Allowed): the agent then runs the tool
// and reports how it went (Report), which is the outcome Await returns once
// the report is recorded (Outcome.AgentRan).
//
// A request the policy did not decide because the agent is over its budget
// ends the wait with an *OverBudgetError (errors.Is ErrOverBudget) — for
// Await, when it asked for a revision newer than any recorded (the agent's
// newest request, which was not decided); for AwaitRevision and the
// others, when it asked for the revision awaited and that revision is not
// recorded (ingress.OverBudget.Answers). The client kept the notice since
// its Submit, so Await after Submit hears it however soon it came.
func (c *Client) Await(ctx context.Context, callID string, opts ...AwaitOption) (Outcome, error) {
	return c.AwaitRevision(ctx, callID, 0, opts...)
}

// AwaitOption adjusts Await, AwaitRevision and DoFast.
type AwaitOption func(*awaitOptions)

type awaitOptions struct {
	onEvent func(*airlockv1.Event)
}

// OnEvent calls fn with the events of the call the wait sees before its
// outcome — in particular approval_requested, whose decision says who may
// decide — so a front-end can keep its user informed. fn runs on the
// waiting goroutine (Await) or the watcher's (DoFast), must not block, and
// may see an event twice. Await reads a call's last approval_requested from
// the stream too; DoFast sees what its Watcher subscribes to (WatchAlso).
func OnEvent(fn func(*airlockv1.Event)) AwaitOption {
	return func(o *awaitOptions) { o.onEvent = fn }
}

func awaitOpts(opts []AwaitOption) awaitOptions {
	var o awaitOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// AwaitRevision returns the outcome of revision rev of the call (0: the
// newest revision), or of a later revision of the same call if that ends
// first (a later revision refused as invalid was never recorded, and does
// not end it).
func (c *Client) AwaitRevision(ctx context.Context, callID string, rev uint32, opts ...AwaitOption) (Outcome, error) {
	f := newFollower(callID, rev)
	f.onEvent = awaitOpts(opts).onEvent
	return c.follow(ctx, callID, f)
}

// AwaitDecision returns airlock's answer about revision rev of a gate-only
// call (Call.AgentRuns; 0: the newest revision): allowed or approved (the
// agent may run the tool itself, then Report how it went), or the end that
// came first instead (denied, rejected, changes_requested, expired,
// canceled, invalid). Like Await it reads what is stored, then follows the
// call live. It returns when ctx ends without an answer.
func (c *Client) AwaitDecision(ctx context.Context, callID string, rev uint32) (Outcome, error) {
	f := newFollower(callID, rev)
	f.decision = true
	return c.follow(ctx, callID, f)
}

// Progress is a step of a call before its outcome: the policy asked a
// person (Type "approval_requested", with the Decision and its Deadline),
// a person approved (Type "approved", By), the executor started it.
type Progress struct {
	Revision uint32
	// Type is the event type: approval_requested, approved, allowed, started.
	Type     string
	Decision *airlockv1.Decision
	// Call is the call that waits, with approval_requested.
	Call     *airlockv1.ToolCall
	Deadline time.Time
	// By is who caused the step (the approving person, "policy", ...).
	By string
	// Arguments, from the approved step on when the reviewer edited the
	// arguments, are the edited arguments that run (a JSON object); nil
	// otherwise.
	Arguments json.RawMessage
}

// AwaitProgress is AwaitRevision that also calls progress (when not nil)
// for each step seen before the outcome — what a person at a terminal
// wants to know while they wait. A step can be reported twice (it is seen
// both live and in the stream); progress must not block.
func (c *Client) AwaitProgress(ctx context.Context, callID string, rev uint32, progress func(Progress)) (Outcome, error) {
	f := newFollower(callID, rev)
	f.progress = progress
	return c.follow(ctx, callID, f)
}

func (c *Client) follow(ctx context.Context, callID string, f *follower) (Outcome, error) {
	if err := ids.Validate("call id", callID); err != nil {
		return Outcome{}, fmt.Errorf("await: %w", err)
	}
	// Live first, then the stored events: an event stored in between is
	// seen by one or the other (or both, which is harmless).
	live, stop, err := c.subscribeCall(ctx, callID, followBuffer)
	if err != nil {
		return Outcome{}, fmt.Errorf("await call %s: %w", callID, err)
	}
	defer stop()
	return c.followLive(ctx, callID, f, live)
}

// followBuffer is how many of a followed call's live messages wait to be read.
const followBuffer = 64

// followLive is follow on a subscription to the call's republished events
// made by the caller (Do makes it before it submits, so that an
// over-budget notice, which is not stored, cannot pass before it).
func (c *Client) followLive(ctx context.Context, callID string, f *follower, live chan *nats.Msg) (Outcome, error) {
	reconnects := c.nc.Stats().Reconnects
	resync := time.NewTicker(c.resyncInterval())
	defer resync.Stop()
	reconnected := time.NewTicker(reconnectCheck)
	defer reconnected.Stop()
	needSync := true
	for {
		if needSync {
			needSync = false
			if err := c.readStored(ctx, callID, f); err != nil {
				if ctx.Err() != nil {
					return Outcome{}, fmt.Errorf("await call %s: %w", callID, ctx.Err())
				}
				if isPermanent(err) {
					return Outcome{}, fmt.Errorf("await call %s: %w", callID, err)
				}
				// The server may be restarting or electing a leader: try again at the next tick.
			}
			if c.storedRead != nil {
				c.storedRead()
			}
		}
		// Taken before looking: a notice kept after the look wakes the wait.
		// A notice is looked at before the outcome: the policy records the
		// first requests over budget of a minute as invalid too, and the
		// notice says more (when to retry).
		heard := c.notices.next()
		if err := c.overBudgetHeard(callID, f); err != nil {
			return Outcome{}, err
		}
		if out, ok := f.outcome(); ok {
			out = c.complete(ctx, callID, f, out)
			if out.Status == StatusInvalid {
				return out, fmt.Errorf("%w: %s", ErrInvalid, out.Reason)
			}
			return out, nil
		}
		select {
		case <-heard:
		case m := <-live:
			if err := c.overBudgetOf(m, callID, f); err != nil {
				return Outcome{}, err
			}
			if ev, seq, ok := c.eventOf(m, callID); ok {
				f.add(ev, seq)
			}
		case <-resync.C:
			// Core NATS delivers at most once: a republished event can be
			// missed during a slow spell, so a quiet call is read again from
			// the stream now and then.
			needSync = true
		case <-reconnected.C:
			// Events published while the connection was down were not
			// delivered to it: read them from the stream.
			if n := c.nc.Stats().Reconnects; n != reconnects {
				reconnects, needSync = n, true
			}
		case <-ctx.Done():
			return Outcome{}, fmt.Errorf("await call %s: %w", callID, ctx.Err())
		}
	}
}

// complete adds to an outcome what its end event does not carry: who let a
// call that ran run, and a person's answer about an indeterminate one.
func (c *Client) complete(ctx context.Context, callID string, f *follower, out Outcome) Outcome {
	if out.DecidedBy == "" && (out.Status == StatusCompleted || out.Status == StatusFailed) {
		// A call that ran ends with the executor's event: who let it
		// run is in the decision before it, which may have been stored
		// before this wait subscribed. Without it the outcome still stands.
		if err := c.readTypes(ctx, callID, f, []string{subject.Approved, subject.Allowed}); err == nil {
			out, _ = f.outcome()
		}
	}
	if out.FailureOutcome == calls.FailureIndeterminate {
		out.Resolution, _ = c.storedResolution(ctx, callID, out.Revision)
	}
	return out
}

// ErrUnknownCall: airlock has recorded nothing of the call — no request,
// decision or end is stored under the agent's id and this call id (a
// mistyped id or agent, a call older than the events stream keeps, or one
// submitted a moment ago whose request the policy service has not yet read).
var ErrUnknownCall = errors.New("no such call is recorded")

// Ended reads, without waiting, what airlock has stored of revision rev of
// the call (0: the newest): its outcome and true when it has already ended
// (Outcome.At says when), false while it goes on, and ErrUnknownCall when
// nothing of the call is stored. An invalid request is an ended call with
// Status invalid here, not an error. Await follows a call that goes on.
func (c *Client) Ended(ctx context.Context, callID string, rev uint32) (Outcome, bool, error) {
	if err := ids.Validate("call id", callID); err != nil {
		return Outcome{}, false, fmt.Errorf("read call %s: %w", callID, err)
	}
	f := newFollower(callID, rev)
	if err := c.readStored(ctx, callID, f); err != nil {
		return Outcome{}, false, fmt.Errorf("read call %s: %w", callID, err)
	}
	if !f.seen {
		return Outcome{}, false, fmt.Errorf("call %s of agent %s: %w", callID, c.agent, ErrUnknownCall)
	}
	out, ok := f.outcome()
	if !ok {
		return Outcome{}, false, nil
	}
	return c.complete(ctx, callID, f, out), true, nil
}

// EndedWithin is Ended for a call that may have been submitted a moment
// ago: while nothing of it is stored, it waits up to grace for the call's
// first event (the policy service records the request once it reads it),
// and reads again then; ErrUnknownCall when still nothing is stored.
func (c *Client) EndedWithin(ctx context.Context, callID string, rev uint32, grace time.Duration) (Outcome, bool, error) {
	if err := ids.Validate("call id", callID); err != nil {
		return Outcome{}, false, fmt.Errorf("read call %s: %w", callID, err)
	}
	// Subscribed before the read: an event stored in between is seen by
	// one or the other.
	live, stop, err := c.subscribeCall(ctx, callID, 16)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("read call %s: %w", callID, err)
	}
	defer stop()
	out, ended, err := c.Ended(ctx, callID, rev)
	if c.storedRead != nil {
		c.storedRead()
	}
	if !errors.Is(err, ErrUnknownCall) {
		return out, ended, err
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	select {
	case <-live:
	case <-gctx.Done():
		// Core NATS delivers at most once: a missed event is read from
		// the stream below all the same.
	}
	if ctx.Err() != nil {
		return out, ended, err
	}
	return c.Ended(ctx, callID, rev)
}

// endTypes are the event types that end a call revision (see follower.add).
var endTypes = subject.EndTypes

// readStored feeds f the last stored event of each type that ends a
// revision, and the last accepted request (which names the newest revision
// and says whether the call is gate-only, which allowed and approved then
// end); with an event hook or progress, also the steps before the end. It
// asks for all of them at once, allowed and approved included, which it
// feeds f only for a gate-only call (known once the rest is fed) or
// AwaitDecision.
func (c *Client) readStored(ctx context.Context, callID string, f *follower) error {
	types := append([]string{subject.Requested}, endTypes...)
	if f.onEvent != nil && f.progress == nil {
		types = append(types, subject.ApprovalRequested)
	}
	if f.progress != nil {
		// Steps published before the live subscription are read too.
		types = append(types, subject.ApprovalRequested, subject.Approved)
	}
	decisions := []string{subject.Allowed, subject.Approved}
	asked := slices.Clone(types)
	for _, t := range decisions {
		if !slices.Contains(asked, t) {
			asked = append(asked, t)
		}
	}
	stored, err := c.storedOf(ctx, callID, asked)
	if err != nil {
		return err
	}
	c.feed(callID, f, stored, types)
	if f.decision || f.gateOnly {
		c.feed(callID, f, stored, decisions)
	}
	return nil
}

// readTypes feeds f the last stored event of each type.
func (c *Client) readTypes(ctx context.Context, callID string, f *follower, types []string) error {
	stored, err := c.storedOf(ctx, callID, types)
	if err != nil {
		return err
	}
	c.feed(callID, f, stored, types)
	return nil
}

// feed adds to f the events of stored of each type, in that order.
func (c *Client) feed(callID string, f *follower, stored map[string]*nats.Msg, types []string) {
	for _, typ := range types {
		if m := stored[typ]; m != nil {
			if ev, seq, ok := c.eventOf(m, callID); ok {
				f.add(ev, seq)
			}
		}
	}
}

// storedOf is the last stored message of each type of the call, by type
// (none where nothing is stored): asked of airlock in one request
// (lastevents.Read; an agent reaches no JetStream API), or read with
// Direct Get by a front-end allowed it (WithDirectReads).
func (c *Client) storedOf(ctx context.Context, callID string, types []string) (map[string]*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var msgs []*nats.Msg
	var err error
	if c.directReads {
		msgs, err = lastevents.ReadDirect(rctx, c.nc, c.stream, c.agent, callID, types)
	} else {
		msgs, err = lastevents.Read(rctx, c.nc, c.agent, callID, types)
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]*nats.Msg, len(msgs))
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if _, _, typ, ok := subject.Tokens(m.Header.Get(jetstream.SubjectHeader)); ok {
			out[typ] = m
		}
	}
	return out, nil
}

// lastOf is the last stored message of type typ of the call, or nil.
func (c *Client) lastOf(ctx context.Context, callID, typ string) (*nats.Msg, error) {
	stored, err := c.storedOf(ctx, callID, []string{typ})
	if err != nil {
		return nil, err
	}
	return stored[typ], nil
}

// eventOf decodes a republished or directly read event of this agent's
// call. Anything else is ignored: another agent can make the server answer
// one of its own requests onto this agent's subjects, but what it sends is
// then about its own calls, which this check refuses.
func (c *Client) eventOf(m *nats.Msg, callID string) (*airlockv1.Event, uint64, bool) {
	stored := m.Header.Get(jetstream.SubjectHeader)
	p, err := subject.Parse(stored)
	if err != nil || p.Agent != c.agent || p.Call != callID {
		return nil, 0, false
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil || ev.GetAgentId() != c.agent || ev.GetCallId() != callID || envelope.TypeOf(ev) != p.Type {
		return nil, 0, false
	}
	return ev, bus.StoredSeq(m), true
}

// ErrOverBudget: airlock did not decide the request because the agent sent
// more than its budget of calls (or request bytes) a minute
// (limits.agent_calls_per_minute, limits.agent_request_bytes_per_minute).
// Nothing of the request is recorded: submit the call again after the
// error's RetryAfter (errors.As an *OverBudgetError), or send fewer calls a
// minute.
var ErrOverBudget = errors.New("agent over its budget")

// OverBudgetError is ErrOverBudget with the agent's budget and when to
// retry, as the policy service's notice said.
type OverBudgetError struct {
	Agent, Call string
	// Revision is the revision of the call that was not decided.
	Revision              uint32
	CallsPerMinute        int
	RequestBytesPerMinute int
	// RetryAfter is about how long until the budget holds the call again.
	RetryAfter time.Duration
	// Reason is airlock's sentence.
	Reason string
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("call %s revision %d: agent %s is over its budget of %d calls a minute (and %d request bytes); retry after about %d s: airlock did not decide or record the request",
		e.Call, e.Revision, e.Agent, e.CallsPerMinute, e.RequestBytesPerMinute, int(e.RetryAfter/time.Second))
}

// Notice is the policy service's notice the error says, as a front-end
// passes it on (the console's REST API, in its error body).
func (e *OverBudgetError) Notice() ingress.OverBudget {
	return ingress.OverBudget{AgentID: e.Agent, CallID: e.Call, Revision: e.Revision, CallsPerMinute: e.CallsPerMinute, RequestBytesPerMinute: e.RequestBytesPerMinute,
		RetryAfterSeconds: max(1, int(e.RetryAfter/time.Second)), Reason: e.Reason}
}

// Is makes errors.Is(err, ErrOverBudget) true.
func (e *OverBudgetError) Is(target error) bool { return target == ErrOverBudget }

// overBudgetOf is the error an over-budget notice about this agent's call
// says (subject.OverBudgetNotice) when it ends f's wait (it is about the
// revision f waits for: ingress.OverBudget.Answers), nil for any other
// message. Only the policy service may publish on that subject (the
// agent's own account imports it from airlock's, where no agent
// publishes); the body must name this agent and call too.
func (c *Client) overBudgetOf(m *nats.Msg, callID string, f *follower) error {
	if m.Subject != subject.OverBudgetNotice(c.agent, callID) {
		return nil
	}
	n, err := ingress.DecodeOverBudget(m.Data, c.agent, callID)
	if err != nil || !n.Answers(f.want, f.recorded) {
		return nil
	}
	return OverBudgetErrorOf(n)
}

// OverBudgetErrorOf is the error the policy service's notice n says (for a
// front-end that heard the notice itself, as the console does for agents
// on its REST API).
func OverBudgetErrorOf(n ingress.OverBudget) *OverBudgetError {
	return &OverBudgetError{Agent: n.AgentID, Call: n.CallID, Revision: n.Revision, CallsPerMinute: n.CallsPerMinute, RequestBytesPerMinute: n.RequestBytesPerMinute,
		RetryAfter: time.Duration(n.RetryAfterSeconds) * time.Second, Reason: n.Reason}
}

// isPermanent reports errors that retrying will not fix: no such stream,
// or no permission to read this call.
func isPermanent(err error) bool {
	return errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation")
}

// follower folds a call's events into the outcome of each revision: the
// first end (lowest stream sequence) of a revision is its end, and the
// newest revision seen, or the one awaited, is the one that counts.
type follower struct {
	callID string
	// want is the revision awaited (0: the newest).
	want   uint32
	latest uint32
	// recorded is the newest revision seen recorded: of any event but
	// invalid, which a request refused before its revision was recorded
	// gets too. An over-budget notice about it was about a repeat.
	recorded uint32
	ends     map[uint32]Outcome
	seqs     map[uint32]uint64
	// deciders are who let each revision run (an approved or allowed event).
	deciders map[uint32]string
	// edits are the arguments a reviewer edited a revision to when approving.
	edits map[uint32]json.RawMessage
	// decision: the first allowed or approved of a revision ends it too
	// (AwaitDecision).
	decision bool
	// gateOnly: the call is gate-only (its request or decision says
	// agent_runs), so allowed and approved end it for Await as well.
	gateOnly bool
	// progress, when set, hears the steps before the end.
	progress func(Progress)
	// onEvent, when set, sees every event added before the outcome.
	onEvent func(*airlockv1.Event)
	// seen: an event of the call was added (it is known to airlock).
	seen bool
}

func newFollower(callID string, want uint32) *follower {
	return &follower{callID: callID, want: want, latest: want, ends: map[uint32]Outcome{}, seqs: map[uint32]uint64{}, deciders: map[uint32]string{}, edits: map[uint32]json.RawMessage{}}
}

// outcome is the end of the revision that counts, if it has one.
func (f *follower) outcome() (Outcome, bool) {
	if f.latest == 0 {
		return Outcome{}, false
	}
	out, ok := f.ends[f.latest]
	if ok && (out.Status == StatusCompleted || out.Status == StatusFailed) {
		out.DecidedBy = f.deciders[f.latest]
	}
	if edited := f.edits[f.latest]; ok && edited != nil && (out.Status == StatusCompleted || out.Status == StatusFailed || out.Status == StatusApproved) {
		out.ArgumentsEdited, out.Arguments = true, edited
	}
	return out, ok
}

func (f *follower) add(ev *airlockv1.Event, seq uint64) {
	f.seen = true
	rev := ev.GetRevision()
	if rev == 0 {
		// An invalid request is recorded without a revision when the request
		// could not be read: it answers the revision being waited for.
		rev = max(f.want, 1)
	}
	_, invalid := ev.Body.(*airlockv1.Event_Invalid)
	if invalid && f.want != 0 && rev > f.want {
		// A request refused as invalid was never recorded: a later
		// revision refused (over the agent's budget, or asked before
		// changes were requested) leaves the revision awaited going on.
		return
	}
	if invalid && ev.GetRevision() != 0 && ev.GetRevision() <= f.recorded {
		// A revision seen recorded is not refused as invalid afterwards:
		// the refusal was of a repeat of its request (with other content,
		// or over the budget from a policy that stored those), which
		// changes nothing of it.
		return
	}
	if rev > f.latest {
		f.latest = rev
	}
	if !invalid && rev > f.recorded {
		f.recorded = rev
	}
	out := Outcome{CallID: f.callID, Revision: rev}
	if t := ev.GetTime(); t != nil {
		out.At = t.AsTime()
	}
	if a := ev.GetActor(); a != nil {
		out.DecidedBy = a.GetId()
	}
	if f.onEvent != nil {
		if _, done := f.outcome(); !done {
			f.onEvent(ev)
		}
	}
	if b, ok := ev.Body.(*airlockv1.Event_Approved); ok && b.Approved.GetEdited() {
		if edited, err := json.Marshal(b.Approved.GetCall().GetArguments().AsMap()); err == nil {
			f.edits[rev] = edited
		}
	}
	if f.progress != nil && (f.want == 0 || rev >= f.want) {
		p := Progress{Revision: rev, Type: envelope.TypeOf(ev), By: out.DecidedBy, Arguments: f.edits[rev]}
		switch b := ev.Body.(type) {
		case *airlockv1.Event_ApprovalRequested:
			p.Decision, p.Call = b.ApprovalRequested.GetDecision(), b.ApprovalRequested.GetCall()
			if d := b.ApprovalRequested.GetDeadline(); d != nil {
				p.Deadline = d.AsTime()
			}
			f.progress(p)
		case *airlockv1.Event_Approved, *airlockv1.Event_Allowed, *airlockv1.Event_Started:
			f.progress(p)
		}
	}
	switch b := ev.Body.(type) {
	case *airlockv1.Event_Requested:
		f.gateOnly = f.gateOnly || b.Requested.GetCall().GetAgentRuns()
		return
	case *airlockv1.Event_Allowed:
		f.deciders[rev] = out.DecidedBy
		if f.gateOnly = f.gateOnly || b.Allowed.GetCall().GetAgentRuns(); !f.decision && !f.gateOnly {
			return
		}
		out.Status, out.Decision, out.Call = StatusAllowed, b.Allowed.GetDecision(), b.Allowed.GetCall()
		out.Reason = b.Allowed.GetDecision().GetReason()
	case *airlockv1.Event_Approved:
		f.deciders[rev] = out.DecidedBy
		if f.gateOnly = f.gateOnly || b.Approved.GetCall().GetAgentRuns(); !f.decision && !f.gateOnly {
			return
		}
		out.Status, out.Decision, out.Call = StatusApproved, b.Approved.GetDecision(), b.Approved.GetCall()
		if votes := b.Approved.GetVotes(); len(votes) > 0 {
			out.Reason = votes[len(votes)-1].GetComment()
		}
	case *airlockv1.Event_Denied:
		out.Status, out.Reason, out.Decision, out.Call = StatusDenied, b.Denied.GetDecision().GetReason(), b.Denied.GetDecision(), b.Denied.GetCall()
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
		out.AgentRan, out.ArgumentsDiffer = b.Completed.GetAgentRan(), b.Completed.GetArgumentsDiffer()
		if r := b.Completed.GetResultJson(); r != "" {
			out.Result = json.RawMessage(r)
		}
	case *airlockv1.Event_Failed:
		out.Status, out.Reason, out.FailureOutcome = StatusFailed, b.Failed.GetReason(), b.Failed.GetOutcome()
		out.AgentRan, out.ArgumentsDiffer = b.Failed.GetAgentRan(), b.Failed.GetArgumentsDiffer()
		if msg := b.Failed.GetMessage(); msg != "" {
			out.Reason += ": " + msg
		}
		if r := b.Failed.GetResultJson(); r != "" {
			out.Result, out.Truncated = json.RawMessage(r), b.Failed.GetTruncated()
		}
	case *airlockv1.Event_Invalid:
		out.Status, out.Reason = StatusInvalid, b.Invalid.GetReason()
	default:
		return
	}
	if f.replaces(rev, out, seq) {
		f.ends[rev], f.seqs[rev] = out, seq
	}
}

// replaces reports whether out, stored at seq, is revision rev's end rather
// than the end seen so far: the first end (lowest sequence) of a revision is
// its end, except that a gate-only call's report (completed or failed,
// always after its allowed or approved) tells more than the decision did.
func (f *follower) replaces(rev uint32, out Outcome, seq uint64) bool {
	prev, done := f.ends[rev]
	reported := func(o Outcome) bool { return o.Status == StatusCompleted || o.Status == StatusFailed }
	switch {
	case !done:
		return true
	case prev.Allowed() && reported(out):
		return true
	case out.Allowed() && reported(prev):
		return false
	}
	return seq < f.seqs[rev]
}

// Resolution is a person's answer to "did it happen?" about a call that
// ended failed with outcome indeterminate (the tool may or may not have
// run).
type Resolution struct {
	Revision uint32 `json:"revision"`
	// Happened: the person says the call took effect.
	Happened bool `json:"happened"`
	// Note is what they wrote (what they checked); agent-visible text a
	// person chose.
	Note string `json:"note,omitempty"`
	// By is who answered.
	By string `json:"by"`
}

// storedResolution reads the answer about revision rev, nil when none.
func (c *Client) storedResolution(ctx context.Context, callID string, rev uint32) (*Resolution, error) {
	ev, err := c.lastEventOf(ctx, callID, subject.OutcomeResolved)
	if err != nil || ev == nil {
		return nil, err
	}
	return resolutionOf(ev, rev), nil
}

// lastEventOf is the last stored event of type typ of call callID, nil
// when there is none.
func (c *Client) lastEventOf(ctx context.Context, callID, typ string) (*airlockv1.Event, error) {
	m, err := c.lastOf(ctx, callID, typ)
	if err != nil || m == nil {
		return nil, err
	}
	ev, _, ok := c.eventOf(m, callID)
	if !ok {
		return nil, nil
	}
	return ev, nil
}

// Recorded is the newest revision of call callID that airlock recorded
// (its requested event's call, as the policy stored it), nil when none
// is. A call id names one call: a front-end that lets its clients choose
// ids reads it to refuse, with a sentence, a call submitted again under
// an id recorded with other content, which the policy service refuses
// without a word to the agent (an unauthorized_attempt on the trail), so
// that a wait for it would end with the recorded call's outcome.
func (c *Client) Recorded(ctx context.Context, callID string) (*airlockv1.ToolCall, error) {
	ev, err := c.lastEventOf(ctx, callID, subject.Requested)
	if err != nil || ev == nil {
		return nil, err
	}
	call := ev.GetRequested().GetCall()
	if call != nil {
		call.Revision = max(call.GetRevision(), 1)
	}
	return call, nil
}

// Withdrawn is the newest revision of call callID that was canceled (its
// `canceled` event), 0 when none was. One newer than Recorded's was
// withdrawn by its agent while its request waited for the policy, which
// drops such a request: a front-end that lets its clients choose ids
// reads both to refuse, with a sentence, a call submitted again under it.
func (c *Client) Withdrawn(ctx context.Context, callID string) (uint32, error) {
	ev, err := c.lastEventOf(ctx, callID, subject.Canceled)
	if err != nil || ev == nil {
		return 0, err
	}
	return max(ev.GetRevision(), 1), nil
}

func resolutionOf(ev *airlockv1.Event, rev uint32) *Resolution {
	r := ev.GetOutcomeResolved()
	if r == nil || (rev != 0 && ev.GetRevision() != rev) {
		return nil
	}
	return &Resolution{Revision: ev.GetRevision(), Happened: r.GetHappened(), Note: r.GetNote(), By: ev.GetActor().GetId()}
}

// AwaitResolution waits for a person's answer about revision rev (0: any)
// of a call that ended in doubt (Outcome.FailureOutcome "indeterminate"):
// whether it happened, asked of reviewers in the console and CLI. It reads
// what is stored, then follows the call live; it returns when ctx ends
// without an answer. A call that ended in doubt past a bound
// (approval.max_in_doubt_per_agent, a full in-doubt bucket) is not listed
// for reviewers, though one may still answer it: bound ctx.
func (c *Client) AwaitResolution(ctx context.Context, callID string, rev uint32) (Resolution, error) {
	if err := ids.Validate("call id", callID); err != nil {
		return Resolution{}, fmt.Errorf("await resolution: %w", err)
	}
	live, stop, err := c.subscribeCall(ctx, callID, 16)
	if err != nil {
		return Resolution{}, fmt.Errorf("await the resolution of call %s: %w", callID, err)
	}
	defer stop()
	resync := time.NewTicker(c.resyncInterval())
	defer resync.Stop()
	for {
		if r, err := c.storedResolution(ctx, callID, rev); err == nil && r != nil {
			return *r, nil
		} else if err != nil && isPermanent(err) {
			return Resolution{}, fmt.Errorf("await the resolution of call %s: %w", callID, err)
		}
		select {
		case m := <-live:
			if ev, _, ok := c.eventOf(m, callID); ok {
				if r := resolutionOf(ev, rev); r != nil {
					return *r, nil
				}
			}
		case <-resync.C: // a republished event can be missed: read the stream again
		case <-ctx.Done():
			return Resolution{}, fmt.Errorf("await the resolution of call %s: %w", callID, ctx.Err())
		}
	}
}

// subscribeCall follows the call's republished events live; stop ends it.
// The subscription is in place when it returns, so stored events read
// afterwards miss nothing in between.
func (c *Client) subscribeCall(ctx context.Context, callID string, buf int) (live chan *nats.Msg, stop func(), err error) {
	return c.follows.follow(ctx, c.agent, callID, buf)
}
