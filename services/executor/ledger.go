package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// StreamLedger is the Ledger on the events stream: Inspect reads the last
// stored events with Direct Get, Append is compare-and-append on the call's
// execution subjects (envelope.PublishAfter).
type StreamLedger struct {
	nc     *nats.Conn
	stream string
	pub    *bus.Publisher
	// readTimeout bounds one read.
	readTimeout time.Duration
}

// NewStreamLedger reads and appends to stream through nc and pub.
func NewStreamLedger(nc *nats.Conn, stream string, pub *bus.Publisher) *StreamLedger {
	return &StreamLedger{nc: nc, stream: stream, pub: pub, readTimeout: 5 * time.Second}
}

// Inspect implements Ledger. The ledger's last sequence is read first: an
// event stored after it makes an Append after Last fail.
func (l *StreamLedger) Inspect(ctx context.Context, ref callref.Ref) (State, error) {
	var st State
	last, err := l.last(ctx, subject.OfExecution(ref.Agent, ref.Call))
	if err != nil {
		return st, err
	}
	if last != nil {
		st.Last = bus.StoredSeq(last)
	}
	for _, typ := range subject.ExecTypes {
		ev, seq, err := l.lastOf(ctx, ref, typ)
		if err != nil {
			return st, err
		}
		if ev == nil || max(ev.GetRevision(), 1) != ref.Rev {
			continue
		}
		if typ == subject.Started {
			st.Started, st.StartedSeq = ev.GetStarted(), seq
		} else {
			st.Ended, st.EndedBy = true, claimOf(ev)
		}
	}
	return st, nil
}

func (l *StreamLedger) lastOf(ctx context.Context, ref callref.Ref, typ string) (*airlockv1.Event, uint64, error) {
	subj, err := subject.Event(ref.Agent, ref.Call, typ)
	if err != nil {
		return nil, 0, err
	}
	m, err := l.last(ctx, subj)
	if err != nil || m == nil {
		return nil, 0, err
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		return nil, 0, fmt.Errorf("decode the last %s event of %s: %w", typ, ref, err)
	}
	return ev, bus.StoredSeq(m), nil
}

func (l *StreamLedger) last(ctx context.Context, subj string) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, l.readTimeout)
	defer cancel()
	return bus.LastStoredLeader(rctx, l.nc, l.stream, subj)
}

// Append implements Ledger.
func (l *StreamLedger) Append(ctx context.Context, ev *airlockv1.Event, afterSeq uint64) (uint64, error) {
	ack, err := l.pub.PublishAfter(ctx, ev, "", subject.OfExecution(ev.GetAgentId(), ev.GetCallId()), afterSeq)
	if errors.Is(err, bus.ErrConflict) {
		return 0, fmt.Errorf("%w: %v", ErrConflict, err)
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// KVLiveness is Liveness on the executions bucket: one record per running
// revision, key callref.Key, rewritten (Put, not compare-and-set: only its
// owner writes it) every heartbeat; Look returns the entry's revision.
type KVLiveness struct{ kv jetstream.KeyValue }

// NewKVLiveness wraps the executions bucket.
func NewKVLiveness(kv jetstream.KeyValue) *KVLiveness { return &KVLiveness{kv: kv} }

// Beat implements Liveness.
func (k *KVLiveness) Beat(ctx context.Context, ref callref.Ref, rec *airlockv1.ExecutionRecord) error {
	rec = proto.Clone(rec).(*airlockv1.ExecutionRecord)
	rec.HeartbeatAt = timestamppb.Now()
	b, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode liveness of %s: %w", ref, err)
	}
	if _, err := k.kv.Put(ctx, ref.Key(), b); err != nil {
		return fmt.Errorf("heartbeat %s: %w", ref, err)
	}
	return nil
}

// Look implements Liveness.
func (k *KVLiveness) Look(ctx context.Context, ref callref.Ref) (uint64, error) {
	e, err := k.kv.Get(ctx, ref.Key())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read liveness of %s: %w", ref, err)
	}
	return e.Revision(), nil
}
