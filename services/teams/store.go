package teams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// store is the Teams integration's JetStream KV bucket (buckets.teams_seen,
// entries expire after bus.TeamsSeenTTL). Every replica shares it, so an
// activity replayed to another replica is still refused, and an Announce
// repeated after a crash finds the card the first attempt posted.
type store struct{ kv jetstream.KeyValue }

func openStore(ctx context.Context, js jetstream.JetStream, bucket string) (*store, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("open Teams bucket %s (is the bus provisioned? `airlock dev` and `airlock serve` do it): %w", bucket, err)
	}
	return &store{kv: kv}, nil
}

// firstSight records an activity by key and reports whether it is new.
// KV Create is the compare-and-set: of two replicas receiving the same
// activity, exactly one sees true.
func (s *store) firstSight(ctx context.Context, key string) (bool, error) {
	_, err := s.kv.Create(ctx, "seen."+key, nil)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record Teams activity: %w", err)
	}
	return true, nil
}

// posted returns the reference of a card already posted for key, or "".
func (s *store) posted(ctx context.Context, key string) (string, error) {
	e, err := s.kv.Get(ctx, "posted."+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up posted Teams card %s: %w", key, err)
	}
	return string(e.Value()), nil
}

func (s *store) markPosted(ctx context.Context, key, ref string) error {
	if _, err := s.kv.Put(ctx, "posted."+key, []byte(ref)); err != nil {
		return fmt.Errorf("remember posted Teams card %s: %w", key, err)
	}
	return nil
}

// digest makes any string a valid, fixed-length KV key token.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
