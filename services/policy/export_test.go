package policy

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AsksWaitingForGrants is how many asks wait now for the grants in force
// to catch up with the grants bucket: a test starts the watch only once an
// ask waits, so that the wait, not luck, brings the grant.
func AsksWaitingForGrants(e *Engine) int { return len(e.grantWaiters) }

// SetGrantWait makes an ask that found no grant wait up to d (not
// grantWait) for the grants in force to catch up with the bucket: a test
// of that wait then does not depend on how soon a loaded machine brings
// the grant. Call it before the engine runs or decides.
func SetGrantWait(e *Engine, d time.Duration) { e.waitGrants = d }

// RunEngine follows the buckets and the policy directory as the service
// does, for a test that drives an engine without the service around it.
func RunEngine(ctx context.Context, e *Engine) error { return e.run(ctx, func() {}) }

// UseGrantsBucket makes the engine read its grants from kv.
func UseGrantsBucket(e *Engine, kv jetstream.KeyValue) { e.grants = kv }

// RunEngineReady is RunEngine calling ready once the engine's watches have
// started.
func RunEngineReady(ctx context.Context, e *Engine, ready func()) error { return e.run(ctx, ready) }
