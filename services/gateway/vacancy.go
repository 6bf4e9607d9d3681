package gateway

import "sync"

// vacancies tells a request that waits for a call without a lease of its
// own (clientwait.MaxWaiters others hold them) when a request of this
// gateway ended its lease on the call, so that it asks for a lease then,
// rather than reading the call's presence at every renewal: many identical
// requests multiplied the bucket's reads. A lease ended elsewhere (another
// replica, or one run out) is found at its slower retry (leaselessRetry).
type vacancies struct {
	mu    sync.Mutex
	calls map[string]*vacancy // by agent.call
}

type vacancy struct {
	freed   chan struct{} // closed when a lease on the call ends
	waiters int           // lease-less requests of the call (joined)
}

func newVacancies() *vacancies { return &vacancies{calls: map[string]*vacancy{}} }

// join notes a lease-less request of call key; leave once it waits no more.
func (v *vacancies) join(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.calls[key]
	if c == nil {
		c = &vacancy{freed: make(chan struct{})}
		v.calls[key] = c
	}
	c.waiters++
}

func (v *vacancies) leave(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.calls[key]; c != nil {
		if c.waiters--; c.waiters <= 0 {
			delete(v.calls, key)
		}
	}
}

// freed is closed at the next lease on call key that ends (after join).
func (v *vacancies) freed(key string) <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.calls[key]; c != nil {
		return c.freed
	}
	return nil
}

// vacated says a lease on call key ended.
func (v *vacancies) vacated(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.calls[key]; c != nil {
		close(c.freed)
		c.freed = make(chan struct{})
	}
}
