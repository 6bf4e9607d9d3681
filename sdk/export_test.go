package airlock

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// WithLiveOnly makes Await read a call's stored events once, when it
// begins, and then follow the call only live (the periodic re-read waits a
// day); read is called after each read of the stored events. A test of the
// live path uses it so that the re-read cannot satisfy it instead.
func WithLiveOnly(read func()) Option {
	return func(c *Client) {
		c.resync = 24 * time.Hour
		c.storedRead = read
	}
}

// AgentsKept is how many agents have an entry in h.
func (h *OverBudgetNotices) AgentsKept() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.agents)
}

// Follow is Follows.follow, for the tests of its routing.
func (f *Follows) Follow(ctx context.Context, agent, call string, buf int) (chan *nats.Msg, func(), error) {
	return f.follow(ctx, agent, call, buf)
}
