// Package seen is the JetStream KV bucket a chat front-end (Slack, Teams)
// shares between its replicas: the requests it has already handled, so a
// replay sent to any replica is refused, and the cards it has already
// posted, so an Announce repeated after a crash finds the card instead of
// posting a second one. The bucket's entries expire (bus.Provision sets
// its TTL), so it holds only what can still be replayed or repeated.
package seen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is one front-end's bucket.
type Bucket struct {
	kv   jetstream.KeyValue
	what string // "Slack", "Teams": names the front-end in errors
}

// Open opens the provisioned bucket of the front-end named what.
func Open(ctx context.Context, js jetstream.JetStream, bucket, what string) (*Bucket, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("open %s bucket %s (is the bus provisioned? `airlock dev` and `airlock serve` do it): %w", what, bucket, err)
	}
	return &Bucket{kv: kv, what: what}, nil
}

// FirstSight records a request by key (a Digest of what identifies it)
// and reports whether it is new. KV Create is the compare-and-set: of two
// replicas receiving the same request, exactly one sees true.
func (b *Bucket) FirstSight(ctx context.Context, key string) (bool, error) {
	_, err := b.kv.Create(ctx, "seen."+key, nil)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record %s request: %w", b.what, err)
	}
	return true, nil
}

// Posted returns the reference of a card already posted for key, or "".
func (b *Bucket) Posted(ctx context.Context, key string) (string, error) {
	e, err := b.kv.Get(ctx, "posted."+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up posted %s card %s: %w", b.what, key, err)
	}
	return string(e.Value()), nil
}

// MarkPosted remembers the reference of the card posted for key.
func (b *Bucket) MarkPosted(ctx context.Context, key, ref string) error {
	if _, err := b.kv.Put(ctx, "posted."+key, []byte(ref)); err != nil {
		return fmt.Errorf("remember posted %s card %s: %w", b.what, key, err)
	}
	return nil
}

// Digest makes any string a valid, fixed-length KV key token.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
