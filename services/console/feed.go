package console

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// feedTypes are the events that change what an inbox shows: a call starts
// waiting, or it stops waiting whoever decided it and wherever.
var feedTypes = append([]string{subject.ApprovalRequested}, subject.ApprovalOutcomes...)

// feedMsg is one change pushed to inboxes.
type feedMsg struct {
	// Kind is "pending" (Record set) or "decided".
	Kind string
	// Key is the row key of the call (rowKey).
	Key    string
	Record *airlockv1.ApprovalRecord
}

// feed fans bus events out to the open inboxes of this replica.
type feed struct {
	con  *Console
	mu   sync.Mutex
	subs map[chan feedMsg]struct{}
}

func newFeed(con *Console) *feed { return &feed{con: con, subs: map[chan feedMsg]struct{}{}} }

// subscribe registers an inbox; cancel removes it. A subscriber too slow to
// keep up is dropped (its channel closed) so the browser reconnects and
// re-reads the inbox instead of silently missing changes.
func (f *feed) subscribe() (<-chan feedMsg, func()) {
	ch := make(chan feedMsg, 256)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		if _, ok := f.subs[ch]; ok {
			delete(f.subs, ch)
			close(ch)
		}
		f.mu.Unlock()
	}
}

func (f *feed) publish(m feedMsg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- m:
		default:
			delete(f.subs, ch)
			close(ch)
		}
	}
}

// run follows new events until ctx ends. The ordered consumer re-creates
// itself after a reconnect and continues where it was; if it cannot be
// created at all (the stream is not reachable yet), run retries every
// second rather than stopping the process.
func (f *feed) run(ctx context.Context) error {
	defer f.closeAll()
	filters := make([]string, len(feedTypes))
	for i, t := range feedTypes {
		filters[i] = subject.OfType(t)
	}
	for {
		err := f.follow(ctx, filters)
		if ctx.Err() != nil {
			return nil
		}
		f.con.log.Warn("console feed: cannot follow the events stream; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (f *feed) follow(ctx context.Context, filters []string) error {
	cons, err := f.con.js.OrderedConsumer(ctx, f.con.cfg.Stream.Name, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fmt.Errorf("console feed: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := envelope.Decode(m.Data(), m.Headers())
		if err != nil {
			f.con.log.Warn("console feed: undecodable event", "subject", m.Subject(), "err", err)
			return
		}
		if msg, ok := feedMessage(ev); ok {
			f.publish(msg)
		}
	})
	if err != nil {
		return fmt.Errorf("console feed: %w", err)
	}
	f.con.ready.Mark()
	<-ctx.Done()
	cc.Stop()
	return nil
}

// closeAll ends every open inbox stream (the browsers reconnect elsewhere).
func (f *feed) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		delete(f.subs, ch)
		close(ch)
	}
}

// feedMessage turns an event into an inbox change.
func feedMessage(ev *airlockv1.Event) (feedMsg, bool) {
	if slices.Contains(subject.ApprovalOutcomes, envelope.TypeOf(ev)) {
		return feedMsg{Kind: "decided", Key: rowKey(ev.GetAgentId(), ev.GetCallId())}, true
	}
	switch b := ev.Body.(type) {
	case *airlockv1.Event_ApprovalRequested:
		rec := &airlockv1.ApprovalRecord{
			Call: b.ApprovalRequested.GetCall(), Decision: b.ApprovalRequested.GetDecision(),
			State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, Deadline: b.ApprovalRequested.GetDeadline(),
			CreatedAt: ev.GetTime(),
		}
		if rec.Call == nil {
			return feedMsg{}, false
		}
		return feedMsg{Kind: "pending", Key: rowKey(rec.GetCall().GetAgentId(), rec.GetCall().GetCallId()), Record: rec}, true
	}
	return feedMsg{}, false
}
