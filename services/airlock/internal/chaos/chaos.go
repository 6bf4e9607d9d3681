package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
)

// Options configure a run.
type Options struct {
	// Seed fixes the load and the fault schedule (0: one from the clock,
	// printed so the run can be repeated).
	Seed int64
	// Short runs the short schedule (what `go tool task test` runs).
	Short bool
	// Calls overrides the profile's number of calls.
	Calls int
	// Dir is the run directory (logs, stores, keys, report); empty: a new
	// temporary one, removed after a run without violations unless Keep.
	Dir  string
	Keep bool
	// ClickHouseReplicas > 1 runs ClickHouse as that many replicas with
	// ZooKeeper; its fault then kills the replica the audit writes to.
	ClickHouseReplicas int
	// Binary is the airlock executable every process is started from.
	Binary string
	// Progress receives a line per phase (nil: discarded).
	Progress io.Writer
}

// profile is a schedule's size and timing.
type profile struct {
	name  string
	calls int
	// load is how long calls are submitted for.
	load time.Duration
	// askTimeout: asked calls expire after it; awaitSlack: how much longer
	// an agent waits for an outcome before giving up.
	askTimeout, awaitSlack time.Duration
	submitFor              time.Duration
	slackCardWait          time.Duration
	ackWait                time.Duration
	slowTimeout            time.Duration
	// mcpInterval: each MCP client calls through the gateway about this often.
	mcpInterval        time.Duration
	kills, pauses      int
	nodeLosses         int
	killDown, pauseFor [2]time.Duration
	nodeDown           [2]time.Duration
	chDown, hangFor    time.Duration
	hangCalls          int
	recoverWithin      time.Duration
	settleWithin       time.Duration
}

var (
	fullProfile = profile{
		name: "full", calls: 1000, load: 5 * time.Minute,
		askTimeout: 40 * time.Second, awaitSlack: 3 * time.Minute, submitFor: 90 * time.Second, slackCardWait: 20 * time.Second,
		ackWait: 4 * time.Second, slowTimeout: 3 * time.Second, mcpInterval: 500 * time.Millisecond,
		kills: 6, pauses: 2, nodeLosses: 2,
		killDown: [2]time.Duration{2 * time.Second, 8 * time.Second}, pauseFor: [2]time.Duration{8 * time.Second, 15 * time.Second},
		nodeDown: [2]time.Duration{10 * time.Second, 20 * time.Second},
		chDown:   60 * time.Second, hangFor: 20 * time.Second, hangCalls: 3,
		recoverWithin: 2 * time.Minute, settleWithin: 3 * time.Minute,
	}
	shortProfile = profile{
		name: "short", calls: 120, load: 45 * time.Second,
		askTimeout: 15 * time.Second, awaitSlack: 90 * time.Second, submitFor: 60 * time.Second, slackCardWait: 10 * time.Second,
		ackWait: 3 * time.Second, slowTimeout: 2 * time.Second, mcpInterval: 700 * time.Millisecond,
		kills: 1, pauses: 1, nodeLosses: 1,
		killDown: [2]time.Duration{2 * time.Second, 3 * time.Second}, pauseFor: [2]time.Duration{4 * time.Second, 5 * time.Second},
		nodeDown: [2]time.Duration{5 * time.Second, 6 * time.Second},
		chDown:   10 * time.Second, hangFor: 4 * time.Second, hangCalls: 2,
		recoverWithin: 90 * time.Second, settleWithin: 90 * time.Second,
	}
)

// Agents of the run, each with its own credential; probeAgent submits the
// calls that measure recovery and the calls to the hanging upstream.
var loadAgents = []string{"bot-1", "bot-2", "bot-3", "bot-4"}

const probeAgent = "probe"

// Run starts the production layout, drives the load under the fault
// schedule, checks the result and tears everything down. The report's
// Violations say whether the run passed; an error means the run itself
// could not be made (say what to fix).
func Run(ctx context.Context, o Options) (Report, error) {
	started := time.Now()
	p := fullProfile
	if o.Short {
		p = shortProfile
	}
	if o.Calls > 0 {
		p.calls = o.Calls
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano() % 1_000_000
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "chaos %5.1fs  %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	dir, temp := o.Dir, o.Dir == ""
	if temp {
		var err error
		if dir, err = os.MkdirTemp("", "airlock-chaos-"); err != nil {
			return Report{}, fmt.Errorf("create a run directory: %w", err)
		}
	}
	dir, _ = filepath.Abs(dir)
	l := &layout{dir: dir, bin: o.Binary, logDir: filepath.Join(dir, "logs"), keysDir: filepath.Join(dir, "keys"), chReplicas: o.ClickHouseReplicas}
	remove := false // a clean run's temporary directory goes once every process writing in it stopped
	defer func() {
		l.tearDown()
		if remove {
			if err := os.RemoveAll(dir); err != nil {
				progress("could not remove the run directory %s: %v", dir, err)
			}
		}
	}()
	progress("seed %d, %s schedule, %d calls; run directory %s", o.Seed, p.name, p.calls, dir)
	if err := setUp(ctx, l, p, append(append([]string(nil), loadAgents...), probeAgent), o.Seed, progress); err != nil {
		return Report{RunDir: dir, Seed: o.Seed}, fmt.Errorf("start the production layout: %w (logs in %s)", err, l.logDir)
	}
	d, err := newDriver(ctx, l, p, o.Seed)
	if err != nil {
		return Report{RunDir: dir, Seed: o.Seed}, fmt.Errorf("connect agents and reviewers: %w (logs in %s)", err, l.logDir)
	}
	defer d.close()

	calls := plan(o.Seed, p.calls, p.load/time.Duration(p.calls), loadAgents)
	faults := schedule(o.Seed, p, p.load)
	progress("load: %d calls over %s; %d faults", len(calls), p.load, len(faults))
	loadStart := time.Now()
	results := make([]faultResult, len(faults))
	in := &injector{l: l, d: d, p: p}
	var fwg sync.WaitGroup
	// ClickHouse's outage runs on its own lane; the others one after another.
	fwg.Add(2)
	go func() { defer fwg.Done(); results[0] = in.run(ctx, loadStart, faults[0]) }()
	go func() {
		defer fwg.Done()
		for i := 1; i < len(faults); i++ {
			progress("fault %s on %s in %s", faults[i].Kind, faults[i].Target, time.Until(loadStart.Add(faults[i].At)).Round(100*time.Millisecond))
			results[i] = in.run(ctx, loadStart, faults[i])
			progress("  healed %s (%s); recovered after %s", results[i].Resolved, results[i].Kind, results[i].RecoveredAfter.Round(time.Millisecond))
		}
	}()
	// The asking MCP client is kept on the gateway replica the schedule kills.
	for _, f := range faults {
		if i, ok := f.gatewayKill(); ok {
			d.mcp.askAt, d.mcp.killAt = i, loadStart.Add(f.At)
			break
		}
	}
	mcpDone, reviewed := make(chan struct{}), make(chan struct{})
	go func() { defer close(mcpDone); d.mcp.run(ctx, o.Seed, loadStart.Add(p.load), p.mcpInterval) }()
	go func() { defer close(reviewed); d.reviewMCP(ctx, mcpDone) }()
	for _, c := range calls {
		select {
		case <-time.After(time.Until(loadStart.Add(c.At))): // the load's own pacing
		case <-ctx.Done():
			return Report{RunDir: dir, Seed: o.Seed}, ctx.Err()
		}
		d.start(ctx, c)
	}
	loadTook := time.Since(loadStart)
	progress("load submitted; waiting for faults to heal and calls to end")
	fwg.Wait()
	d.wg.Wait()
	<-reviewed
	progress("settling: every started call ended and ClickHouse caught up (at most %s)", p.settleWithin)
	progress("%s; checking", l.settle(ctx, p.settleWithin))
	obs := l.collect(ctx, d, results)
	rep := analyse(obs, idempotentTool)
	rep.Seed, rep.Profile, rep.Calls, rep.RunDir = o.Seed, p.name, len(calls), dir
	rep.LoadS, rep.TotalS = round3(loadTook.Seconds()), round3(time.Since(started).Seconds())
	rep.Topology = fmt.Sprintf("%d-node NATS cluster (R3), 2 replicas each of %v, %s, webhook tools, Slack fake, MCP clients through the gateway", NATSNodes, serviceNames(), l.clickHouseName())
	if o.ClickHouseReplicas > 1 {
		rep.ClickHouseReplicas = o.ClickHouseReplicas
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), marshalJSON(rep), 0o600); err != nil {
		return rep, fmt.Errorf("write the report: %w", err)
	}
	if rep.Violations == 0 && temp && !o.Keep {
		remove = true
		rep.RunDir = ""
	}
	return rep, nil
}

// idempotentTool says whether the run's registry declares the tool idempotent.
func idempotentTool(server, tool string) bool {
	return plannedCall{Server: server, Tool: tool}.idempotent()
}

func newDriver(ctx context.Context, l *layout, p profile, seed int64) (*driver, error) {
	d := &driver{l: l, p: p, seed: seed, clients: map[string]*airlock.Client{}, tokens: map[string]string{}, cons: newConsoles(l.consoles)}
	d.mcp = &mcpLoad{urls: l.mcpURLs(), token: l.mcpToken, askFor: p.askTimeout + 30*time.Second,
		ready: func(ctx context.Context, i int) bool { return l.replicas["gateway"][i].ready(ctx) }}
	for agent, file := range l.agents {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := airlock.Connect(cctx, file, l.urls, airlock.WithTLS(l.natsTLS()))
		cancel()
		if err != nil {
			d.close()
			return nil, err
		}
		d.clients[agent] = c
	}
	for _, r := range reviewers {
		var tok string
		err := retry(ctx, 30*time.Second, func() error {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var err error
			tok, err = d.cons.personalToken(tctx, r, l.passwords[r])
			return err
		})
		if err != nil {
			d.close()
			return nil, err
		}
		d.tokens[r] = tok
	}
	return d, nil
}

func (d *driver) close() {
	for _, c := range d.clients {
		c.Close()
	}
}
