package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// KVStore is the ClaimStore on a JetStream KV bucket (executor records,
// protobuf binary, key "<call>.<revision>"). Its compare-and-set is the
// bucket's: Create fails on an existing key, Update on a stale revision.
type KVStore struct {
	kv jetstream.KeyValue
}

// NewKVStore wraps the executions bucket.
func NewKVStore(kv jetstream.KeyValue) *KVStore { return &KVStore{kv: kv} }

// Create implements ClaimStore.
func (s *KVStore) Create(ctx context.Context, key string, rec *airlockv1.ExecutionRecord) (uint64, error) {
	b, err := proto.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode execution record %s: %w", key, err)
	}
	rev, err := s.kv.Create(ctx, key, b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%s: %w", key, ErrClaimExists)
	}
	return rev, err
}

// Get implements ClaimStore.
func (s *KVStore) Get(ctx context.Context, key string) (*airlockv1.ExecutionRecord, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	rec := &airlockv1.ExecutionRecord{}
	if err := proto.Unmarshal(e.Value(), rec); err != nil {
		return nil, 0, fmt.Errorf("decode execution record %s: %w", key, err)
	}
	return rec, e.Revision(), nil
}

// Update implements ClaimStore.
func (s *KVStore) Update(ctx context.Context, key string, rec *airlockv1.ExecutionRecord, rev uint64) (uint64, error) {
	b, err := proto.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode execution record %s: %w", key, err)
	}
	n, err := s.kv.Update(ctx, key, b, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%s: %w", key, ErrClaimChanged)
	}
	return n, err
}
