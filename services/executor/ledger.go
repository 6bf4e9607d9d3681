package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
)

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
