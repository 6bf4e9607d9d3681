package approval

import (
	"sync"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/quota"
)

// coalescer bounds how many of one agent's calls each channel announces
// one by one (R-attack5 F3: an agent submitting and canceling calls sent
// every reviewer a push, a mail and a page per call, thousands a minute):
// approval.notify_burst at once, then one more each approval.notify_refill
// (a token bucket per channel and agent). The calls past it are counted
// instead, and the channel is told of them in one digest per
// notify_refill. It is each replica's own: with R replicas an agent gets up
// to R times the bound, which still holds the flood to a few messages a
// minute.
type coalescer struct {
	burst  int
	refill time.Duration
	rate   quota.Rate // burst tokens, one earned per refill
	now    func() time.Time

	mu      sync.Mutex
	buckets map[rateKey]*rateBucket
}

type rateKey struct{ channel, agent string }

type rateBucket struct {
	quota.Bucket
	// waiting counts the calls coalesced since the last digest; latest is
	// the last of them.
	waiting int
	latest  *airlockv1.ApprovalRecord
}

// pruneAbove is how many buckets are kept before the full, idle ones are
// dropped (a full bucket is what a new one would be).
const pruneAbove = 4096

func newCoalescer(burst int, refill time.Duration, now func() time.Time) *coalescer {
	burst = max(burst, 1)
	return &coalescer{burst: burst, refill: refill, rate: quota.Rate{Capacity: float64(burst), Refill: time.Duration(burst) * refill},
		now: now, buckets: map[rateKey]*rateBucket{}}
}

// take reports whether channel may announce a call of agent one by one,
// and counts it if so.
func (c *coalescer) take(channel, agent string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bucket(rateKey{channel, agent}).Take(c.rate, c.now(), 1)
}

// coalesce counts rec as not announced on channel, and reports whether it
// is the first since the last digest (the caller then schedules the next).
func (c *coalescer) coalesce(channel string, rec *airlockv1.ApprovalRecord) (first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bucket(rateKey{channel, rec.GetCall().GetAgentId()})
	b.waiting++
	b.latest = rec
	return b.waiting == 1
}

// digest takes what channel has to tell of agent's coalesced calls.
func (c *coalescer) digest(channel, agent string) (notify.Digest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.buckets[rateKey{channel, agent}]
	if !ok || b.waiting == 0 {
		return notify.Digest{}, false
	}
	d := notify.Digest{Agent: agent, Calls: b.waiting, Latest: b.latest}
	b.waiting, b.latest = 0, nil
	return d, true
}

// bucket returns key's bucket; c.mu is held.
func (c *coalescer) bucket(key rateKey) *rateBucket {
	b, ok := c.buckets[key]
	if !ok {
		if len(c.buckets) >= pruneAbove {
			c.prune(c.now())
		}
		b = &rateBucket{}
		c.buckets[key] = b
	}
	return b
}

// prune drops the buckets that are full again and hold no digest.
func (c *coalescer) prune(now time.Time) {
	for key, b := range c.buckets {
		if b.waiting == 0 && b.Full(c.rate, now) {
			delete(c.buckets, key)
		}
	}
}
