package decide

import (
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// virtualCache is topdown's cache of the virtual documents (rules and
// function calls) one evaluation has computed, kept from one evaluation to
// the next: topdown's own builds a tree of hash maps per evaluation, a third
// of a decision's allocations. It holds what topdown's does — an exact ref
// maps to a value or to "undefined", only the top frame is visible — as one
// list per frame, indexed by the ref's hash. It serves one evaluation at a
// time; a virtualCachePool hands them out.
type virtualCache struct {
	frames []vcFrame
	top    int // index of the visible frame
}

type vcFrame struct {
	// latest maps a ref hash to the last entry with that hash; entries
	// with the same hash are chained through prev.
	latest  map[int]int32
	entries []vcEntry
	// terms hold the entries' refs, copied: topdown may reuse the slice
	// it passes (a plugged ref), though never the terms in it.
	terms []*ast.Term
}

type vcEntry struct {
	ref   ast.Ref
	value *ast.Term
	// undefined: the ref has no value. As in topdown's cache, it sticks
	// once set.
	undefined bool
	prev      int32 // previous entry with the same hash, -1 for none
}

var _ topdown.VirtualCache = (*virtualCache)(nil)

// maxReusedEntries bounds what a cache may hold and still be reused, so
// that one huge evaluation (the general path over thousands of rules) does
// not keep its tables alive and make every reset clear them.
const maxReusedEntries = 1024

// virtualCachePool hands out virtualCaches, one per evaluation, and takes
// them back (each Evaluator has its own: no process-wide state).
type virtualCachePool struct{ pool sync.Pool }

// get returns an empty cache for one evaluation; give it back with put
// when the evaluation is over.
func (p *virtualCachePool) get() *virtualCache {
	if c, ok := p.pool.Get().(*virtualCache); ok {
		return c
	}
	return &virtualCache{frames: []vcFrame{{latest: map[int]int32{}}}}
}

func (p *virtualCachePool) put(c *virtualCache) {
	size := 0
	for i := range c.frames {
		size += len(c.frames[i].entries)
	}
	if size > maxReusedEntries || len(c.frames) > 8 {
		return
	}
	for i := range c.frames {
		c.frames[i].reset()
	}
	c.top = 0
	p.pool.Put(c)
}

func (f *vcFrame) reset() {
	clear(f.latest)
	// Drop the terms, so that a cache in the pool keeps none alive.
	clear(f.entries)
	clear(f.terms)
	f.entries, f.terms = f.entries[:0], f.terms[:0]
}

// Push starts a new, empty frame (topdown pushes one per with statement).
func (c *virtualCache) Push() {
	c.top++
	if c.top == len(c.frames) {
		c.frames = append(c.frames, vcFrame{latest: map[int]int32{}})
	}
}

// Pop drops the top frame and everything cached in it.
func (c *virtualCache) Pop() {
	c.frames[c.top].reset()
	c.top--
}

// Get returns the value cached for ref; nil, true when ref is known to be
// undefined; nil, false when nothing is cached for it.
func (c *virtualCache) Get(ref ast.Ref) (*ast.Term, bool) {
	f := &c.frames[c.top]
	i, ok := f.latest[ref.Hash()]
	if !ok {
		return nil, false
	}
	for ; i >= 0; i = f.entries[i].prev {
		if e := &f.entries[i]; e.ref.Equal(ref) {
			if e.undefined {
				return nil, true
			}
			return e.value, false
		}
	}
	return nil, false
}

// Put caches value for ref; nil marks ref undefined.
func (c *virtualCache) Put(ref ast.Ref, value *ast.Term) {
	f := &c.frames[c.top]
	h := ref.Hash()
	prev, ok := f.latest[h]
	if !ok {
		prev = -1
	}
	var e *vcEntry
	for i := prev; i >= 0; i = f.entries[i].prev {
		if f.entries[i].ref.Equal(ref) {
			e = &f.entries[i]
			break
		}
	}
	if e == nil {
		start := len(f.terms)
		f.terms = append(f.terms, ref...)
		f.latest[h] = int32(len(f.entries))
		f.entries = append(f.entries, vcEntry{ref: f.terms[start:len(f.terms):len(f.terms)], prev: prev})
		e = &f.entries[len(f.entries)-1]
	}
	if value == nil {
		e.undefined = true
	} else {
		e.value = value
	}
}

// Keys returns the refs that have a value in the top frame.
func (c *virtualCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, e := range c.frames[c.top].entries {
		if e.value != nil {
			keys = append(keys, slices.Clone(e.ref))
		}
	}
	return keys
}
