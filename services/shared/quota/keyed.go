package quota

import (
	"sync"
	"time"
)

// Keyed is a token bucket of one Rate per key (an agent): how fast each may
// spend what all of them share. It is safe for concurrent use. A full
// bucket is what a new one would be, so once more than keyedPruneAbove are
// kept the full ones are forgotten.
type Keyed struct {
	rate Rate

	mu      sync.Mutex
	buckets map[string]*Bucket
}

const keyedPruneAbove = 4096

// NewKeyed is a Keyed whose buckets have rate r.
func NewKeyed(r Rate) *Keyed { return &Keyed{rate: r, buckets: map[string]*Bucket{}} }

// Take spends one of key's tokens at now and reports true, or reports false
// (and spends nothing) when key has none left.
func (k *Keyed) Take(key string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.buckets[key]
	if !ok {
		if len(k.buckets) >= keyedPruneAbove {
			for key, b := range k.buckets {
				if b.Full(k.rate, now) {
					delete(k.buckets, key)
				}
			}
		}
		b = &Bucket{}
		k.buckets[key] = b
	}
	return b.Take(k.rate, now, 1)
}
