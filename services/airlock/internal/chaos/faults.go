package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-gate/airlock/services/audit/store"
)

// faultKind is one kind of fault the schedule injects.
type faultKind string

const (
	faultKill       faultKind = "kill_replica"    // SIGKILL a service replica, restart it after For
	faultPause      faultKind = "pause_node"      // SIGSTOP a NATS node, SIGCONT after For
	faultNodeLoss   faultKind = "node_loss"       // SIGKILL a NATS node, restart it on its store after For
	faultClickHouse faultKind = "clickhouse_down" // SIGKILL ClickHouse, restart it after For
	faultHang       faultKind = "hang_upstream"   // the slow tool server stops answering for For
)

// allFaultKinds lists every kind; each schedule has each at least once.
var allFaultKinds = []faultKind{faultKill, faultPause, faultNodeLoss, faultClickHouse, faultHang}

// leaderTarget is resolved at injection to the node leading the events stream.
const leaderTarget = "events-stream-leader"

// fault is one planned fault.
type fault struct {
	Kind faultKind `json:"kind"`
	// At is when it starts, from the start of the load; For how long until it is healed.
	At  time.Duration `json:"at"`
	For time.Duration `json:"for"`
	// Target: a replica ("executor-2"), a node ("n2", or leaderTarget), "clickhouse" or the slow server.
	Target string `json:"target"`
}

// schedule is the fault plan of a run: the faults of the profile spread
// over the load (ClickHouse's outage on its own lane, early, since it does
// not touch the call path), in an order and with targets and durations
// fixed by the seed.
func schedule(seed int64, p profile, load time.Duration) []fault {
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Round(100*time.Millisecond)
	}
	var lane []fault
	for i := range p.kills {
		// One kill always hits an executor (a call's side effect is what
		// must not happen twice), the others any service.
		s := Topology()[r.IntN(len(Topology()))]
		if i == 0 {
			s = service("executor")
		}
		lane = append(lane, fault{Kind: faultKill, Target: fmt.Sprintf("%s-%d", s.Name, 1+r.IntN(s.Replicas)), For: between(p.killDown[0], p.killDown[1])})
	}
	// And one a gateway replica, while MCP clients call through it.
	gw := service("gateway")
	lane = append(lane, fault{Kind: faultKill, Target: fmt.Sprintf("%s-%d", gw.Name, 1+r.IntN(gw.Replicas)), For: between(p.killDown[0], p.killDown[1])})
	for range p.pauses {
		lane = append(lane, fault{Kind: faultPause, Target: fmt.Sprintf("n%d", 1+r.IntN(NATSNodes)), For: between(p.pauseFor[0], p.pauseFor[1])})
	}
	for i := range p.nodeLosses {
		target := leaderTarget // one loss is always the events stream's leader
		if i > 0 {
			target = fmt.Sprintf("n%d", 1+r.IntN(NATSNodes))
		}
		lane = append(lane, fault{Kind: faultNodeLoss, Target: target, For: between(p.nodeDown[0], p.nodeDown[1])})
	}
	lane = append(lane, fault{Kind: faultHang, Target: serverSlow, For: p.hangFor})
	r.Shuffle(len(lane), func(i, j int) { lane[i], lane[j] = lane[j], lane[i] })
	// Spread over [5%, 85%] of the load, one slot each.
	start, span := load/20, load*4/5
	slot := span / time.Duration(len(lane))
	for i := range lane {
		lane[i].At = (start + time.Duration(i)*slot + time.Duration(r.Int64N(int64(slot)/4+1))).Round(100 * time.Millisecond)
	}
	ch := fault{Kind: faultClickHouse, Target: "clickhouse", At: (load / 10).Round(100 * time.Millisecond), For: p.chDown}
	return append([]fault{ch}, lane...)
}

// gatewayKill reports whether f kills a gateway replica, and which one
// (from 0; its target is "gateway-<replica+1>").
func (f fault) gatewayKill() (replica int, ok bool) {
	n, found := strings.CutPrefix(f.Target, "gateway-")
	if f.Kind != faultKill || !found {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 1 {
		return 0, false
	}
	return i - 1, true
}

// faultResult is a fault as it happened.
type faultResult struct {
	fault
	// Resolved is the target hit (the leader's name for leaderTarget).
	Resolved string    `json:"resolved"`
	Start    time.Time `json:"start"`
	Healed   time.Time `json:"healed"`
	// RecoveredAfter: from Start until an auto-allowed call submitted then
	// (and every 2 s after) completed end to end; for ClickHouse, from the
	// restart until it holds every event stored before it.
	RecoveredAfter time.Duration `json:"recovered_after"`
	Recovered      bool          `json:"recovered"`
	// ReplicaKill: the fault killed one replica of a replicated ClickHouse;
	// FailedOver: while it was down the other replicas came to hold every
	// event the stream held when it died, FailoverAfter from the kill.
	ReplicaKill   bool          `json:"replica_kill,omitempty"`
	FailedOver    bool          `json:"failed_over,omitempty"`
	FailoverAfter time.Duration `json:"failover_after,omitempty"`
	Err           string        `json:"error,omitempty"`
}

// injector applies faults to the layout.
type injector struct {
	l *layout
	d *driver
	p profile
}

// run applies f at its time and heals it after f.For; it returns when
// the fault is healed and recovery measured.
func (in *injector) run(ctx context.Context, loadStart time.Time, f fault) faultResult {
	res := faultResult{fault: f, Resolved: f.Target}
	select {
	case <-time.After(time.Until(loadStart.Add(f.At))): // the schedule's own timing
	case <-ctx.Done():
		res.Err = ctx.Err().Error()
		return res
	}
	recovered := make(chan struct{})
	gateway, gatewayKill := f.gatewayKill()
	measure := func(since time.Time) {
		defer close(recovered)
		probe := in.d.probe
		if gatewayKill {
			probe = in.d.mcp.probe // recovered: an MCP client's call through the gateway completed
		}
		res.RecoveredAfter, res.Recovered = probe(ctx, since, in.p.recoverWithin+f.For)
	}
	if gatewayKill && gateway == in.d.mcp.askAt {
		// A kill of the asker's replica waits (a little) for a call of the
		// asker to wait for a person there, so that a rejoin follows it.
		in.d.mcp.awaitAskerWaiting(ctx, in.d.mcp.askAt, askerWaitLimit)
	}
	res.Start = time.Now()
	switch f.Kind {
	case faultKill:
		p := in.l.proc(f.Target)
		if p == nil {
			res.Err = "no such replica"
			return res
		}
		p.kill()
		if gatewayKill {
			in.d.mcp.noteKill(res.Start)
		}
		go measure(res.Start)
		in.hold(ctx, f.For)
		if err := p.start(ctx, 2*time.Minute); err != nil {
			res.Err = err.Error()
		}
	case faultPause, faultNodeLoss:
		n := in.l.node(f.Target)
		if f.Target == leaderTarget {
			n = in.l.leaderNode(ctx)
		}
		if n == nil {
			res.Err = "no such node"
			return res
		}
		res.Resolved = n.Name
		if f.Kind == faultPause {
			n.signal(syscall.SIGSTOP)
		} else {
			n.kill()
		}
		go measure(res.Start)
		in.hold(ctx, f.For)
		if f.Kind == faultPause {
			n.signal(syscall.SIGCONT)
		} else if err := n.start(ctx, 2*time.Minute); err != nil {
			res.Err = err.Error()
		}
	case faultHang:
		in.l.tools.hanging.Store(true)
		for i := range in.p.hangCalls {
			n := int(in.d.probeSeq.Add(1))
			in.d.start(ctx, plannedCall{N: 2_000_000 + n, Agent: probeAgent, ID: fmt.Sprintf("hang-%04d-%d", n, i), Server: serverSlow, Tool: toolWait, Probe: true})
		}
		go measure(res.Start)
		in.hold(ctx, f.For)
		in.l.tools.hanging.Store(false)
	case faultClickHouse:
		target, err := in.l.lastSeq(ctx)
		in.l.ch.Kill()
		if len(in.l.chs) > 1 {
			// A replica: the audit must go on through the others, not wait
			// for it to come back.
			res.ReplicaKill, res.Resolved = true, "clickhouse-r1"
			if err != nil {
				res.Err = err.Error()
			} else {
				res.FailoverAfter, res.FailedOver = in.survivorsHold(ctx, target, res.Start, res.Start.Add(f.For))
			}
			in.hold(ctx, time.Until(res.Start.Add(f.For)))
		} else {
			in.hold(ctx, f.For)
		}
		if err := in.l.ch.Start(ctx, 2*time.Minute); err != nil {
			res.Err = err.Error()
		}
		res.Healed = time.Now()
		res.RecoveredAfter, res.Recovered = in.clickHouseCaughtUp(ctx, res.Healed)
		close(recovered)
	}
	if res.Healed.IsZero() {
		res.Healed = time.Now()
	}
	<-recovered
	return res
}

// hold lets a fault last d (the schedule's own timing).
func (in *injector) hold(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// clickHouseCaughtUp waits until ClickHouse holds every event the stream
// held when ClickHouse came back, and says how long that took.
func (in *injector) clickHouseCaughtUp(ctx context.Context, since time.Time) (time.Duration, bool) {
	target, err := in.l.lastSeq(ctx)
	if err != nil {
		return 0, false
	}
	deadline := time.Now().Add(in.p.recoverWithin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if head, err := chHead(ctx, in.l.dsn); err == nil && head >= target {
			return time.Since(since), true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(since), false
}

// survivorsHold waits until the head of every replica but the killed
// first one reaches an event stored after the kill (target is the stream's
// last sequence at the kill), or until deadline; it says how long that
// took from since (the kill). Such an event reaches them only through the
// sink, never by replication from the dead replica, so this shows the
// failover. The checks at the end see whether anything is missing.
func (in *injector) survivorsHold(ctx context.Context, target uint64, since, deadline time.Time) (time.Duration, bool) {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if last, err := in.l.lastSeq(ctx); err == nil && last > target {
			target = last
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		all := true
		for i := 1; i < len(in.l.chs) && all; i++ {
			head, err := chHead(ctx, in.l.replicaDSN(i))
			all = err == nil && head >= target
		}
		if all {
			return time.Since(since), true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(since), false
}

// chHead is the sequence of the last row in ClickHouse.
func chHead(ctx context.Context, dsn string) (uint64, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := store.Open(cctx, dsn)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	seq, _, err := c.Head(cctx)
	return seq, err
}

// proc finds a replica by name ("executor-2").
func (l *layout) proc(name string) *proc {
	for _, rs := range l.replicas {
		for _, p := range rs {
			if p.name == name {
				return p
			}
		}
	}
	return nil
}

func (l *layout) node(name string) *node {
	for _, n := range l.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// leaderNode is the node leading the events stream now (nil if unknown).
func (l *layout) leaderNode(ctx context.Context) *node {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s, err := l.js.Stream(ictx, l.cfg.Stream.Name)
		cancel()
		if err == nil && s.CachedInfo().Cluster != nil {
			if n := l.node(s.CachedInfo().Cluster.Leader); n != nil {
				return n
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// lastSeq is the events stream's last sequence now.
func (l *layout) lastSeq(ctx context.Context) (uint64, error) {
	for deadline := time.Now().Add(60 * time.Second); ; {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s, err := l.js.Stream(ictx, l.cfg.Stream.Name)
		cancel()
		if err == nil {
			return s.CachedInfo().State.LastSeq, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("events stream info: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
