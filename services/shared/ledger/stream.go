package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Stream is the Ledger on the events stream: Inspect reads the last stored
// events from the stream's leader, Append is compare-and-append on the
// call's execution subjects (bus.Publisher.PublishAfter).
type Stream struct {
	nc     *nats.Conn
	stream string
	pub    *bus.Publisher
	// readTimeout bounds one read.
	readTimeout time.Duration
}

// NewStream reads the ledgers in stream through nc and appends through pub.
func NewStream(nc *nats.Conn, stream string, pub *bus.Publisher) *Stream {
	return &Stream{nc: nc, stream: stream, pub: pub, readTimeout: 5 * time.Second}
}

// Inspect implements Ledger. The ledger's last sequence is read first: an
// event stored after it makes an Append after Last fail.
func (l *Stream) Inspect(ctx context.Context, ref callref.Ref) (State, error) {
	var st State
	last, err := l.last(ctx, subject.OfExecution(ref.Agent, ref.Call))
	if err != nil {
		return st, err
	}
	if last != nil {
		st.Last = bus.StoredSeq(last)
	}
	for _, typ := range subject.ExecTypes {
		subj, err := subject.Event(ref.Agent, ref.Call, typ)
		if err != nil {
			return st, err
		}
		rctx, cancel := context.WithTimeout(ctx, l.readTimeout)
		ev, seq, err := bus.LastEvent(rctx, l.nc, l.stream, subj)
		cancel()
		if err != nil {
			return st, fmt.Errorf("inspect the execution ledger of %s: %w", ref, err)
		}
		if ev != nil {
			apply(&st, ref, ev, seq)
		}
	}
	return st, nil
}

func (l *Stream) last(ctx context.Context, subj string) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, l.readTimeout)
	defer cancel()
	return bus.LastStoredLeader(rctx, l.nc, l.stream, subj)
}

// Append implements Ledger.
func (l *Stream) Append(ctx context.Context, ev *airlockv1.Event, afterSeq uint64) (uint64, error) {
	ack, err := l.pub.PublishAfter(ctx, ev, "", subject.OfExecution(ev.GetAgentId(), ev.GetCallId()), afterSeq)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return 0, err
		}
		return 0, fmt.Errorf("append to the execution ledger of %s.%s: %w", ev.GetAgentId(), ev.GetCallId(), err)
	}
	return ack.Sequence, nil
}
