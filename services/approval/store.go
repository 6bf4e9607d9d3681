package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
)

// errNotFound: no record for the key.
var errNotFound = errors.New("no approval record")

// maxCASAttempts bounds a compare-and-set retry loop; each conflict means
// another writer made progress, so running out is a sign of a bug, not load.
const maxCASAttempts = 200

// records is the JetStream KV adapter for approval records: key
// "<agent>.<call>.<revision>" (callref), value the protobuf binary of
// airlock.v1.ApprovalRecord.
type records struct {
	kv jetstream.KeyValue
	// js and bucket write an ended record with a TTL (bus.UpdateTTL),
	// which jetstream.KeyValue.Update cannot.
	js     jetstream.JetStream
	bucket string
	// endedTTL is approval.ended_retention; 0 when the bucket takes no
	// per-key TTL (provisioned before it did): ended records then stay.
	endedTTL time.Duration
}

// openRecords opens the approvals bucket; ended records expire after
// retention when the bucket takes per-key TTLs (bus.Provision).
func openRecords(ctx context.Context, js jetstream.JetStream, bucket string, retention time.Duration) (records, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return records{}, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return records{}, fmt.Errorf("status: %w", err)
	}
	r := records{kv: kv, js: js, bucket: bucket}
	if bus.TakesKeyTTLs(st) {
		r.endedTTL = retention
	}
	return r, nil
}

// update writes data at key if the key is still at kvrev; an ended record
// (or a thread's lock once the thread has nothing pending: retireTurn;
// ended true) is written with the retention TTL, after which the server
// removes it.
func (s records) update(ctx context.Context, key string, data []byte, kvrev uint64, ended bool) error {
	if !ended || s.endedTTL <= 0 || s.js == nil {
		_, err := s.kv.Update(ctx, key, data, kvrev)
		return err
	}
	return bus.UpdateTTL(ctx, s.js, s.bucket, key, data, kvrev, s.endedTTL)
}

func (s records) get(ctx context.Context, key string) (*airlockv1.ApprovalRecord, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w %s", errNotFound, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read approval %s: %w", key, err)
	}
	rec := &airlockv1.ApprovalRecord{}
	if err := proto.Unmarshal(e.Value(), rec); err != nil {
		return nil, 0, fmt.Errorf("decode approval %s: %w", key, err)
	}
	return rec, e.Revision(), nil
}

// latest returns the newest revision's record of a call, starting the search
// at ref.Rev (a revision known to exist, or 1).
func (s records) latest(ctx context.Context, ref callref.Ref) (*airlockv1.ApprovalRecord, uint64, error) {
	rev := max(ref.Rev, 1)
	rec, kvrev, err := s.get(ctx, ref.WithRev(rev).Key())
	if err != nil {
		return nil, 0, err
	}
	for {
		next, nrev, err := s.get(ctx, ref.WithRev(rev+1).Key())
		if errors.Is(err, errNotFound) {
			return rec, kvrev, nil
		}
		if err != nil {
			return nil, 0, err
		}
		rec, kvrev, rev = next, nrev, rev+1
	}
}

// create stores a new record; it returns jetstream.ErrKeyExists when the
// key is taken (the record was created before: a redelivery).
func (s records) create(ctx context.Context, rec *airlockv1.ApprovalRecord) (uint64, error) {
	data, err := proto.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode approval: %w", err)
	}
	key := domain.RefOf(rec).Key()
	var opts []jetstream.KVCreateOpt
	if domain.Final(rec) && s.endedTTL > 0 {
		// Created ended (refused past the agent's share): it leaves the
		// bucket after the retention, as any ended record does.
		opts = append(opts, jetstream.KeyTTL(s.endedTTL))
	}
	rev, err := s.kv.Create(ctx, key, data, opts...)
	if err != nil {
		return 0, fmt.Errorf("create approval %s: %w", key, err)
	}
	return rev, nil
}

// fill is how full the bucket is: the bytes it holds and its bound
// (approval.max_bytes, buckets.in_doubt_max_bytes; 0 when it has none,
// provisioned before it had).
func (s records) fill(ctx context.Context) (held uint64, bound int64, err error) {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("status of bucket %s: %w", s.kv.Bucket(), err)
	}
	kst, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return st.Bytes(), 0, nil
	}
	si := kst.StreamInfo()
	return si.State.Bytes, max(si.Config.MaxBytes, 0), nil
}

// mutate is the compare-and-set loop every transition goes through: it reads
// the record, asks step for the next one, and writes it only if nobody wrote
// in between; on a conflict it starts over from the fresh record. step
// returns nil to write nothing. It returns the record as it now stands,
// whether mutate wrote it, and what step said the last time it ran.
func mutate[T any](ctx context.Context, s records, key string, step func(*airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, T, error)) (*airlockv1.ApprovalRecord, bool, T, error) {
	var zero T
	for range maxCASAttempts {
		cur, kvrev, err := s.get(ctx, key)
		if err != nil {
			return nil, false, zero, err
		}
		next, out, err := step(cur)
		if err != nil || next == nil {
			return cur, false, out, err
		}
		data, err := proto.Marshal(next)
		if err != nil {
			return nil, false, out, fmt.Errorf("encode approval %s: %w", key, err)
		}
		err = s.update(ctx, key, data, kvrev, domain.Final(next))
		if err == nil {
			return next, true, out, nil
		}
		if !bus.Conflict(err) {
			return nil, false, out, fmt.Errorf("write approval %s: %w", key, err)
		}
	}
	return nil, false, zero, fmt.Errorf("write approval %s: still conflicting after %d attempts", key, maxCASAttempts)
}
