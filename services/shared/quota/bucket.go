package quota

import "time"

// Rate is a token bucket's shape: it holds at most Capacity tokens and
// earns them back at Capacity per Refill (600 a minute, 64 MiB a minute,
// one per 10 s with a burst of 10: Capacity 10, Refill 100 s).
type Rate struct {
	Capacity float64
	Refill   time.Duration
}

// Bucket is one token bucket of a Rate the caller keeps. Its zero value is
// full, so a bucket made for a newcomer and one forgotten once full again
// are the same. It is not safe for concurrent use: its owner's lock guards
// it.
type Bucket struct {
	spent float64   // tokens missing from Capacity
	at    time.Time // when spent was last brought up to date
}

// Fill brings the bucket up to now: what it earned since it was last
// brought up to date, up to full.
func (b *Bucket) Fill(r Rate, now time.Time) {
	elapsed := now.Sub(b.at)
	switch {
	case b.at.IsZero():
		b.at = now
	case elapsed > 0: // a clock set back earns nothing
		if r.Refill > 0 {
			b.spent = max(0, b.spent-r.Capacity*float64(elapsed)/float64(r.Refill))
		}
		b.at = now
	}
}

// Has reports whether n tokens are in the bucket (as last filled).
func (b *Bucket) Has(r Rate, n float64) bool { return r.Capacity-b.spent >= n }

// Spend takes n tokens; the caller checked Has.
func (b *Bucket) Spend(n float64) { b.spent += n }

// Wait is how long the bucket, as last filled, takes to hold n tokens: 0
// when it holds them now.
func (b *Bucket) Wait(r Rate, n float64) time.Duration {
	missing := n - (r.Capacity - b.spent)
	if missing <= 0 || r.Capacity <= 0 {
		return 0
	}
	return time.Duration(missing / r.Capacity * float64(r.Refill))
}

// Take fills the bucket to now and spends n tokens if it has them.
func (b *Bucket) Take(r Rate, now time.Time, n float64) bool {
	b.Fill(r, now)
	if !b.Has(r, n) {
		return false
	}
	b.Spend(n)
	return true
}

// Full reports whether the bucket is full at now (it has earned back all
// it spent), without changing it: a full bucket may be forgotten.
func (b *Bucket) Full(r Rate, now time.Time) bool {
	c := *b
	c.Fill(r, now)
	return c.spent == 0
}
