package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// UpdateTTL writes data at key of bucket if the key is still at revision
// rev, as kv.Update does, and has the server remove it after ttl (at
// least a second, the server's least). The KV API sets a TTL only on
// Create (jetstream.KeyTTL), so the write is the bucket's own message with
// the expected last sequence of its subject; a lost race is a Conflict.
// The bucket must take per-key TTLs (TakesKeyTTLs).
func UpdateTTL(ctx context.Context, js jetstream.JetStream, bucket, key string, data []byte, rev uint64, ttl time.Duration) error {
	_, err := js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + bucket + "." + key, Data: data},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(max(ttl, time.Second)))
	return err
}
