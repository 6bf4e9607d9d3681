package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/subject"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

// review is what the reviewers do with an asked call.
type review string

const (
	reviewNone    review = ""              // not asked: allowed, denied
	approveREST   review = "approve_rest"  // console REST API, personal token
	approveSlack  review = "approve_slack" // signed Slack button click
	rejectREST    review = "reject_rest"
	rejectSlack   review = "reject_slack" // click, then the reason modal
	editREST      review = "edit_rest"    // approve with edited arguments
	changesREST   review = "changes_rest" // request changes; the agent submits revision 2, approved over REST
	leaveToExpire review = "expire"       // nobody decides
)

// plannedCall is one call of the load, fixed by the seed.
type plannedCall struct {
	N            int
	Agent, ID    string
	Server, Tool string
	Review       review
	// At is when it is submitted, from the start of the load.
	At time.Duration
	// Probe calls measure recovery after a fault; they are not planned.
	Probe bool
}

func (c plannedCall) idempotent() bool {
	return c.Server == serverHook && (c.Tool == toolLookup || c.Tool == toolSync)
}

// weighted picks one of the choices by weight.
type weighted[T any] struct {
	w int
	v T
}

func pick[T any](r *rand.Rand, choices []weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.w
	}
	n := r.IntN(total)
	for _, c := range choices {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	return choices[len(choices)-1].v
}

type toolChoice struct{ server, tool string }

// plan is the load of a run: n calls from agents, one every interval
// (with jitter), a mix of allowed, denied and asked calls, the asked ones
// approved, rejected, edited, sent back for changes or left to expire, over
// the console's REST API and Slack. The same seed gives the same plan.
func plan(seed int64, n int, interval time.Duration, agents []string) []plannedCall {
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	tools := []weighted[toolChoice]{
		{22, toolChoice{serverHook, toolLookup}},
		{16, toolChoice{serverHook, toolNotify}},
		{9, toolChoice{serverHook, toolDrop}},
		{3, toolChoice{serverSlow, toolWait}},
		{25, toolChoice{serverHook, toolTransfer}},
		{25, toolChoice{serverHook, toolSync}},
	}
	reviews := []weighted[review]{
		{26, approveREST}, {18, approveSlack}, {11, rejectREST}, {9, rejectSlack},
		{12, editREST}, {12, changesREST}, {12, leaveToExpire},
	}
	out := make([]plannedCall, n)
	for i := range out {
		tc := pick(r, tools)
		c := plannedCall{N: i + 1, Agent: agents[i%len(agents)], ID: fmt.Sprintf("call-%05d", i+1), Server: tc.server, Tool: tc.tool,
			At: time.Duration(i)*interval + time.Duration(r.Int64N(int64(interval)/2+1))}
		if tc.server == serverHook && (tc.tool == toolTransfer || tc.tool == toolSync) {
			c.Review = pick(r, reviews)
		}
		out[i] = c
	}
	return out
}

// decisionRecord is a decision a reviewer made and what the service answered.
type decisionRecord struct {
	Rev     uint32
	Kind    string // approved, rejected, changes_requested (the event it should produce)
	Channel string // api, slack
	Changed bool   // the approval service said this decision changed the call
	State   string // the state the service answered with (or, for Slack, the state seen after)
	Edited  bool
}

// callRecord is what happened to one call, from the agent's and the
// reviewers' side.
type callRecord struct {
	plannedCall
	Submitted    time.Time
	SubmitErrors int
	// Outcomes are what the agent's Await returned, per revision.
	Outcomes  map[uint32]airlock.Outcome
	AwaitErrs []string
	Decisions []decisionRecord
	// SlackFallback: no card arrived, the reviewer decided in the console.
	SlackFallback bool
	SlackClicks   int
	ReviewErr     string
	Ended         time.Time
	done          chan struct{}
}

// driver runs the load: agents submit and await their calls through the
// SDK, reviewers decide the asked ones.
type driver struct {
	l        *layout
	p        profile
	seed     int64
	clients  map[string]*airlock.Client
	tokens   map[string]string // reviewer → personal API token
	cons     *consoles
	probeSeq atomic.Int64
	// mcp: the MCP clients calling through the gateway replicas.
	mcp *mcpLoad

	mu      sync.Mutex
	records []*callRecord
	wg      sync.WaitGroup
}

// reviewRand returns the random source of one call's reviewer (think
// time, who decides), fixed by the seed and the call.
func (d *driver) reviewRand(n int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(d.seed), uint64(n)+1000))
}

// start runs one call in the background.
func (d *driver) start(ctx context.Context, c plannedCall) *callRecord {
	rec := &callRecord{plannedCall: c, Outcomes: map[uint32]airlock.Outcome{}, done: make(chan struct{})}
	d.mu.Lock()
	d.records = append(d.records, rec)
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(rec.done)
		d.run(ctx, rec)
	}()
	return rec
}

// callArgs are the arguments of a call: the tool server reads the agent
// from them to count executions per call.
func callArgs(c plannedCall) map[string]any {
	return map[string]any{"agent": c.Agent, "n": c.N, "amount": 10 + c.N%90}
}

func (d *driver) run(ctx context.Context, rec *callRecord) {
	client := d.clients[rec.Agent]
	args := callArgs(rec.plannedCall)
	for rev := uint32(1); rev <= 2; rev++ {
		if err := d.submit(ctx, client, rec, rev, args); err != nil {
			d.locked(func() { rec.AwaitErrs = append(rec.AwaitErrs, err.Error()) })
			return
		}
		reviewed := make(chan struct{})
		go func() { defer close(reviewed); d.review(ctx, rec, rev) }()
		actx, cancel := context.WithTimeout(ctx, d.p.askTimeout+d.p.awaitSlack)
		out, err := client.AwaitRevision(actx, rec.ID, rev)
		cancel()
		<-reviewed
		d.locked(func() {
			if err != nil && !errors.Is(err, airlock.ErrInvalid) {
				rec.AwaitErrs = append(rec.AwaitErrs, err.Error())
			} else {
				rec.Outcomes[out.Revision] = out
			}
			rec.Ended = time.Now()
		})
		if err != nil || out.Status != airlock.StatusChangesRequested || rec.Review != changesREST {
			return
		}
		args = cloneArgs(args)
		args["amount"], args["revised"] = 1, true
	}
}

// locked changes records under the driver's lock (the checks read records
// while probes still run).
func (d *driver) locked(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
}

// submit publishes the revision, again until the stream acknowledges it: a
// repeated request with the same content is recorded once.
func (d *driver) submit(ctx context.Context, client *airlock.Client, rec *callRecord, rev uint32, args map[string]any) error {
	deadline := time.Now().Add(d.p.submitFor)
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := client.Submit(sctx, airlock.Call{ID: rec.ID, Revision: rev, Server: rec.Server, Tool: rec.Tool, Args: args,
			Thread: "chaos-" + rec.Agent, Reason: "airlock chaos load"})
		cancel()
		if err == nil {
			d.locked(func() {
				if rec.Submitted.IsZero() {
					rec.Submitted = time.Now()
				}
			})
			return nil
		}
		d.locked(func() { rec.SubmitErrors++ })
		if errors.Is(err, airlock.ErrInvalid) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("submit %s/%s rev %d: %w", rec.Agent, rec.ID, rev, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// review plays the reviewers' part for one revision of an asked call.
func (d *driver) review(ctx context.Context, rec *callRecord, rev uint32) {
	act := rec.Review
	if act == reviewNone || act == leaveToExpire {
		return
	}
	if rev == 2 {
		act = approveREST // the revision the agent made after the requested changes
	}
	r := d.reviewRand(rec.N*10 + int(rev))
	who := reviewers[r.IntN(len(reviewers))]
	think := time.Duration(200+r.IntN(1300)) * time.Millisecond
	var err error
	switch act {
	case approveSlack, rejectSlack:
		err = d.reviewSlack(ctx, rec, rev, act, slackUsers[r.IntN(len(slackUsers))], think)
	default:
		err = d.reviewREST(ctx, rec, rev, act, who, think)
	}
	if err != nil {
		d.locked(func() { rec.ReviewErr = err.Error() })
	}
}

// waitPending polls the REST API until the revision is pending (true), has
// already left pending (false), or the ask deadline passes.
func (d *driver) waitPending(ctx context.Context, who, agent, call string, rev uint32) (bool, error) {
	deadline := time.Now().Add(d.p.askTimeout)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		r, err := d.cons.record(rctx, d.tokens[who], agent, call, rev)
		cancel()
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		if r != nil && r.GetCall().GetRevision() == rev {
			return r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false, fmt.Errorf("%s/%s rev %d was not pending within %s", agent, call, rev, d.p.askTimeout)
}

func (d *driver) reviewREST(ctx context.Context, rec *callRecord, rev uint32, act review, who string, think time.Duration) error {
	pending, err := d.waitPending(ctx, who, rec.Agent, rec.ID, rev)
	if err != nil || !pending {
		return err
	}
	time.Sleep(think) // a person reads the call
	body := map[string]any{"revision": rev}
	path, kind, edited := "approve", subject.Approved, false
	switch act {
	case rejectREST, rejectSlack:
		path, kind = "reject", subject.Rejected
		body["reason"] = "not now (airlock chaos)"
	case changesREST:
		path, kind = "changes", subject.ChangesRequested
		body["feedback"] = "use a smaller amount (airlock chaos)"
	case editREST:
		args := callArgs(rec.plannedCall)
		args["amount"], args["edited"] = 1, true
		body["arguments"], body["reason"], edited = args, "edited down (airlock chaos)", true
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := d.cons.decideREST(dctx, d.tokens[who], rec.Agent, rec.ID, path, body)
	if err != nil {
		return err
	}
	d.locked(func() {
		rec.Decisions = append(rec.Decisions, decisionRecord{Rev: rev, Kind: kind, Channel: "api", Changed: resp.GetChanged(),
			State: calls.StateName(resp.GetRecord().GetState()), Edited: edited})
	})
	return nil
}

// reviewSlack decides through the card the approval service posted: a
// signed button click (and, to reject, the reason modal). Like a person, the
// reviewer clicks again when the card does not change within a few
// seconds; with no card at all it decides in the console instead.
func (d *driver) reviewSlack(ctx context.Context, rec *callRecord, rev uint32, act review, u slackfake.User, think time.Duration) error {
	pending, err := d.waitPending(ctx, u.Name, rec.Agent, rec.ID, rev)
	if err != nil || !pending {
		return err
	}
	var c slackfake.Card
	found := false
	for deadline := time.Now().Add(d.p.slackCardWait); time.Now().Before(deadline) && !found; {
		if c, found = d.l.slack.CardOf(rec.Agent, rec.ID, rev); !found {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !found {
		d.locked(func() { rec.SlackFallback = true })
		fallback := approveREST
		if act == rejectSlack {
			fallback = rejectREST
		}
		return d.reviewREST(ctx, rec, rev, fallback, u.Name, 0)
	}
	time.Sleep(think)
	action, kind, want := airlockslack.ActionApprove, subject.Approved, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
	if act == rejectSlack {
		action, kind, want = airlockslack.ActionReject, subject.Rejected, airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
	}
	for try := 1; try <= 5; try++ {
		d.locked(func() { rec.SlackClicks++ })
		trigger := fmt.Sprintf("%d.%s.%d.%d", d.seed, rec.ID, rev, try)
		if _, err := d.cons.slackPost(ctx, d.l.slackSecret, slackfake.ButtonClick(u, c, action, trigger)); err != nil {
			return err
		}
		if act == rejectSlack {
			meta, ok := d.waitModal(ctx, trigger)
			if !ok {
				continue
			}
			status, err := d.cons.slackPost(ctx, d.l.slackSecret, slackfake.ViewSubmission(u, meta, "not now (airlock chaos, Slack)"))
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				continue
			}
		}
		st, err := d.waitDecided(ctx, u.Name, rec, rev)
		if err != nil {
			return err
		}
		if st != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
			d.locked(func() {
				rec.Decisions = append(rec.Decisions, decisionRecord{Rev: rev, Kind: kind, Channel: "slack", Changed: st == want, State: calls.StateName(st)})
			})
			return nil
		}
	}
	return fmt.Errorf("%s/%s rev %d: 5 Slack clicks changed nothing", rec.Agent, rec.ID, rev)
}

// waitModal waits for the modal the click with trigger opened.
func (d *driver) waitModal(ctx context.Context, trigger string) (string, bool) {
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		if m, ok := d.l.slack.Modal(trigger); ok {
			return m, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", false
}

// waitDecided polls the record for a few seconds and returns its state then.
func (d *driver) waitDecided(ctx context.Context, who string, rec *callRecord, rev uint32) (airlockv1.ApprovalState, error) {
	st := airlockv1.ApprovalState_APPROVAL_STATE_PENDING
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		r, err := d.cons.record(rctx, d.tokens[who], rec.Agent, rec.ID, rev)
		cancel()
		if err != nil && ctx.Err() != nil {
			return st, err
		}
		if r != nil && r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
			return r.GetState(), nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return st, nil
}

// probe measures recovery: from since, it submits an auto-allowed call
// every 2 s until one completes, and returns when the first one completed.
func (d *driver) probe(ctx context.Context, since time.Time, limit time.Duration) (time.Duration, bool) {
	done := make(chan time.Time, 64)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	deadline := time.After(limit)
	launch := func() {
		n := int(d.probeSeq.Add(1))
		rec := d.start(ctx, plannedCall{N: 1_000_000 + n, Agent: probeAgent, ID: fmt.Sprintf("probe-%04d", n),
			Server: serverHook, Tool: toolLookup, Probe: true})
		go func() {
			<-rec.done
			d.mu.Lock()
			out, ok := rec.Outcomes[1]
			ended := rec.Ended
			d.mu.Unlock()
			if ok && out.Status == airlock.StatusCompleted {
				done <- ended
			}
		}()
	}
	launch()
	for {
		select {
		case at := <-done:
			return at.Sub(since), true
		case <-tick.C:
			launch()
		case <-deadline:
			return limit, false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// reviewMCP plays the reviewers for the MCP clients' calls that wait for a
// person: it lists them over the REST API and approves each after a
// person's think time, until stop closes (then it waits for the decisions
// it started).
func (d *driver) reviewMCP(ctx context.Context, stop <-chan struct{}) {
	r := rand.New(rand.NewPCG(uint64(d.seed), 120))
	seen := map[string]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		who := reviewers[r.IntN(len(reviewers))]
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		recs, err := d.cons.pending(lctx, d.tokens[who], mcpAgent)
		cancel()
		if err != nil {
			d.mcp.noteReviewErr(err)
			continue
		}
		for _, rec := range recs {
			call, rev := rec.GetCall().GetCallId(), max(rec.GetCall().GetRevision(), 1)
			if key := fmt.Sprintf("%s/%d", call, rev); seen[key] {
				continue
			} else {
				seen[key] = true
			}
			think := time.Duration(500+r.IntN(2500)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-time.After(think): // a person reads the call
				case <-ctx.Done():
					return
				}
				for hold := d.mcp.holdDecision(time.Now()); hold > 0; hold = d.mcp.holdDecision(time.Now()) {
					select {
					case <-time.After(hold): // the asker's replica is killed meanwhile
					case <-ctx.Done():
						return
					}
				}
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if _, err := d.cons.decideREST(dctx, d.tokens[who], mcpAgent, call, "approve", map[string]any{"revision": rev}); err != nil {
					d.mcp.noteReviewErr(err)
				}
			}()
		}
	}
}

// snapshot copies the records for the checks.
func (d *driver) snapshot() []callRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]callRecord, len(d.records))
	for i, r := range d.records {
		out[i] = *r
		out[i].Outcomes = map[uint32]airlock.Outcome{}
		for k, v := range r.Outcomes {
			out[i].Outcomes[k] = v
		}
		out[i].Decisions = append([]decisionRecord(nil), r.Decisions...)
		out[i].AwaitErrs = append([]string(nil), r.AwaitErrs...)
	}
	return out
}
