package approval

import (
	"container/heap"
	"math"
	"time"
)

// dueQueue orders pending records by when the sweeper next has something
// to do for them (domain.NextDue), so a sweep looks at the records that are
// due, not at every pending one (100,000 pending: airlock bench pending).
// at holds each pending record's current due time; the heap may also hold
// older entries of a record that changed since, which are dropped when they
// come up (stale), and is rebuilt from at when those pile up.
type dueQueue struct {
	at   map[string]int64
	heap dueHeap
}

type dueEntry struct {
	at  int64
	key string
}

type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// set makes key due at t.
func (q *dueQueue) set(key string, t time.Time) {
	at := unixNano(t)
	if cur, ok := q.at[key]; ok && cur == at {
		return
	}
	q.at[key] = at
	heap.Push(&q.heap, dueEntry{at: at, key: key})
	if len(q.heap) > 2*len(q.at)+1024 {
		q.rebuild()
	}
}

// unixNano is t in unix nanoseconds, held at the bounds past them: a
// rule's timeout may be as long as a duration goes ("2562047h"), and a
// deadline past 2262 would wrap around to before 1970, due at every sweep
// (and one before 1678 to the far future, never due).
func unixNano(t time.Time) int64 {
	switch {
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	}
	return t.UnixNano()
}

// drop forgets key (its record is no longer pending).
func (q *dueQueue) drop(key string) { delete(q.at, key) }

func (q *dueQueue) rebuild() {
	q.heap = q.heap[:0]
	for key, at := range q.at {
		q.heap = append(q.heap, dueEntry{at: at, key: key})
	}
	heap.Init(&q.heap)
}

// due returns the keys due at now or before, earliest first. They stay
// due: a key leaves only when its record changes (set, drop), so a sweep
// whose work on a key failed finds it again at the next.
func (q *dueQueue) due(now time.Time) []string {
	limit := unixNano(now)
	var keys []string
	var kept []dueEntry
	seen := map[string]bool{}
	for len(q.heap) > 0 && q.heap[0].at <= limit {
		e := heap.Pop(&q.heap).(dueEntry)
		if cur, ok := q.at[e.key]; !ok || cur != e.at || seen[e.key] {
			continue // stale (the record changed or left) or a second entry
		}
		seen[e.key] = true
		keys = append(keys, e.key)
		kept = append(kept, e)
	}
	for _, e := range kept {
		heap.Push(&q.heap, e)
	}
	return keys
}
