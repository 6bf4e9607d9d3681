package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/notify"
)

// fanout tells every notification channel at once. Each delivery goes
// through its channel's lane (its own workers, the agents served in turn)
// with its own timeout, so a slow or broken channel delays no other channel
// and no decision, and one agent's backlog on a channel does not hold the
// other agents' deliveries behind it; each success is recorded as
// `notified`.
type fanout struct {
	notifiers []notify.Notifier
	timeout   time.Duration
	log       *slog.Logger
	// record publishes a `notified` event; failures are logged, not retried.
	record func(ctx context.Context, ev *airlockv1.Event)
	// lanes holds each channel's lane, by name; workers is how many
	// deliveries a channel makes at once.
	lanes   map[string]*lane
	workers int
	// rate coalesces an agent's announcements past its share on a channel.
	rate *coalescer
}

func newFanout(notifiers []notify.Notifier, timeout time.Duration, workers int, rate *coalescer, log *slog.Logger, record func(context.Context, *airlockv1.Event)) *fanout {
	f := &fanout{notifiers: notifiers, timeout: timeout, log: log, record: record, lanes: map[string]*lane{}, workers: workers, rate: rate}
	for _, n := range notifiers {
		f.lanes[n.Name()] = newLane()
	}
	return f
}

// start runs every channel's lane.
func (f *fanout) start() {
	for _, l := range f.lanes {
		l.start(f.workers)
	}
}

// stop ends every channel's lane once what is queued was delivered.
func (f *fanout) stop() {
	for _, l := range f.lanes {
		l.stop()
	}
}

// deliver queues one delivery to n about rec, behind the deliveries to n
// of rec's agent that came before it.
func (f *fanout) deliver(n notify.Notifier, rec *airlockv1.ApprovalRecord, job func()) {
	f.lanes[n.Name()].submit(rec.GetCall().GetAgentId(), job)
}

// coalesce leaves rec unannounced on n (its agent is past its share of
// announcements there) and makes sure a digest follows within one
// approval.notify_refill. The call has no reference on n, so neither its
// reminders nor its outcome are sent there either.
func (f *fanout) coalesce(ctx context.Context, n notify.Notifier, rec *airlockv1.ApprovalRecord) {
	if !f.rate.coalesce(n.Name(), rec) {
		return // a digest is due already
	}
	agent := rec.GetCall().GetAgentId()
	f.log.Info("an agent is past its share of announcements on a channel: its calls there are told in a digest",
		"channel", n.Name(), "agent", agent, "notify_burst", f.rate.burst, "notify_refill", f.rate.refill)
	time.AfterFunc(f.rate.refill, func() {
		if ctx.Err() != nil {
			return
		}
		d, ok := f.rate.digest(n.Name(), agent)
		if !ok {
			return
		}
		dg, ok := n.(notify.Digester)
		if !ok {
			f.log.Info("calls were not announced one by one on a channel that sends no digest; they wait in the console",
				"channel", n.Name(), "agent", agent, "calls", d.Calls)
			return
		}
		f.deliver(n, rec, func() {
			dctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			if _, err := safely(func() (string, error) { return "", dg.Digest(dctx, d) }); err != nil {
				f.log.Warn("a digest of coalesced calls failed on one channel; they wait in the console", "channel", n.Name(), "agent", agent, "calls", d.Calls, "err", err)
			}
		})
	})
}

// settleWindow is how long announce gathers the channels' references
// before writing them: the channels that answer within it (all of them,
// usually) are written to the record in one write and recorded as
// `notified` together after the last of them, so this bookkeeping does not
// compete for CPU with channels still delivering; a channel answering later
// is written as it answers. A decision made meanwhile is not lost: a
// reference written after the call was decided is shown the outcome at once.
const settleWindow = 250 * time.Millisecond

// announce tells every channel that wants rec and has not announced it yet
// about it, and hands the references of the channels that answered to told
// (see settleWindow): a slow or hanging channel holds up no other channel's
// reference, nor so the outcome that channel is shown. On escalation it is
// called again: a channel that wants only escalated calls (an on-call
// pager, "escalate:pagerduty") is told then, the others are not told twice.
// It returns when every channel has answered or timed out.
func (f *fanout) announce(ctx context.Context, rec *airlockv1.ApprovalRecord, told func([]*airlockv1.NotificationRef)) {
	// Room for every answer: a delivery never waits for this loop.
	answers := make(chan *airlockv1.NotificationRef, len(f.notifiers))
	asked := 0
	for _, n := range f.notifiers {
		if announced(rec, n.Name()) || !f.wants(n, rec) {
			continue
		}
		if !f.rate.take(n.Name(), rec.GetCall().GetAgentId()) {
			f.coalesce(ctx, n, rec)
			continue
		}
		asked++
		f.deliver(n, rec, func() {
			dctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			// Each channel gets its own copy: one channel cannot disturb what another sees.
			own := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			ref, err := safely(func() (string, error) { return n.Announce(dctx, own) })
			if err != nil {
				f.log.Warn("announcing a pending call failed on one channel; the others are unaffected",
					"channel", n.Name(), "call", domain.RefOf(rec).Key(), "err", err)
				answers <- nil
				return
			}
			answers <- &airlockv1.NotificationRef{Channel: n.Name(), Ref: ref}
		})
	}
	var gathered []*airlockv1.NotificationRef
	flush := func() {
		if len(gathered) == 0 {
			return
		}
		told(gathered)
		for _, r := range gathered {
			f.record(ctx, domain.NotifiedEvent(rec, r.GetChannel(), r.GetRef(), "announce"))
		}
		gathered = nil
	}
	settle := time.NewTimer(settleWindow)
	defer settle.Stop()
	settled := false
	for asked > 0 {
		select {
		case r := <-answers:
			asked--
			if r != nil {
				gathered = append(gathered, r)
			}
			if settled {
				flush()
			}
		case <-settle.C:
			settled = true
			flush()
		}
	}
	flush()
}

// remind re-announces rec on every channel that announced it (kind
// "remind" or "escalate").
func (f *fanout) remind(ctx context.Context, rec *airlockv1.ApprovalRecord, kind string) {
	f.eachRef(ctx, rec, kind, func(ctx context.Context, n notify.Notifier, r *airlockv1.ApprovalRecord, ref string) error {
		return n.Remind(ctx, r, ref)
	})
}

// update shows rec's outcome on every channel that announced it.
func (f *fanout) update(ctx context.Context, rec *airlockv1.ApprovalRecord) {
	f.eachRef(ctx, rec, "outcome", func(ctx context.Context, n notify.Notifier, r *airlockv1.ApprovalRecord, ref string) error {
		return n.Update(ctx, r, ref)
	})
}

// redraw draws rec, still pending, again on every channel that announced
// it and draws more than the call (notify.Redrawer); the others are told
// nothing. It records no `notified` event: no one was told anything new.
//
// A decision may land while a redraw waits in the lane or is on its way,
// and its outcome be drawn first (by this replica's other worker or by
// another replica): the pending card, buttons and all, would then cover
// it. So each message is redrawn only while current (the record of rec's
// revision as stored now) is pending, and after the redraw, failed or not,
// current is read again: a decided call's outcome is drawn once more over
// the redrawn card. The outcome was
// recorded as `notified` when it was first drawn, so this is not.
func (f *fanout) redraw(ctx context.Context, rec *airlockv1.ApprovalRecord, current func(context.Context) (*airlockv1.ApprovalRecord, error)) {
	redraws := func(n notify.Notifier) bool { _, ok := n.(notify.Redrawer); return ok }
	pending := func(ctx context.Context) (*airlockv1.ApprovalRecord, bool, error) {
		now, err := current(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("read call %s to redraw its card: %w", domain.RefOf(rec).Key(), err)
		}
		return now, now.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING, nil
	}
	f.refsOf(ctx, rec, "redraw", redraws, false, func(ctx context.Context, n notify.Notifier, _ *airlockv1.ApprovalRecord, ref string) error {
		now, ok, err := pending(ctx)
		if err != nil || !ok {
			return err // decided: the outcome is drawn, or on its way
		}
		// Read again even when the redraw failed: a channel may apply a
		// request whose answer is lost or comes too late.
		drawErr := n.(notify.Redrawer).Redraw(ctx, now, ref)
		if now, ok, err = pending(ctx); err != nil || ok {
			return errors.Join(drawErr, err)
		}
		if err := n.Update(ctx, now, ref); err != nil {
			return errors.Join(drawErr, fmt.Errorf("draw the outcome of call %s again over its redrawn card: %w", domain.RefOf(now).Key(), err))
		}
		return drawErr
	})
}

// eachRef runs do for every message rec names, recording each success as
// `notified` (kind says what was told).
func (f *fanout) eachRef(ctx context.Context, rec *airlockv1.ApprovalRecord, kind string, do func(context.Context, notify.Notifier, *airlockv1.ApprovalRecord, string) error) {
	f.refsOf(ctx, rec, kind, func(notify.Notifier) bool { return true }, true, do)
}

// refsOf runs do for every message rec names on a channel this process
// runs and pick accepts, each through its channel's lane; with record,
// each success is recorded as `notified`.
func (f *fanout) refsOf(ctx context.Context, rec *airlockv1.ApprovalRecord, kind string, pick func(notify.Notifier) bool, record bool, do func(context.Context, notify.Notifier, *airlockv1.ApprovalRecord, string) error) {
	var wg sync.WaitGroup
	for _, ref := range rec.GetNotifications() {
		n, ref := f.byName(ref.GetChannel()), ref.GetRef()
		if n == nil || !pick(n) {
			continue // a channel this process does not run (another replica's, or removed), or not asked
		}
		wg.Add(1)
		f.deliver(n, rec, func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			own := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			if _, err := safely(func() (string, error) { return "", do(dctx, n, own, ref) }); err != nil {
				f.log.Warn("notification failed on one channel; the others are unaffected", "channel", n.Name(), "kind", kind,
					"call", domain.RefOf(rec).Key(), "err", err)
				return
			}
			if record {
				f.record(ctx, domain.NotifiedEvent(rec, n.Name(), ref, kind))
			}
		})
	}
	wg.Wait()
}

func (f *fanout) wants(n notify.Notifier, rec *airlockv1.ApprovalRecord) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			f.log.Error("notifier panicked in Wants; skipping it for this call", "channel", n.Name(), "panic", r)
			ok = false
		}
	}()
	return n.Wants(rec)
}

// announced reports whether channel already holds a message about rec.
func announced(rec *airlockv1.ApprovalRecord, channel string) bool {
	return slices.ContainsFunc(rec.GetNotifications(), func(n *airlockv1.NotificationRef) bool { return n.GetChannel() == channel })
}

func (f *fanout) byName(name string) notify.Notifier {
	for _, n := range f.notifiers {
		if n.Name() == name {
			return n
		}
	}
	return nil
}

// safely contains a notifier's panic as an error, so one broken channel
// cannot take the service down.
func safely(fn func() (string, error)) (ref string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{r}
		}
	}()
	return fn()
}

type panicError struct{ v any }

func (p *panicError) Error() string { return "notifier panicked: " + slog.AnyValue(p.v).String() }
