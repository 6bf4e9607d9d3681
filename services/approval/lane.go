package approval

import (
	"sync"
)

// lane is one notification channel's delivery queue: its own workers, so a
// slow or rate-limited channel delays only its own deliveries, and a queue
// per agent served in turn (round-robin), so one agent's backlog on the
// channel holds another agent's deliveries back by at most one of its own
// each turn, not behind all of them. What a delivery must survive (the
// record and its references) is in JetStream, not here: a replica that
// dies with deliveries queued leaves its records naming it their announcer,
// and another replica announces them (takeOver).
type lane struct {
	mu     sync.Mutex
	wake   *sync.Cond
	queues map[string][]func() // per agent, oldest first
	turns  []string            // agents with queued deliveries, in turn order
	closed bool
	done   sync.WaitGroup
}

func newLane() *lane {
	l := &lane{queues: map[string][]func(){}}
	l.wake = sync.NewCond(&l.mu)
	return l
}

// start runs workers deliveries at a time until stop.
func (l *lane) start(workers int) {
	for range max(workers, 1) {
		l.done.Go(func() {
			for {
				job, ok := l.next()
				if !ok {
					return
				}
				job()
			}
		})
	}
}

// submit queues job behind agent's earlier deliveries on this channel. A
// lane that was stopped runs it at once: its callers wait for it.
func (l *lane) submit(agent string, job func()) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		job()
		return
	}
	if len(l.queues[agent]) == 0 {
		l.turns = append(l.turns, agent)
	}
	l.queues[agent] = append(l.queues[agent], job)
	l.mu.Unlock()
	l.wake.Signal()
}

// next takes the first delivery of the agent whose turn it is, and puts
// that agent last in turn if it has more; false once stopped and empty.
func (l *lane) next() (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.turns) == 0 {
		if l.closed {
			return nil, false
		}
		l.wake.Wait()
	}
	agent := l.turns[0]
	l.turns = l.turns[1:]
	q := l.queues[agent]
	job := q[0]
	q[0] = nil
	if q = q[1:]; len(q) > 0 {
		l.queues[agent] = q
		l.turns = append(l.turns, agent)
	} else {
		delete(l.queues, agent)
	}
	return job, true
}

// stop lets the workers finish what is queued, then ends them.
func (l *lane) stop() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wake.Broadcast()
	l.done.Wait()
}
