package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/gateway"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Check is one line of the report: a count that must be zero (or a
// result that must be OK), with examples when it is not.
type Check struct {
	Name string `json:"name"`
	// Value is the count (or "OK" / a verdict for non-counts).
	Value    string   `json:"value"`
	Violated bool     `json:"violated"`
	Examples []string `json:"examples,omitempty"`
}

// Info is a figure worth reading that is not a violation.
type Info struct {
	Name     string   `json:"name"`
	Value    string   `json:"value"`
	Examples []string `json:"examples,omitempty"`
}

// FaultReport is one fault as it happened, with how the system coped.
type FaultReport struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target"`
	AtS    float64 `json:"at_s"`
	ForS   float64 `json:"for_s"`
	// RecoveredS: seconds from the fault until an auto-allowed call
	// submitted from then on completed (ClickHouse: from its restart until
	// it held every event stored before); -1 if it did not within the limit.
	RecoveredS float64 `json:"recovered_s"`
	// SlowestInFlightS: the longest decision-to-end of the calls decided
	// before the fault and not ended when it began.
	SlowestInFlightS float64 `json:"slowest_in_flight_s"`
	// FailoverS (a ClickHouse replica killed): seconds from the kill until
	// the other replicas held every event stored before it; -1 if they did
	// not while it was down.
	ReplicaKill bool    `json:"replica_kill,omitempty"`
	FailoverS   float64 `json:"failover_s,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Latency of decision (allowed / approved) to completion.
type Latency struct {
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// Report is the result of a run.
type Report struct {
	Seed     int64   `json:"seed"`
	Profile  string  `json:"profile"`
	Calls    int     `json:"calls"`
	Events   int     `json:"events"`
	LoadS    float64 `json:"load_s"`
	TotalS   float64 `json:"total_s"`
	RunDir   string  `json:"run_dir"`
	Topology string  `json:"topology"`
	// ClickHouseReplicas: how many replicas ClickHouse ran as (0: one server).
	ClickHouseReplicas int `json:"clickhouse_replicas,omitempty"`
	// Outcomes counts calls by how their last revision ended (from the stream).
	Outcomes   map[string]int `json:"outcomes"`
	Checks     []Check        `json:"checks"`
	Info       []Info         `json:"info"`
	Faults     []FaultReport  `json:"faults"`
	Latency    Latency        `json:"decision_to_completion"`
	UnderFault Latency        `json:"decision_to_completion_under_fault"`
	// Slowest are the calls with the longest decision to completion (times
	// from the first event of the run).
	Slowest    []string `json:"slowest"`
	Verify     string   `json:"audit_verify"`
	Violations int      `json:"violations"`
}

// maxExamples bounds the examples kept per check.
const maxExamples = 5

// revTrail is what the stream says about one call revision.
type revTrail struct {
	agent, call string
	rev         uint32
	types       map[string]int
	decidedAt   time.Time // allowed or approved
	end         *storedEvent
	started     int
}

// callTrail is one call's revisions, in the stream.
type callTrail struct {
	revs map[uint32]*revTrail
	last uint32
}

// ends are the event types that end a revision, as the SDK reads them.
var ends = map[string]bool{
	subject.Denied: true, subject.Rejected: true, subject.ChangesRequested: true, subject.Expired: true,
	subject.Canceled: true, subject.Completed: true, subject.Failed: true, subject.Invalid: true,
}

func trails(evs []storedEvent) map[string]*callTrail {
	out := map[string]*callTrail{}
	for i := range evs {
		e := &evs[i]
		if e.Agent == "" || strings.HasPrefix(e.Agent, "_") || e.Rev == 0 {
			continue
		}
		ck := e.Agent + "/" + e.Call
		ct := out[ck]
		if ct == nil {
			ct = &callTrail{revs: map[uint32]*revTrail{}}
			out[ck] = ct
		}
		rt := ct.revs[e.Rev]
		if rt == nil {
			rt = &revTrail{agent: e.Agent, call: e.Call, rev: e.Rev, types: map[string]int{}}
			ct.revs[e.Rev] = rt
		}
		if e.Rev > ct.last {
			ct.last = e.Rev
		}
		rt.types[e.Type]++
		switch e.Type {
		case subject.Allowed, subject.Approved:
			if rt.decidedAt.IsZero() {
				rt.decidedAt = e.Time
			}
		case subject.Started:
			rt.started++
		}
		if ends[e.Type] && rt.end == nil {
			rt.end = e
		}
	}
	return out
}

// outcomeName names how a revision ended: "completed", "failed/indeterminate", ...
func outcomeName(e *storedEvent) string {
	if e == nil {
		return "no outcome"
	}
	if e.Type == subject.Failed && e.Ev != nil {
		return "failed/" + e.Ev.GetFailed().GetOutcome() + "/" + e.Ev.GetFailed().GetReason()
	}
	return e.Type
}

// checker accumulates the report's checks.
type checker struct{ r *Report }

func (c checker) count(name string, examples []string) {
	ch := Check{Name: name, Value: fmt.Sprint(len(examples)), Violated: len(examples) > 0}
	if len(examples) > maxExamples {
		examples = examples[:maxExamples]
	}
	ch.Examples = examples
	c.r.Checks = append(c.r.Checks, ch)
}

func (c checker) info(name string, v any) {
	c.r.Info = append(c.r.Info, Info{Name: name, Value: fmt.Sprint(v)})
}

// auditStore checks one view of the audit store (name) against the
// stream: nothing missing, nothing extra or returned twice, verify OK.
func (c checker) auditStore(name, verifyName string, events []storedEvent, ch map[uint64]string, twice []string, v verifyResult) {
	var lost, extra []string
	inStream := map[uint64]bool{}
	for _, e := range events {
		inStream[e.Seq] = true
		id, ok := ch[e.Seq]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("seq %d (%s %s/%s)", e.Seq, e.Type, e.Agent, e.Call))
		case id != e.EventID:
			extra = append(extra, fmt.Sprintf("seq %d is %s in %s, %s in the stream", e.Seq, id, name, e.EventID))
		}
	}
	for seq, id := range ch {
		if !inStream[seq] {
			extra = append(extra, fmt.Sprintf("seq %d (%s)", seq, id))
		}
	}
	sort.Strings(extra)
	c.count("events in the stream missing from "+name, lost)
	c.count("events in "+name+" not in the stream", extra)
	c.count("events "+name+" returns twice", twice)
	verify := Check{Name: verifyName, Value: "OK", Violated: !v.OK}
	if !v.OK {
		verify.Value, verify.Examples = "FAILED", []string{v.Output}
	}
	c.r.Checks = append(c.r.Checks, verify)
}

// analyse turns what was observed into the report. It is pure: every check
// is a function of the stream, ClickHouse, the approval records, the tool
// server's executions and what agents and reviewers saw.
func analyse(o observed, idempotent func(server, tool string) bool) Report {
	r := Report{Outcomes: map[string]int{}, Events: len(o.Events)}
	c := checker{&r}
	tr := trails(o.Events)

	// Calls by outcome (the last revision of every call the load made).
	revised := 0
	var unrecorded []string
	for _, call := range o.Calls {
		ct := tr[call.Agent+"/"+call.ID]
		if ct == nil {
			r.Outcomes["never recorded"]++
			if !call.Submitted.IsZero() {
				unrecorded = append(unrecorded, call.Agent+"/"+call.ID+": the intake stream acknowledged it, no event records it")
			}
			continue
		}
		if ct.last > 1 {
			revised++
		}
		r.Outcomes[outcomeName(ct.revs[ct.last].end)]++
	}
	c.count("acknowledged requests never recorded", unrecorded)
	// The load sends only valid requests, revisions only after a request
	// for changes: any invalid is a valid request refused.
	var refused []string
	for _, call := range o.Calls {
		if ct := tr[call.Agent+"/"+call.ID]; ct != nil {
			for rev, rt := range ct.revs {
				if rt.end != nil && rt.end.Type == subject.Invalid {
					refused = append(refused, fmt.Sprintf("%s/%s rev %d: %s", call.Agent, call.ID, rev, rt.end.Ev.GetInvalid().GetReason()))
				}
			}
		}
	}
	c.count("valid requests refused as invalid", refused)
	c.info("calls revised after changes were requested", revised)

	// Executions per call, from the tool server.
	type execKey struct{ agent, call string }
	byCall := map[execKey][]execution{}
	for _, ex := range o.Execs {
		byCall[execKey{ex.Agent, ex.Call}] = append(byCall[execKey{ex.Agent, ex.Call}], ex)
	}
	edited := map[string]bool{}
	for _, call := range o.Calls {
		for _, d := range call.Decisions {
			if d.Edited && d.Changed {
				edited[call.Agent+"/"+call.ID] = true
			}
		}
	}
	var twice, otherKey, unstarted, undecided, notAsEdited []string
	sameKeyReruns := 0
	for k, exs := range byCall {
		name := k.agent + "/" + k.call
		ex0 := exs[0]
		keys := map[string]bool{}
		for _, ex := range exs {
			keys[ex.Key] = true
			if edited[name] && ex.Args["edited"] != true {
				notAsEdited = append(notAsEdited, fmt.Sprintf("%s ran with %v after an edit was approved", name, ex.Args))
			}
		}
		if len(exs) > 1 {
			if !idempotent(ex0.Server, ex0.Tool) {
				twice = append(twice, fmt.Sprintf("%s (%s__%s) ran %d times", name, ex0.Server, ex0.Tool, len(exs)))
			} else if len(keys) > 1 {
				otherKey = append(otherKey, fmt.Sprintf("%s ran with keys %v", name, sortedKeys(keys)))
			} else {
				sameKeyReruns += len(exs) - 1
			}
		}
		ct := tr[name]
		started, decided := 0, false
		if ct != nil {
			for _, rt := range ct.revs {
				started += rt.started
				decided = decided || !rt.decidedAt.IsZero()
			}
		}
		if started == 0 {
			unstarted = append(unstarted, name+" ran without an exec.started (claim) event")
		}
		if !decided {
			undecided = append(undecided, name+" ran without an allowed or approved event")
		}
	}
	c.count("non-idempotent calls executed more than once", twice)
	c.count("idempotent calls re-sent with another idempotency key", otherKey)
	c.info("idempotent re-sends with the same key", sameKeyReruns)
	c.count("executions without a claim (exec.started)", unstarted)
	c.count("executions never allowed or approved", undecided)
	c.count("edited calls not run with the edited arguments", notAsEdited)
	if o.BadSigs > 0 {
		c.count("webhook requests with a bad signature", []string{fmt.Sprintf("%d requests", o.BadSigs)})
	}

	// The execution ledger: one end per started revision; nothing decided
	// to run or requested is left without an end.
	var notOneEnd, decidedNoEnd, noOutcome []string
	keys := make([]string, 0, len(tr))
	for k := range tr {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ct := tr[k]
		for rev, rt := range ct.revs {
			execEnds := rt.types[subject.Completed] + rt.types[subject.Failed]
			if rt.started > 0 && execEnds != 1 {
				notOneEnd = append(notOneEnd, fmt.Sprintf("%s rev %d: %d started, %d completed/failed", k, rev, rt.started, execEnds))
			}
			if !rt.decidedAt.IsZero() && execEnds == 0 {
				decidedNoEnd = append(decidedNoEnd, fmt.Sprintf("%s rev %d: %v", k, rev, rt.types))
			}
		}
		if last := ct.revs[ct.last]; last.end == nil {
			noOutcome = append(noOutcome, fmt.Sprintf("%s rev %d: %v", k, ct.last, last.types))
		}
	}
	c.count("started calls without exactly one terminal event", notOneEnd)
	c.count("calls decided to run that never ended", decidedNoEnd)
	c.count("calls without an outcome", noOutcome)

	// Decisions: every decision the approval service made (answered to a
	// reviewer, or recorded in its bucket) is in the stream.
	var missing []string
	has := func(agent, call string, rev uint32, typ string) bool {
		ct := tr[agent+"/"+call]
		return ct != nil && ct.revs[rev] != nil && ct.revs[rev].types[typ] > 0
	}
	for _, call := range o.Calls {
		for _, d := range call.Decisions {
			if d.Changed && !has(call.Agent, call.ID, d.Rev, d.Kind) {
				missing = append(missing, fmt.Sprintf("%s/%s rev %d: %s via %s answered %s, no %s event", call.Agent, call.ID, d.Rev, d.Kind, d.Channel, d.State, d.Kind))
			}
		}
	}
	for _, rec := range o.Approvals {
		typ := calls.DecisionEvent(rec.GetState())
		if typ != "" && !has(rec.GetCall().GetAgentId(), rec.GetCall().GetCallId(), rec.GetCall().GetRevision(), typ) {
			missing = append(missing, fmt.Sprintf("%s/%s rev %d: record %s, no %s event", rec.GetCall().GetAgentId(), rec.GetCall().GetCallId(),
				rec.GetCall().GetRevision(), calls.StateName(rec.GetState()), typ))
		}
	}
	c.count("decided calls whose decision event is missing", missing)

	// The audit store against the stream: as the services read it, then
	// each replica on its own.
	c.auditStore("ClickHouse", "airlock audit verify", o.Events, o.CH, o.CHTwice, o.Verify)
	r.Verify = o.Verify.Output
	for _, v := range o.Replicas {
		c.auditStore(v.Name, "airlock audit verify on "+v.Name, o.Events, v.CH, v.Twice, v.Verify)
	}

	// What agents saw against what the stream says.
	var differ []string
	awaitErrs, submitRetries, slackClicks, slackFallbacks := 0, 0, 0, 0
	var reviewErrs []string
	for _, call := range o.Calls {
		submitRetries += call.SubmitErrors
		slackClicks += call.SlackClicks
		awaitErrs += len(call.AwaitErrs)
		if call.SlackFallback {
			slackFallbacks++
		}
		if call.ReviewErr != "" {
			reviewErrs = append(reviewErrs, call.Agent+"/"+call.ID+": "+call.ReviewErr)
		}
		ct := tr[call.Agent+"/"+call.ID]
		for rev, out := range call.Outcomes {
			var end *storedEvent
			if ct != nil && ct.revs[rev] != nil {
				end = ct.revs[rev].end
			}
			if why := sameOutcome(out, end); why != "" {
				differ = append(differ, fmt.Sprintf("%s/%s rev %d: %s", call.Agent, call.ID, rev, why))
			}
		}
		if len(call.Outcomes) == 0 && ct != nil && ct.revs[ct.last].end != nil {
			differ = append(differ, fmt.Sprintf("%s/%s: the agent saw no outcome (%s), the stream says %s", call.Agent, call.ID,
				strings.Join(call.AwaitErrs, "; "), outcomeName(ct.revs[ct.last].end)))
		}
	}
	c.count("agent-visible outcomes that differ from the stream", differ)
	c.mcp(o, tr, idempotent)

	var perms []string
	for p, lines := range o.PermissionViolations {
		perms = append(perms, fmt.Sprintf("%s: %s", p, lines[0]))
	}
	sort.Strings(perms)
	c.count("NATS permission violations in service logs", perms)
	var stale []string
	for p, lines := range o.StaleReplies {
		stale = append(stale, fmt.Sprintf("%s: %d", p, len(lines)))
	}
	sort.Strings(stale)
	c.r.Info = append(c.r.Info, Info{Name: "replies NATS refused after a reconnect (stale requests)",
		Value: fmt.Sprint(len(stale)), Examples: stale})

	var unrecovered, faultErrs, noFailover []string
	replicaKills := 0
	for _, f := range o.Faults {
		if !f.Recovered {
			unrecovered = append(unrecovered, fmt.Sprintf("%s %s at %s", f.Kind, f.Resolved, f.At))
		}
		if f.ReplicaKill {
			replicaKills++
			if !f.FailedOver {
				noFailover = append(noFailover, fmt.Sprintf("%s at %s: the other replicas did not catch up within its %s outage", f.Resolved, f.At, f.For))
			}
		}
		if f.Err != "" {
			faultErrs = append(faultErrs, fmt.Sprintf("%s %s: %s", f.Kind, f.Resolved, f.Err))
		}
	}
	c.count("faults the layout did not recover from", unrecovered)
	if replicaKills > 0 {
		c.count("ClickHouse replica kills the audit did not fail over from", noFailover)
	}
	c.count("faults that could not be applied or healed", faultErrs)
	if o.CollectErr != "" {
		c.count("the checks could not read everything", []string{o.CollectErr})
	}

	c.info("submits retried by agents", submitRetries)
	c.info("awaits that ended without an outcome", awaitErrs)
	c.info("Slack clicks (a person clicks again when the card does not change)", slackClicks)
	c.info("Slack decisions made in the console because no card came", slackFallbacks)
	c.r.Info = append(c.r.Info, Info{Name: "reviews that could not be made (the call expired first, or an error)", Value: fmt.Sprint(len(reviewErrs)),
		Examples: reviewErrs[:min(len(reviewErrs), 3)]})

	// Latency of decision to end, overall and for calls in flight during a fault.
	var all, under []time.Duration
	type slow struct {
		d    time.Duration
		what string
	}
	var slowest []slow
	var first time.Time
	if len(o.Events) > 0 {
		first = o.Events[0].Time
	}
	for _, ct := range tr {
		for _, rt := range ct.revs {
			if rt.decidedAt.IsZero() || rt.end == nil || (rt.end.Type != subject.Completed && rt.end.Type != subject.Failed) {
				continue
			}
			d := rt.end.Time.Sub(rt.decidedAt)
			all = append(all, d)
			slowest = append(slowest, slow{d, fmt.Sprintf("%s/%s rev %d: decided at %.1fs, %s %.2fs later", rt.agent, rt.call, rt.rev,
				rt.decidedAt.Sub(first).Seconds(), outcomeName(rt.end), d.Seconds())})
			for _, f := range o.Faults {
				if rt.decidedAt.Before(f.Healed) && rt.end.Time.After(f.Start) {
					under = append(under, d)
					break
				}
			}
		}
	}
	r.Latency, r.UnderFault = latency(all), latency(under)
	sort.Slice(slowest, func(i, j int) bool { return slowest[i].d > slowest[j].d })
	for i := 0; i < len(slowest) && i < maxExamples; i++ {
		r.Slowest = append(r.Slowest, slowest[i].what)
	}

	for _, f := range o.Faults {
		fr := FaultReport{Kind: string(f.Kind), Target: f.Resolved, AtS: f.At.Seconds(), ForS: f.For.Seconds(), RecoveredS: -1, Error: f.Err}
		if f.Recovered {
			fr.RecoveredS = round3(f.RecoveredAfter.Seconds())
		}
		if f.ReplicaKill {
			fr.ReplicaKill, fr.FailoverS = true, -1
			if f.FailedOver {
				fr.FailoverS = round3(f.FailoverAfter.Seconds())
			}
		}
		for _, ct := range tr {
			for _, rt := range ct.revs {
				if !rt.decidedAt.IsZero() && rt.decidedAt.Before(f.Start) && rt.end != nil && rt.end.Time.After(f.Start) {
					fr.SlowestInFlightS = max(fr.SlowestInFlightS, round3(rt.end.Time.Sub(rt.decidedAt).Seconds()))
				}
			}
		}
		r.Faults = append(r.Faults, fr)
	}

	for _, ch := range r.Checks {
		if ch.Violated {
			r.Violations++
		}
	}
	return r
}

// sameOutcome says how what the agent saw differs from the revision's first
// end in the stream, or "" when it does not.
func sameOutcome(out airlock.Outcome, end *storedEvent) string {
	if end == nil {
		return fmt.Sprintf("the agent saw %s, the stream has no end", out.Status)
	}
	if string(out.Status) != end.Type {
		return fmt.Sprintf("the agent saw %s, the stream says %s", out.Status, end.Type)
	}
	if end.Ev == nil {
		return ""
	}
	switch b := end.Ev.Body.(type) {
	case *airlockv1.Event_Completed:
		if b.Completed.GetResultJson() != "" && string(out.Result) != b.Completed.GetResultJson() {
			return "the agent saw another result than the stream's"
		}
	case *airlockv1.Event_Failed:
		if out.FailureOutcome != b.Failed.GetOutcome() {
			return fmt.Sprintf("the agent saw failure outcome %q, the stream says %q", out.FailureOutcome, b.Failed.GetOutcome())
		}
	}
	return ""
}

func latency(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 {
		return round3(float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000)
	}
	return Latency{N: len(ds), P50MS: q(0.50), P99MS: q(0.99), MaxMS: round3(float64(ds[len(ds)-1].Microseconds()) / 1000)}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mcp checks what the MCP clients saw through the gateway replicas against
// the stream and the tool server. One request (its arguments' "n") is at
// most one call in each session it was sent in: sent again in its session
// (after a "pending" answer) it rejoins that call; sent again in a new
// session (its replica died) after a "pending" answer, it rejoins that call
// too (newSessions). A non-idempotent one runs at most once, and every
// answer is what the stream says. A request whose replica died with it has
// no answer; its call, if submitted, must still end (the ledger checks
// above).
func (c checker) mcp(o observed, tr map[string]*callTrail, idempotent func(server, tool string) bool) {
	callsOf := map[int]map[string]bool{} // n → the calls requested with it
	requestedAt := map[string]time.Time{}
	for _, e := range o.Events {
		if e.Agent != mcpAgent || e.Type != subject.Requested || e.Ev == nil {
			continue
		}
		if _, ok := requestedAt[e.Call]; !ok {
			requestedAt[e.Call] = e.Time
		}
		n := int(e.Ev.GetRequested().GetCall().GetArguments().GetFields()["n"].GetNumberValue())
		if callsOf[n] == nil {
			callsOf[n] = map[string]bool{}
		}
		callsOf[n][e.Call] = true
	}
	ranOf := map[int][]execution{}
	for _, ex := range o.Execs {
		if n, ok := ex.Args["n"].(float64); ok && ex.Agent == mcpAgent {
			ranOf[int(n)] = append(ranOf[int(n)], ex)
		}
	}
	type inSession struct {
		n       int
		session string
	}
	sessionsOf := map[int]map[string]bool{}
	answeredIn := map[inSession]map[string]bool{} // the calls a session's answers named
	pendingOnce := map[int]bool{}
	for _, r := range o.MCP {
		if sessionsOf[r.N] == nil {
			sessionsOf[r.N] = map[string]bool{}
		}
		sessionsOf[r.N][r.Session] = true
		if r.CallID != "" && r.Session != "" {
			k := inSession{r.N, r.Session}
			if answeredIn[k] == nil {
				answeredIn[k] = map[string]bool{}
			}
			answeredIn[k][r.CallID] = true
		}
		pendingOnce[r.N] = pendingOnce[r.N] || r.Status == "pending"
	}
	notAdopted, adopted := newSessions(o.MCP, tr, requestedAt)
	atKills := adoptionsAtKills(o, tr, callsOf)
	var split, notRejoined, twice, differ []string
	lost, unavailable, unavailableRan, recordedLost, resent, ranAgain := 0, 0, 0, 0, 0, 0
	seen := map[int]bool{}
	for _, r := range o.MCP {
		name := fmt.Sprintf("%s request %d (%s, gateway-%d)", r.Client, r.N, r.Tool, r.Replica+1)
		if !seen[r.N] {
			seen[r.N] = true
			if ids := callsOf[r.N]; len(ids) > max(1, len(sessionsOf[r.N])) {
				split = append(split, fmt.Sprintf("%s, sent in %d sessions, was recorded as calls %v", name, len(sessionsOf[r.N]), sortedKeys(ids)))
			}
			if exs := ranOf[r.N]; len(exs) > 1 && !idempotent(exs[0].Server, exs[0].Tool) {
				twice = append(twice, fmt.Sprintf("%s ran %d times", name, len(exs)))
			} else if ranAs(exs) > 1 {
				ranAgain++
			}
			if len(sessionsOf[r.N]) > 1 {
				resent++
			}
		}
		if ids := answeredIn[inSession{r.N, r.Session}]; r.Attempt > 1 && len(ids) > 1 {
			notRejoined = append(notRejoined, fmt.Sprintf("%s attempt %d: its session's answers named calls %v", name, r.Attempt, sortedKeys(ids)))
		}
		switch {
		case r.Err != "":
			lost++
			if len(callsOf[r.N]) > 0 {
				recordedLost++
			}
			continue
		case r.Status == "unavailable": // not an outcome: "try again"
			unavailable++
			if ct := tr[mcpAgent+"/"+r.CallID]; ct != nil && ct.revs[1] != nil && ct.revs[1].started > 0 {
				unavailableRan++
			}
			continue
		case !callsOf[r.N][r.CallID]:
			differ = append(differ, fmt.Sprintf("%s was answered %s with call %q, which was not requested with its arguments", name, r.Status, r.CallID))
			continue
		case r.Status == "pending": // not an outcome: "call again"
			continue
		}
		var end *storedEvent
		if ct := tr[mcpAgent+"/"+r.CallID]; ct != nil && ct.revs[1] != nil {
			end = ct.revs[1].end
		}
		switch {
		case end == nil:
			differ = append(differ, fmt.Sprintf("%s was answered %s for call %s, which has no outcome in the stream", name, r.Status, r.CallID))
		case end.Type != r.Status:
			differ = append(differ, fmt.Sprintf("%s was answered %s, the stream says %s", name, r.Status, outcomeName(end)))
		}
	}
	pending := 0
	for _, p := range pendingOnce {
		if p {
			pending++
		}
	}
	c.count("MCP requests recorded as more calls than their sessions", split)
	c.count("MCP requests sent again in a session that did not rejoin", notRejoined)
	c.count("MCP requests sent again in a new session, not rejoining", notAdopted)
	c.count("MCP calls waiting for a person when their gateway replica was killed, not rejoined from a new session", atKills.missed)
	c.count("MCP requests executed more than once", twice)
	c.count("MCP answers that differ from the stream", differ)
	c.info("MCP requests through the gateway", len(seen))
	c.info("  answered \"pending\", then sent again (rejoined in their session)", pending)
	c.info("  sent in more than one session (their replica died)", resent)
	c.info("    of which rejoined a call of the old session from a new one", adopted)
	c.info("    of which rejoined a call waiting when its replica was killed", atKills.adopted)
	if atKills.adopted == 0 && len(atKills.why) > 0 {
		// No rejoin after a kill was seen: say why none could be, so that
		// a run without one is not read as one that checked it.
		c.r.Info = append(c.r.Info, Info{Name: "gateway replica kills after which no new session could rejoin a waiting call, and why",
			Value: fmt.Sprint(len(atKills.why)), Examples: atKills.why[:min(len(atKills.why), maxExamples)]})
	}
	// A new session's call is a new call only when the first was not yet
	// offered (its replica died before it waited for a person) or its
	// outcome went with the lost answer: idempotent tools only here.
	c.info("  run as more than one call (a new call in a new session)", ranAgain)
	c.info("MCP sessions started (incl. after a replica died, probes)", o.MCPSessions)
	c.info("MCP requests without an answer (their gateway replica died)", lost)
	c.info("  of which the gateway had submitted (each ended: checked above)", recordedLost)
	c.info("MCP answers \"unavailable, try again\"", unavailable)
	// Such a call may still run: a client that tries again makes a new call.
	c.info("  of which the call ran all the same", unavailableRan)
	c.r.Info = append(c.r.Info, Info{Name: "approvals of MCP calls that failed (the call then expires)", Value: fmt.Sprint(len(o.MCPReviewErrs)),
		Examples: o.MCPReviewErrs[:min(len(o.MCPReviewErrs), maxExamples)]})
}

// newSessions lists the MCP requests answered "pending" in one session and
// sent again in a later one (their replica died, or the client gave up on
// a request) whose answers there name another call: the gateway offered
// the call to the endpoint's other sessions before it answered "pending",
// and no client waits for it any more, so the new session rejoins it.
// Excused is a call that ended before the new session's first attempt
// while a request of the old one went unanswered: its outcome may have
// gone with that answer (delivered, so an identical call is new); and a
// call withdrawn because its client gave up on it, whenever that landed. rejoined counts the
// requests answered in a later session with a call requested before that
// session's first attempt (pending or not in the old one).
func newSessions(records []mcpRecord, tr map[string]*callTrail, requestedAt map[string]time.Time) (out []string, rejoined int) {
	byN := map[int][]mcpRecord{}
	var ns []int
	for _, r := range records {
		if r.Session == "" {
			continue
		}
		if byN[r.N] == nil {
			ns = append(ns, r.N)
		}
		byN[r.N] = append(byN[r.N], r)
	}
	endedBefore := func(call string, at time.Time) bool { return endedBefore(tr, call, at) }
	for _, n := range ns {
		var offered, offeredIn, session string
		var began time.Time // the session's first attempt
		lost, joined := false, false
	records:
		for _, r := range byN[n] {
			if r.Session != session {
				if offered != "" && lost && endedBefore(offered, r.Sent) {
					offered = ""
				}
				session, lost, began = r.Session, false, r.Sent
			}
			if at, ok := requestedAt[r.CallID]; ok && r.Session != byN[n][0].Session && at.Before(began) {
				joined = true
			}
			switch {
			case r.Err != "":
				lost = true
			case r.CallID == "":
			case offered == "" && r.Status == "pending":
				offered, offeredIn = r.CallID, r.Session
			case offered != "" && r.Session != offeredIn && r.CallID != offered:
				out = append(out, fmt.Sprintf("%s request %d attempt %d (gateway-%d) was answered %s with call %s in a new session, not call %s its earlier session was answered \"pending\" for",
					r.Client, n, r.Attempt, r.Replica+1, r.Status, r.CallID, offered))
				joined = false
				break records // once per request
			}
		}
		if joined {
			rejoined++
		}
	}
	return out, rejoined
}

// endedBefore reports whether call ended before at, or was withdrawn
// because its client gave up on it: a new session then makes a new call.
func endedBefore(tr map[string]*callTrail, call string, at time.Time) bool {
	end := endOf(tr, call)
	if end == nil {
		return false
	}
	// A call its client gave up on is withdrawn a moment after the gateway
	// takes its offer back, whenever the withdrawal lands.
	withdrawn := end.Type == subject.Canceled && end.Ev.GetCanceled().GetReason() == gateway.ClientCanceled
	return withdrawn || end.Time.Before(at)
}

// endOf is the event that ended the MCP agent's call, nil while it has not.
func endOf(tr map[string]*callTrail, call string) *storedEvent {
	ct := tr[mcpAgent+"/"+call]
	if ct == nil || ct.revs[1] == nil {
		return nil
	}
	return ct.revs[1].end
}

// callsAt says what became of calls by the time at: when each was asked
// of a person and ended ("none" without a call).
func callsAt(tr map[string]*callTrail, calls map[string]bool, askedAt map[string]time.Time, at time.Time) string {
	var says []string
	for _, id := range sortedKeys(calls) {
		s := "call " + id + " never asked of a person"
		if t, ok := askedAt[id]; ok {
			s = fmt.Sprintf("call %s asked %s after the kill", id, t.Sub(at).Round(time.Millisecond))
		}
		if end := endOf(tr, id); end != nil {
			s += fmt.Sprintf(", %s %s after it", end.Type, end.Time.Sub(at).Round(time.Millisecond))
		}
		says = append(says, s)
	}
	if len(says) == 0 {
		return "no call submitted"
	}
	return strings.Join(says, "; ")
}

// offerLag bounds how long after a call's approval request is stored the
// gateway replica following the call has offered it to the endpoint's
// other sessions (its watch of the stream brings the request, then it
// writes the offer): a kill within that time may find it not yet offered,
// and the new session's identical call is then a new call.
const offerLag = time.Second

// killRejoins is what became of the asking client's calls that waited for
// a person on a gateway replica when the schedule killed it.
type killRejoins struct {
	// adopted: such calls a new session of the client rejoined.
	adopted int
	// missed: such calls sent again from a new session, answered with
	// another call while the call still waited.
	missed []string
	// why: for each kill, or call, that no rejoin could follow, why not.
	why []string
}

// adoptionsAtKills follows each gateway replica kill of the schedule (the
// asking client is kept on the replica killed): the asker's call waiting
// for a person there when it died must be rejoined by the session the
// client starts on another replica. newSessions checks what sessions'
// answers named; this checks that the kill was followed by a rejoin at
// all, even when the request at the kill had no answer yet.
func adoptionsAtKills(o observed, tr map[string]*callTrail, callsOf map[int]map[string]bool) killRejoins {
	// When each of the MCP agent's calls was first asked of a person.
	askedAt := map[string]time.Time{}
	for _, e := range o.Events {
		if _, seen := askedAt[e.Call]; e.Agent == mcpAgent && e.Type == subject.ApprovalRequested && !seen {
			askedAt[e.Call] = e.Time
		}
	}
	var out killRejoins
	for _, f := range o.Faults {
		replica, ok := f.gatewayKill() // a kill's target is the one hit (Resolved)
		if !ok || f.Start.IsZero() {
			continue
		}
		idx := replica + 1
		killed := fmt.Sprintf("gateway-%d (killed at %s)", idx, f.Start.UTC().Format("15:04:05.000"))
		// The asker's last request before the kill: on the replica, its
		// session died with it.
		var at *mcpRecord
		for i := range o.MCP {
			r := &o.MCP[i]
			if r.Client == "mcp-asker" && r.Session != "" && r.Sent.Before(f.Start) {
				at = r
			}
		}
		switch {
		case at == nil:
			out.why = append(out.why, killed+": the asking client had sent no request yet")
			continue
		case at.Replica != idx-1:
			out.why = append(out.why, fmt.Sprintf("%s: the asking client was on gateway-%d then (its request %d)", killed, at.Replica+1, at.N))
			continue
		}
		call, late := "", ""
		for id := range callsOf[at.N] {
			t, ok := askedAt[id]
			if end := endOf(tr, id); !ok || !t.Before(f.Start) || end != nil && end.Time.Before(f.Start) {
				continue
			}
			if t.Add(offerLag).After(f.Start) {
				late = id
				continue
			}
			call = id
		}
		switch {
		case call == "" && late != "":
			out.why = append(out.why, fmt.Sprintf("%s: call %s (request %d) was asked of a person less than %s before the kill: the replica may have died before it offered the call", killed, late, at.N, offerLag))
			continue
		case call == "":
			out.why = append(out.why, fmt.Sprintf("%s: the asking client's request %d (sent %s) had no call waiting for a person: %s",
				killed, at.N, at.Sent.UTC().Format("15:04:05.000"), callsAt(tr, callsOf[at.N], askedAt, f.Start)))
			continue
		}
		var later []mcpRecord
		for _, r := range o.MCP {
			if r.N == at.N && r.Session != "" && r.Session != at.Session && r.Sent.After(f.Start) && r.CallID != "" {
				later = append(later, r)
			}
		}
		switch {
		case slices.ContainsFunc(later, func(r mcpRecord) bool { return r.CallID == call }):
			out.adopted++
		case len(later) == 0:
			out.why = append(out.why, fmt.Sprintf("%s: call %s (request %d) was not answered in a new session (the client stopped asking, or no replica answered)", killed, call, at.N))
		case endedBefore(tr, call, later[0].Sent):
			out.why = append(out.why, fmt.Sprintf("%s: call %s (request %d) ended before the new session sent it again", killed, call, at.N))
		default:
			out.missed = append(out.missed, fmt.Sprintf("%s: asker request %d waited in call %s; its new session %s was answered %s with call %s",
				killed, at.N, call, later[0].Session, later[0].Status, later[0].CallID))
		}
	}
	return out
}

// ranAs is how many calls the executions are of (an idempotent call re-sent
// by the executor runs again as the same call).
func ranAs(exs []execution) int {
	calls := map[string]bool{}
	for _, ex := range exs {
		calls[ex.Call] = true
	}
	return len(calls)
}
