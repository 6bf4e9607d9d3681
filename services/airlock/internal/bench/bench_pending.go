package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// pendingOptions tune `airlock bench pending`.
type pendingOptions struct {
	JSON bool
	// Pending calls built for the large figure, spread evenly over Agents.
	Pending, Agents int
	// Small: pending calls of the small figure (the ratios' base).
	Small int
	// Samples timed for each figure.
	Samples    int
	CPUProfile string
	// Profile: a directory to write profiles of the timed rounds alone
	// into (CPU, mutex, block, heap), labelled stack=small|large.
	Profile string
}

// pendingFigure is one operation's p50 with few and with many calls pending.
type pendingFigure struct {
	Name    string  `json:"name"`
	SmallUs float64 `json:"small_p50_us"`
	LargeUs float64 `json:"large_p50_us"`
	Ratio   float64 `json:"ratio"`
	Met     bool    `json:"met"`
}

// pendingReport holds every figure of `airlock bench pending`.
type pendingReport struct {
	Setup   string          `json:"setup"`
	Small   int             `json:"small_pending"`
	Large   int             `json:"large_pending"`
	Agents  int             `json:"agents"`
	BuildS  float64         `json:"build_seconds"`
	Figures []pendingFigure `json:"figures"`
	// MemoryPerCall: live heap held per pending call (large − small, over
	// the calls added), by the service whose code allocated it.
	MemoryPerCall map[string]float64 `json:"memory_bytes_per_pending_call"`
	// Timed: what the Go runtime did while the rounds were timed.
	Timed   runtimeSpan `json:"during_timed_rounds"`
	GoalMax float64     `json:"goal_ratio_max"`
}

// Missed implements goalReport.
func (r *pendingReport) Missed() []string {
	var missed []string
	for _, f := range r.Figures {
		if !f.Met {
			missed = append(missed, fmt.Sprintf("%s with %d pending %.2f× the same with %d, goal ≤ %.0f×", f.Name, r.Large, f.Ratio, r.Small, r.GoalMax))
		}
	}
	return missed
}

func newPendingCmd(env Env) *cobra.Command {
	o := pendingOptions{}
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "Many calls waiting for a person: inbox, call page, approvals list, thread approval and live feed with --pending vs --small pending (goal p50 ≤ 2×)",
		Long: `Starts two stacks in this process, each an embedded NATS server, the policy and
approval services and the console, and submits calls the policy asks a person
about through the intake, as agents do: --small of them to one, --pending
from --agents agents to the other (an agent holds at most
approval.max_pending_per_agent, 100 by default, so --pending may not exceed
100 × --agents). It times on each in turn, one request at a time (--samples
each), what a reviewer does: the inbox's first page, a call's page, the
approvals list of
` + "`airlock approvals list`" + ` (GET /api/v1/approvals), approving a thread of
two calls, and opening the inbox's live feed (to its first "sync" event).
It prints each p50 with the ratio large/small (goal ≤ 2×) and the live heap
held per pending call by each service (by the package that allocated it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, env, o.CPUProfile, o.JSON, func(ctx context.Context, cfg config.Config) (*pendingReport, error) {
				return runPendingBench(ctx, cfg, o)
			}, printPending)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Pending, "pending", 100000, "calls pending for the large figures")
	f.IntVar(&o.Agents, "agents", 1000, "agents the pending calls come from")
	f.IntVar(&o.Small, "small", 100, "calls pending for the small figures (the base of the ratios)")
	f.IntVar(&o.Samples, "samples", 50, "requests timed for each figure (a p50 of few samples swings with whatever else the machine does)")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	f.StringVar(&o.Profile, "profile", "", "write CPU, mutex, block and heap profiles of the timed rounds alone (labelled stack=small|large) into this directory")
	return cmd
}

func printPending(w io.Writer, r *pendingReport) {
	fmt.Fprintf(w, "airlock bench pending — %s\n%d pending calls from %d agents built in %.0fs through the intake, policy and approval services\n\n",
		r.Setup, r.Large, r.Agents, r.BuildS)
	fmt.Fprintf(w, "%-40s %14s %14s %8s\n", "p50", fmt.Sprintf("%d pending", r.Small), fmt.Sprintf("%d pending", r.Large), "ratio")
	for _, f := range r.Figures {
		fmt.Fprintf(w, "%-40s %12.0fµs %12.0fµs %7.2f× %s\n", f.Name, f.SmallUs, f.LargeUs, f.Ratio, mark(f.Met))
	}
	fmt.Fprintf(w, "\nlive heap per pending call (allocated by):")
	for _, svc := range memoryOwners {
		fmt.Fprintf(w, "  %s %.0f B", svc, r.MemoryPerCall[svc])
	}
	t := r.Timed
	fmt.Fprintf(w, "\nwhile timed (%.1fs): %d GC cycles, GC CPU %.0f ms (%.1f%% of the process's), GC pauses p50 %.0fµs max %.0fµs, heap %.0f MB",
		t.Seconds, t.GCCycles, t.GCCPUms, t.GCCPUShare*100, t.PauseP50us, t.PauseMaxUs, t.HeapMB)
	fmt.Fprintf(w, "\ngoal: each p50 with %d pending ≤ %.0f× the same with %d\n", r.Large, r.GoalMax, r.Small)
}

// pendingTool is a call the default policy asks a person about.
const pendingServer, pendingTool = "demo", "write_file"

func runPendingBench(ctx context.Context, cfg config.Config, o pendingOptions) (*pendingReport, error) {
	if o.Profile != "" && o.CPUProfile != "" {
		return nil, errors.New("--profile and --cpuprofile both profile the CPU: give one")
	}
	if o.Agents < 1 || o.Small < 2 || o.Pending <= o.Small || o.Samples < 1 {
		return nil, errors.New("--agents and --samples must be at least 1, --small at least 2, --pending more than --small")
	}
	perAgent := (o.Pending + o.Agents - 1) / o.Agents
	if perAgent > cfg.Approval.MaxPendingPerAgent {
		return nil, fmt.Errorf("--pending %d from %d agents is %d per agent, over approval.max_pending_per_agent (%d): add agents", o.Pending, o.Agents, perAgent, cfg.Approval.MaxPendingPerAgent)
	}
	// Sampled finely enough to attribute a few hundred bytes per call.
	defaultMemProfileRate := runtime.MemProfileRate
	runtime.MemProfileRate = 4096
	defer func() { runtime.MemProfileRate = defaultMemProfileRate }()
	rep := &pendingReport{Small: o.Small, Large: o.Pending, Agents: o.Agents, GoalMax: 2, MemoryPerCall: map[string]float64{}}
	// Two stacks, one with few calls pending and one with many, measured
	// sample by sample in turn: a machine busy with other work slows both
	// alike, as in the other benches.
	small, err := startPendingStack(ctx, cfg, perAgent, "small")
	if err != nil {
		return nil, err
	}
	defer small.stop()
	rep.Setup = small.setup
	// Each round's thread approval takes two calls: the small stack starts
	// with as many more as the rounds take, so it never holds fewer than
	// --small.
	if err := small.builder.fill(ctx, o.Small+2*(o.Samples+pendingWarmup)); err != nil {
		return nil, err
	}
	large, err := startPendingStack(ctx, cfg, perAgent, "large")
	if err != nil {
		return nil, err
	}
	defer large.stop()
	heap0 := heapByOwner()
	t0 := time.Now()
	if err := large.builder.fill(ctx, o.Pending); err != nil {
		return nil, err
	}
	rep.BuildS = time.Since(t0).Seconds()
	heap1 := heapByOwner()
	for _, owner := range memoryOwners {
		rep.MemoryPerCall[owner] = float64(heap1[owner]-heap0[owner]) / float64(o.Pending)
	}
	// The fine sampling is the memory figure's: while the rounds are
	// timed it would only add its own cost (a stack walk every 4 KiB
	// allocated) to both stacks.
	runtime.MemProfileRate = defaultMemProfileRate
	lat := [2][][]time.Duration{make([][]time.Duration, len(reviewerOps)), make([][]time.Duration, len(reviewerOps))}
	var span *runtimeSpan // from the first timed round
	var stopProfiles func() error
	defer func() {
		if stopProfiles != nil { // a round failed: the profiles must not run on
			_ = stopProfiles()
		}
	}()
	for round := range o.Samples + pendingWarmup {
		if round == pendingWarmup && o.Profile != "" {
			if stopProfiles, err = startProfiles(o.Profile); err != nil {
				return nil, err
			}
		}
		if round == pendingWarmup {
			span = startRuntimeSpan()
		}
		for i, st := range []*pendingStack{small, large} {
			var took []time.Duration
			var err error
			pprof.Do(ctx, pprof.Labels("stack", st.name), func(ctx context.Context) { took, err = st.round(ctx) })
			if err != nil {
				return nil, fmt.Errorf("with %d pending: %w", st.builder.pending, err)
			}
			if round >= pendingWarmup {
				for op, d := range took {
					lat[i][op] = append(lat[i][op], d)
				}
			}
		}
	}
	rep.Timed = span.end()
	if stopProfiles != nil {
		stop := stopProfiles
		stopProfiles = nil
		if err := stop(); err != nil {
			return nil, err
		}
	}
	for op, name := range reviewerOps {
		f := pendingFigure{Name: name, SmallUs: summarize(lat[0][op]).P50us, LargeUs: summarize(lat[1][op]).P50us}
		f.Ratio = f.LargeUs / f.SmallUs
		f.Met = f.Ratio <= rep.GoalMax
		rep.Figures = append(rep.Figures, f)
	}
	return rep, nil
}

// pendingStack is one embedded NATS server with the policy and approval
// services and the console, a signed-in reviewer, and the agents' calls.
type pendingStack struct {
	// name labels the stack's goroutines in profiles (stack=name).
	name     string
	setup    string
	builder  *pendingBuilder
	reviewer *reviewer
	// taken: the newest calls thread approvals took.
	taken int
	stops []func()
}

func (st *pendingStack) stop() {
	for i := len(st.stops) - 1; i >= 0; i-- {
		st.stops[i]()
	}
}

// startPendingStack starts a stack whose goroutines (the embedded server's,
// the services', the console's connections) carry the profile label
// stack=name, so a profile of both stacks tells them apart.
func startPendingStack(ctx context.Context, cfg config.Config, perAgent int, name string) (st *pendingStack, err error) {
	pprof.Do(ctx, pprof.Labels("stack", name), func(ctx context.Context) {
		st, err = startPendingStackLabelled(ctx, cfg, perAgent)
	})
	if st != nil {
		st.name = name
	}
	return st, err
}

func startPendingStackLabelled(ctx context.Context, cfg config.Config, perAgent int) (st *pendingStack, err error) {
	st = &pendingStack{}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	dir, url, stop, err := startBenchServer(cfg)
	if err != nil {
		return nil, err
	}
	st.stops = append(st.stops, stop)
	cfg.NATS.URL = url
	cfg.Dev.DataDir = dir
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	cfg.Approval.DefaultTimeout = 24 * time.Hour
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice"}}
	const password = "bench-password"
	hash, err := console.HashPassword(password)
	if err != nil {
		return nil, err
	}
	cfg.Console.Users = []config.User{{Name: "alice", PasswordHash: hash, Roles: []string{config.RoleReviewer}, Groups: []string{"reviewers"}}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	services := newBenchServices(ctx, cfg, log)
	st.stops = append(st.stops, services.stop)
	if _, err := services.start("policy", func(d svc.Deps) (svc.Service, error) { return policy.NewFromConfig(ctx, d) }); err != nil {
		return nil, err
	}
	if _, err := services.start("approval", func(d svc.Deps) (svc.Service, error) { return approval.NewFromConfig(ctx, d) }); err != nil {
		return nil, err
	}
	var con *console.Console
	if _, err := services.start("console", func(d svc.Deps) (svc.Service, error) {
		con, err = console.New(ctx, d, console.Options{})
		return con, err
	}); err != nil {
		return nil, err
	}
	e := echo.New()
	con.Register(e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	st.stops = append(st.stops, func() { _ = hs.Close() })

	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	st.stops = append(st.stops, nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		return nil, err
	}
	if st.reviewer, err = newReviewer(ctx, "http://"+ln.Addr().String(), password); err != nil {
		return nil, err
	}
	st.builder = &pendingBuilder{js: js, cfg: cfg, perAgent: perAgent}
	st.setup = "embedded NATS, file store, fsync " + config.SyncText(cfg.Dev.Sync) + "; policy, approval and console in-process, one such stack for each number pending"
	return st, nil
}

// pendingBuilder submits calls that will wait for a person, agent after
// agent, each agent's in threads of two.
type pendingBuilder struct {
	js       jetstream.JetStream
	cfg      config.Config
	perAgent int
	// submitted: calls published so far; pending: those waiting (less
	// the ones thread approvals took).
	submitted, pending int
}

func pendingAgent(i int) string { return fmt.Sprintf("agent-%04d", i) }

// call i is agent i/perAgent's call i%perAgent, in thread (i%perAgent)/2.
func (b *pendingBuilder) ref(i int) (agent, call, thread string) {
	return pendingAgent(i / b.perAgent), fmt.Sprintf("c%d", i%b.perAgent), fmt.Sprintf("t%d", (i%b.perAgent)/2)
}

// fill submits calls until n have been submitted, then waits until the
// approval service holds each as pending.
func (b *pendingBuilder) fill(ctx context.Context, n int) error {
	var futures []jetstream.PubAckFuture
	for ; b.submitted < n; b.submitted++ {
		agent, id, thread := b.ref(b.submitted)
		args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/bench/" + id, "content": "pending"})
		c := &airlockv1.ToolCall{AgentId: agent, CallId: id, ThreadId: thread, Revision: 1, Server: pendingServer, Tool: pendingTool, Arguments: args}
		msg, err := bus.EncodeRequest(&airlockv1.Event{AgentId: agent, CallId: id, Revision: 1,
			Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: c}}}, "agent/"+agent, "")
		if err != nil {
			return err
		}
		f, err := b.js.PublishMsgAsync(msg)
		if err != nil {
			return fmt.Errorf("submit %s/%s: %w", agent, id, err)
		}
		futures = append(futures, f)
		if len(futures) == 512 {
			if err := settle(ctx, futures); err != nil {
				return err
			}
			futures = futures[:0]
		}
	}
	if err := settle(ctx, futures); err != nil {
		return err
	}
	bucket, err := b.js.Stream(ctx, "KV_"+b.cfg.Buckets.Approvals)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Duration(n/50+60) * time.Second); ; {
		info, err := bucket.Info(ctx)
		if err != nil {
			return err
		}
		if int(info.State.NumSubjects) >= n {
			b.pending = n
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d calls became pending in time", info.State.NumSubjects, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func settle(ctx context.Context, fs []jetstream.PubAckFuture) error {
	for _, f := range fs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("submit: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pendingWarmup rounds of every operation come before the timed ones.
const pendingWarmup = 5

// reviewerOps are what a reviewer does, in the order measure returns them.
var reviewerOps = []string{"inbox, first page (GET /)", "call page (GET /calls/…)", "approvals list (GET /api/v1/approvals)", "approve a thread of two calls", "live feed, open to first sync (SSE)"}

// reviewer is alice signed in to the console.
type reviewer struct {
	base string
	c    *http.Client
	csrf string
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func newReviewer(ctx context.Context, base, password string) (*reviewer, error) {
	jar, _ := cookiejar.New(nil)
	r := &reviewer{base: base, c: &http.Client{Jar: jar, Timeout: 5 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	body, err := r.get(ctx, "/login")
	if err != nil {
		return nil, err
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		return nil, errors.New("the console's sign-in page has no anti-forgery token")
	}
	form := url.Values{"_csrf": {m[1]}, "user": {"alice"}, "password": {password}, "next": {"/"}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := r.c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("sign in to the console: status %d", resp.StatusCode)
	}
	if body, err = r.get(ctx, "/"); err != nil {
		return nil, err
	}
	if m = csrfField.FindStringSubmatch(body); m == nil {
		return nil, errors.New("the inbox has no anti-forgery token")
	}
	r.csrf = m[1]
	return r, nil
}

func (r *reviewer) get(ctx context.Context, path string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	resp, err := r.c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d: %.200s", path, resp.StatusCode, body)
	}
	return string(body), err
}

// approveThread approves the two pending calls of one thread, with the
// digests a reviewer was shown (read first, not timed).
func (r *reviewer) approveThread(ctx context.Context, agent, thread string) (func() error, int, error) {
	body, err := r.get(ctx, "/api/v1/approvals?agent="+agent+"&thread="+thread)
	if err != nil {
		return nil, 0, err
	}
	var list struct {
		Records []struct {
			Call struct {
				CallID   string `json:"call_id"`
				Revision uint32 `json:"revision"`
			} `json:"call"`
			Decision struct {
				ArgumentsDigest string `json:"arguments_digest"`
			} `json:"decision"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return nil, 0, fmt.Errorf("approvals of thread %s/%s: %w", agent, thread, err)
	}
	type shown struct {
		CallID          string `json:"call_id"`
		Revision        uint32 `json:"revision"`
		ArgumentsDigest string `json:"arguments_digest"`
	}
	var tb struct {
		Calls  []shown `json:"calls"`
		Reason string  `json:"reason"`
	}
	for _, rec := range list.Records {
		tb.Calls = append(tb.Calls, shown{rec.Call.CallID, max(rec.Call.Revision, 1), rec.Decision.ArgumentsDigest})
	}
	if len(tb.Calls) == 0 {
		return nil, 0, fmt.Errorf("thread %s/%s has no pending call", agent, thread)
	}
	tb.Reason = "bench"
	data, _ := json.Marshal(tb)
	return func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/api/v1/threads/"+agent+"/"+thread+"/approve", strings.NewReader(string(data)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", r.csrf)
		resp, err := r.c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("approve thread %s/%s: status %d: %.300s", agent, thread, resp.StatusCode, out)
		}
		return nil
	}, len(tb.Calls), nil
}

// feed opens the inbox's live feed and reads it up to its first sync event.
func (r *reviewer) feed(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/inbox/events", nil)
	resp, err := r.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	inSync := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "event: sync":
			inSync = true
		case inSync && line == "":
			return nil
		}
	}
	return fmt.Errorf("the live feed ended before its first sync (status %d): %v", resp.StatusCode, sc.Err())
}

// round times each reviewer operation (reviewerOps) once. Its thread
// approval takes the newest thread still pending; the call page shows the
// oldest call, which stays pending.
func (st *pendingStack) round(ctx context.Context) ([]time.Duration, error) {
	b, r := st.builder, st.reviewer
	agent, call, _ := b.ref(0)
	tAgent, _, thread := b.ref(b.submitted - 1 - st.taken)
	approve, n, err := r.approveThread(ctx, tAgent, thread)
	if err != nil {
		return nil, err
	}
	ops := []func() error{
		func() error { _, err := r.get(ctx, "/"); return err },
		func() error { _, err := r.get(ctx, "/calls/"+agent+"/"+call); return err },
		func() error { _, err := r.get(ctx, "/api/v1/approvals"); return err },
		approve,
		func() error { return r.feed(ctx) },
	}
	took := make([]time.Duration, len(ops))
	for i, op := range ops {
		t0 := time.Now()
		if err := op(); err != nil {
			return nil, fmt.Errorf("%s: %w", reviewerOps[i], err)
		}
		took[i] = time.Since(t0)
	}
	st.taken += n
	b.pending -= n
	return took, nil
}

// memoryOwners are the services live heap is attributed to.
var memoryOwners = []string{"approval", "console", "policy", "nats-server", "other"}

// heapByOwner is the live heap (as of the last of two collections) by the
// service whose code allocated it: the innermost frame of an allocation's
// stack that belongs to a service (or the embedded NATS server) names it.
func heapByOwner() map[string]int64 {
	runtime.GC()
	runtime.GC()
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	out := map[string]int64{}
	for _, rec := range recs {
		objs, bytes := rec.InUseObjects(), rec.InUseBytes()
		if objs <= 0 {
			continue
		}
		// Unsample as pprof does: each sampled object stands for
		// 1/(1-e^(-size/rate)) objects of its size.
		avg := float64(bytes) / float64(objs)
		scaled := float64(bytes) / (1 - math.Exp(-avg/rate))
		out[ownerOf(rec.Stack())] += int64(scaled)
	}
	return out
}

func ownerOf(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		for _, svc := range []string{"approval", "console", "policy"} {
			if strings.Contains(f.Function, "/airlock/services/"+svc+".") || strings.Contains(f.Function, "/airlock/services/"+svc+"/") {
				return svc
			}
		}
		if strings.Contains(f.Function, "nats-server/v2/") {
			return "nats-server"
		}
		if !more {
			return "other"
		}
	}
}
