package airlock

import (
	"context"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Follows hands the republished events of the calls being followed on one
// connection to their followers over one subscription per agent
// (airlock.out.<agent>.>), held while any call of the agent is followed.
//
// A subscription per followed call made an agent awaiting its waiting
// calls hold as many subscriptions as it had calls waiting (hundreds), and
// the server keeps a copy of each message for every subscription on its
// subject: the bound on an agent's subscriptions had to be that high, and
// an agent could make the server hold one event limits.agent_connections
// times that many times over (R9 F2). With one subscription an agent,
// limits.agent_subscriptions can be what the SDKs need on a connection.
//
// A Client makes its own; a front-end that makes a client per request on
// one connection (the console) shares one between them (WithFollows), so
// that the connection receives each event once.
type Follows struct {
	nc *nats.Conn

	// subMu orders the subscriptions' lifecycle (subscribe and flush,
	// unsubscribe) without holding up route.
	subMu sync.Mutex
	subs  map[string]*agentFollow

	mu    sync.Mutex
	calls map[callKey][]chan *nats.Msg
}

type agentFollow struct {
	sub *nats.Subscription
	// flushed: the server has the subscription (a flush came back since).
	flushed bool
	// followed is how many follows of the agent's calls are open.
	followed int
}

type callKey struct{ agent, call string }

// NewFollows returns the follows of calls on nc.
func NewFollows(nc *nats.Conn) *Follows {
	return &Follows{nc: nc, subs: map[string]*agentFollow{}, calls: map[callKey][]chan *nats.Msg{}}
}

// WithFollows makes the client follow its calls through f (see Follows),
// shared with the other clients on the same connection.
func WithFollows(f *Follows) Option { return func(c *Client) { c.follows = f } }

// follow hands agent's call's republished events to a channel of buf
// messages until stop; the agent's subscription is in place on the server
// when it returns, so stored events read afterwards miss nothing in
// between. A message the channel has no room for is dropped, as a
// subscription of its own dropped it: followers read the stream again.
func (f *Follows) follow(ctx context.Context, agent, call string, buf int) (live chan *nats.Msg, stop func(), err error) {
	live = make(chan *nats.Msg, buf)
	k := callKey{agent, call}
	f.subMu.Lock()
	defer f.subMu.Unlock()
	a := f.subs[agent]
	if a == nil {
		sub, err := f.nc.Subscribe(subject.OutOfAgent(agent), func(m *nats.Msg) { f.route(agent, m) })
		if err == nil {
			// route never blocks: what the subscription holds is bounded
			// by how fast the server delivers, not by a reader.
			if err = sub.SetPendingLimits(-1, -1); err != nil {
				_ = sub.Unsubscribe()
			}
		}
		if err != nil {
			return nil, nil, err
		}
		a = &agentFollow{sub: sub}
		f.subs[agent] = a
	}
	a.followed++
	f.mu.Lock()
	f.calls[k] = append(f.calls[k], live)
	f.mu.Unlock()
	if !a.flushed {
		// FlushWithContext needs a deadline; ctx may have none.
		fctx, cancel := context.WithTimeout(ctx, requestTimeout)
		err = f.nc.FlushWithContext(fctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			f.drop(k, live)
			return nil, nil, err
		}
		a.flushed = err == nil
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			f.subMu.Lock()
			defer f.subMu.Unlock()
			f.drop(k, live)
		})
	}
	return live, stop, nil
}

// drop ends the follow live of k, and the agent's subscription with the
// last of its follows. subMu is held.
func (f *Follows) drop(k callKey, live chan *nats.Msg) {
	f.mu.Lock()
	chans := slices.DeleteFunc(f.calls[k], func(ch chan *nats.Msg) bool { return ch == live })
	if len(chans) == 0 {
		delete(f.calls, k)
	} else {
		f.calls[k] = chans
	}
	f.mu.Unlock()
	if a := f.subs[k.agent]; a != nil {
		if a.followed--; a.followed == 0 {
			_ = a.sub.Unsubscribe()
			delete(f.subs, k.agent)
		}
	}
}

// route hands m to the followers of its call.
func (f *Follows) route(agent string, m *nats.Msg) {
	k := callKey{agent, callOf(m.Subject)}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.calls[k] {
		select {
		case ch <- m:
		default:
		}
	}
}
