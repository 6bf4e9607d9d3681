package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/policy/shadow"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/grant"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// RulePrefix starts the key of every run-time rule in the policy bucket: "rules.<id>".
const RulePrefix = "rules."

// Engine is the policy service's Decider: the Rego evaluator in force, kept
// current from the rules bucket and the policy directory, plus standing
// grants. Every replica runs one; they converge on the same revision
// because they build it from the same code and the same bucket.
type Engine struct {
	deps   svc.Deps
	log    *slog.Logger
	pub    *bus.Publisher
	rules  jetstream.KeyValue
	grants jetstream.KeyValue
	dir    string
	// frontend checks that rule changes come from a front-end.
	frontend seal.Key

	cur atomic.Pointer[decide.Evaluator]

	mu      sync.Mutex // guards what follows and serialises rebuilds
	code    *decide.Code
	kvRules map[string]*airlockv1.PolicyRule
	badHash string // a directory state that was refused, so it is not retried every tick
	// ruleRev is the newest rules-bucket revision this replica has handled;
	// ruleSeen is closed and replaced each time it moves, so a rule change
	// made through this replica's API can answer once it is in force here.
	ruleRev  uint64
	ruleSeen chan struct{}

	// shadow runs the candidate policy in shadow, if any (shadow_engine.go);
	// sh is the stored shadow state it was built from (guarded by mu).
	shadow *shadow.Runner
	sh     shadowRun

	// The standing grants in force: a snapshot, replaced whole when grants
	// change and never modified, so deciding (live or in shadow) reads it
	// without a lock and never waits for a rebuild, a change or the other.
	// grantWork is the writer's own copy: only NewEngine and then Run's
	// loop touch it.
	grantsInForce atomic.Pointer[map[string]*airlockv1.StandingGrant]
	grantWork     map[string]*airlockv1.StandingGrant
	// grantWorkRev is the newest grants-bucket revision in the writer's
	// copy; grantRev the newest in force, and grantSeen is closed and
	// replaced each time it moves (guarded by grantMu), so an ask that
	// found no grant can wait for one stored a moment before it.
	grantWorkRev uint64
	grantMu      sync.Mutex
	grantRev     uint64
	grantSeen    chan struct{}
	// grantUnseen: a bucket sequence the watch did not bring within
	// grantWait (a message removed from the bucket's stream behind the
	// watch's back, or a watch far behind): asks no longer wait for it.
	grantUnseen uint64
	// grantRead: the read of the bucket's last sequence asks share (the
	// next one, or the one in flight); grantWaiters bounds the asks
	// waiting at once.
	grantRead    *grantRead
	grantWaiters chan struct{}
	// waitGrants is grantWait (a test may lengthen it: SetGrantWait).
	waitGrants time.Duration
}

// grantSnapshot is the standing grants in force; callers must not modify it.
func (e *Engine) grantSnapshot() map[string]*airlockv1.StandingGrant { return *e.grantsInForce.Load() }

// publishGrants puts the writer's copy in force as a new snapshot.
func (e *Engine) publishGrants() {
	m := maps.Clone(e.grantWork)
	e.grantsInForce.Store(&m)
	e.grantMu.Lock()
	defer e.grantMu.Unlock()
	if e.grantWorkRev > e.grantRev {
		e.grantRev = e.grantWorkRev
		close(e.grantSeen)
		e.grantSeen = make(chan struct{})
	}
}

// grantsCaughtUp waits until the grants in force include every change the
// grants bucket had stored when it was called (its stream's last
// sequence), for grantWait at most, and reports whether they moved since
// rev: a grant a person created a moment before a call is then in force
// for that call, though the watch that follows the bucket had not yet
// brought it here (CreateGrant answers once the grant is stored). At most
// grantWaiters asks wait at once (one over decides with the grants in
// force, as before the wait existed), and they share the bucket's state
// (grantLastSeq), so a flood of asks costs the bucket's stream one request
// at a time.
func (e *Engine) grantsCaughtUp(ctx context.Context, rev uint64) bool {
	select {
	case e.grantWaiters <- struct{}{}:
		defer func() { <-e.grantWaiters }()
	default:
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, e.waitGrants)
	defer cancel()
	last, err := e.grantLastSeq(wctx)
	if err != nil {
		e.log.Warn("could not read the grants bucket's state; deciding with the grants in force", "err", err)
		return false
	}
	for {
		e.grantMu.Lock()
		now, seen, unseen := e.grantRev, e.grantSeen, e.grantUnseen
		e.grantMu.Unlock()
		if now >= last || last <= unseen {
			return now > rev
		}
		select {
		case <-seen:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return now > rev // the ask itself ended (the service stops)
			}
			e.grantMu.Lock()
			first := last > e.grantUnseen
			e.grantUnseen = max(e.grantUnseen, last)
			e.grantMu.Unlock()
			if first {
				e.log.Warn("the grants in force lag the grants bucket; deciding with them, and no longer waiting for this change", "in_force", now, "stored", last)
			}
			return now > rev
		}
	}
}

// grantLastSeq is the grants bucket's stream's last sequence, read by a
// request that started after this call did: a request already in flight
// may predate a grant the call must see, so a caller that finds one waits
// for it to end and then joins (or starts) the next, which every caller
// waiting meanwhile shares.
func (e *Engine) grantLastSeq(ctx context.Context) (uint64, error) {
	e.grantMu.Lock()
	for e.grantRead != nil && e.grantRead.started {
		running := e.grantRead.done
		e.grantMu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		e.grantMu.Lock()
	}
	r := e.grantRead
	if r == nil {
		r = &grantRead{done: make(chan struct{})}
		e.grantRead = r
		go e.readGrantLastSeq(r)
	}
	e.grantMu.Unlock()
	select {
	case <-r.done:
		return r.seq, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// grantRead is one read of the grants bucket's last sequence, shared by the
// asks that joined it before it started.
type grantRead struct {
	started bool
	done    chan struct{}
	seq     uint64
	err     error
}

// readGrantLastSeq performs r (bounded by grantWait) and lets the next
// read begin.
func (e *Engine) readGrantLastSeq(r *grantRead) {
	e.grantMu.Lock()
	r.started = true
	e.grantMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), e.waitGrants)
	defer cancel()
	st, err := e.grants.Status(ctx)
	if err == nil {
		if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
			r.seq = bs.StreamInfo().State.LastSeq
		} else {
			err = errors.New("the grants bucket's status has no stream state")
		}
	}
	r.err = err
	e.grantMu.Lock()
	if e.grantRead == r {
		e.grantRead = nil
	}
	e.grantMu.Unlock()
	close(r.done)
}

// grantWait bounds how long an ask that found no grant waits for the
// grants in force to catch up with the bucket; grantWaitersMax how many
// asks wait at once.
const (
	grantWait       = 2 * time.Second
	grantWaitersMax = 8
)

// Evaluator returns the evaluator in force.
func (e *Engine) Evaluator() *decide.Evaluator { return e.cur.Load() }

// Revision is the policy revision in force.
func (e *Engine) Revision() string { return e.cur.Load().Revision() }

// NewEngine loads the policy (cfg.Policy.Dir, or the built-in default), the
// run-time rules and the standing grants, and returns an engine ready to
// decide. A policy that does not compile is an error: the service refuses to
// start rather than deciding with nothing. Call Run to follow changes.
func NewEngine(ctx context.Context, deps svc.Deps) (*Engine, error) {
	e := &Engine{
		deps: deps, log: deps.Log.With("service", "policy"), pub: deps.Publisher("policy"),
		dir: deps.Config.Policy.Dir, kvRules: map[string]*airlockv1.PolicyRule{}, ruleSeen: make(chan struct{}), grantWork: map[string]*airlockv1.StandingGrant{}, grantSeen: make(chan struct{}), grantWaiters: make(chan struct{}, grantWaitersMax), waitGrants: grantWait,
	}
	e.shadow = shadow.New(e.log, e.recordDivergence, shadow.Options{})
	var err error
	if e.frontend, err = deps.FrontendKey(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if e.dir != "" {
		e.code, err = decide.CodeFromDir(e.dir)
	} else {
		e.code, err = decide.DefaultCode()
	}
	if err != nil {
		return nil, err
	}
	if e.rules, err = deps.JS.KeyValue(ctx, deps.Config.Buckets.Policy); err != nil {
		return nil, fmt.Errorf("policy bucket %s: %w (run `airlock provision` with administrator credentials, or `airlock dev`)", deps.Config.Buckets.Policy, err)
	}
	if e.grants, err = deps.JS.KeyValue(ctx, deps.Config.Buckets.Grants); err != nil {
		return nil, fmt.Errorf("grants bucket %s: %w", deps.Config.Buckets.Grants, err)
	}
	if err := bus.ReadAll(ctx, e.rules, RulePrefix+">", func(en jetstream.KeyValueEntry) {
		if _, err := e.applyRule(en); err != nil {
			e.log.Error("run-time rule ignored: it is not valid", "key", en.Key(), "err", err)
		}
	}); err != nil {
		return nil, err
	}
	if err := bus.ReadAll(ctx, e.grants, ">", func(en jetstream.KeyValueEntry) { e.applyGrant(en) }); err != nil {
		return nil, err
	}
	e.publishGrants()
	ev, err := e.build(ctx, e.code)
	if err != nil {
		return nil, err
	}
	e.cur.Store(ev)
	if err := e.loadShadow(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Engine) build(ctx context.Context, code *decide.Code) (*decide.Evaluator, error) {
	rules := slices.Collect(maps.Values(e.kvRules))
	return decide.NewEvaluator(ctx, code, rules, e.deps.Config.Policy.Profiles, decide.WithAskDefaults(decide.AskDefaultsFrom(e.deps.Config)))
}

// applyRule updates the rule map from one bucket entry and reports what
// changed; a value that does not decode is refused and the old rule kept.
func (e *Engine) applyRule(en jetstream.KeyValueEntry) (change string, err error) {
	id := strings.TrimPrefix(en.Key(), RulePrefix)
	if en.Operation() != jetstream.KeyValuePut {
		delete(e.kvRules, id)
		return fmt.Sprintf("rule %s removed from the bucket", id), nil
	}
	r := &airlockv1.PolicyRule{}
	if err := protojson.Unmarshal(en.Value(), r); err != nil {
		return "", fmt.Errorf("rule %s does not decode: %w", id, err)
	}
	if err := decide.ValidateRule(r); err != nil && !r.Deleted {
		return "", err
	}
	if r.Id != id {
		return "", fmt.Errorf("rule under key %s has id %q", en.Key(), r.Id)
	}
	e.kvRules[id] = r
	who := calls.ActorName(r.UpdatedBy)
	if r.Deleted {
		return fmt.Sprintf("rule %s deleted by %s", id, who), nil
	}
	return fmt.Sprintf("rule %s put by %s: %s", id, who, describeRule(r)), nil
}

func describeRule(r *airlockv1.PolicyRule) string {
	var what []string
	for _, kv := range [][2]string{{"server", r.Server}, {"tool", r.Tool}, {"tool_pattern", r.ToolPattern}, {"pattern", r.Pattern}, {"agent", r.Agent}} {
		if kv[1] != "" {
			what = append(what, kv[0]+"="+kv[1])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Args)) {
		what = append(what, "args"+k+"="+r.Args[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.Commands)) {
		what = append(what, "commands"+k+"="+r.Commands[k])
	}
	if len(r.Principals) > 0 {
		what = append(what, "principals="+strings.Join(r.Principals, ","))
	}
	if r.ArgumentsMatch != "" {
		what = append(what, "arguments_match="+r.ArgumentsMatch)
	}
	for _, k := range slices.Sorted(maps.Keys(r.ArgumentsNotMatching)) {
		what = append(what, "arguments_not_matching"+k+"="+r.ArgumentsNotMatching[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.ArgumentsMatching)) {
		what = append(what, "arguments_matching"+k+"="+r.ArgumentsMatching[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
		what = append(what, fmt.Sprintf("annotations.%s=%v", k, r.Annotations[k]))
	}
	if r.OtherArguments != "" {
		what = append(what, "other_arguments="+r.OtherArguments)
	}
	return fmt.Sprintf("priority %d, %s → %s", r.Priority, strings.Join(what, " "), r.Effect)
}

// ruleAuthor is the principal a rule change names (updated_by), who the
// policy_changed event is attributed to. A deletion by the bucket's own
// means (purge, TTL) names nobody.
func ruleAuthor(en jetstream.KeyValueEntry) *airlockv1.Actor {
	r := &airlockv1.PolicyRule{}
	if en.Operation() != jetstream.KeyValuePut || protojson.Unmarshal(en.Value(), r) != nil || r.GetUpdatedBy().GetId() == "" {
		return nil
	}
	a := proto.Clone(r.GetUpdatedBy()).(*airlockv1.Actor)
	if a.Type == airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED {
		a.Type = airlockv1.ActorType_ACTOR_TYPE_HUMAN
	}
	return a
}

// applyGrant applies a change of the grants bucket to the writer's copy;
// publishGrants puts it in force.
func (e *Engine) applyGrant(en jetstream.KeyValueEntry) {
	e.grantWorkRev = max(e.grantWorkRev, en.Revision())
	if en.Operation() != jetstream.KeyValuePut {
		delete(e.grantWork, en.Key())
		return
	}
	g := &airlockv1.StandingGrant{}
	if err := proto.Unmarshal(en.Value(), g); err != nil {
		e.log.Warn("standing grant does not decode; ignoring it", "grant", en.Key(), "err", err)
		delete(e.grantWork, en.Key())
		return
	}
	e.grantWork[en.Key()] = g
}

// grantBurst bounds how many grant changes Run applies before it puts them
// in force, while more are queued.
const grantBurst = 64

// run follows the rules bucket, the grants bucket and the policy directory
// until ctx ends, calling ready once every change is followed. Every
// accepted change swaps the evaluator atomically and publishes
// policy_changed; a refused one publishes policy_changed with refused=true
// and leaves the evaluator in force.
func (e *Engine) run(ctx context.Context, ready func()) error {
	// The watches end with run, whichever way it returns.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each watch is started again when it ends (bus.Follow); what a start
	// replays is not news: a replayed rule is not announced as a change.
	rules, err := bus.Follow(ctx, e.rules, RulePrefix+">", bus.FollowOptions{What: "the run-time rules", Log: e.log})
	if err != nil {
		return err
	}
	grants, err := bus.Follow(ctx, e.grants, ">", bus.FollowOptions{What: "the standing grants", Log: e.log})
	if err != nil {
		return err
	}
	shadow, err := bus.Follow(ctx, e.rules, ShadowKey, bus.FollowOptions{What: "the shadow candidate's state", Log: e.log})
	if err != nil {
		return err
	}
	ready()
	shadowDone := make(chan struct{})
	go func() { defer close(shadowDone); _ = e.shadow.Run(ctx) }()
	defer func() { cancel(); <-shadowDone }()
	var tick <-chan time.Time
	if e.dir != "" {
		t := time.NewTicker(e.deps.Config.Policy.ReloadInterval)
		defer t.Stop()
		tick = t.C
	}
	unpublished := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, open := <-rules:
			if !open {
				return e.followEnded(ctx, "the run-time rules")
			}
			if c.Entry != nil {
				e.onRule(ctx, c.Entry, !c.Replayed)
			}
		case c, open := <-shadow:
			if !open {
				return e.followEnded(ctx, "the shadow candidate's state")
			}
			if c.Entry != nil {
				e.onShadow(ctx, c.Entry, !c.Replayed)
			}
		case c, open := <-grants:
			if !open {
				return e.followEnded(ctx, "the standing grants")
			}
			if c.Entry != nil {
				e.applyGrant(c.Entry)
				unpublished++
			}
			// One snapshot per burst of changes (a replay is one, ended by
			// its mark; one cut short is put in force once drained), not one
			// copy of every grant per change.
			if unpublished > 0 && (c.Entry == nil || len(grants) == 0 || unpublished >= grantBurst) {
				e.publishGrants()
				unpublished = 0
			}
		case <-tick:
			e.reloadDir(ctx)
		}
	}
}

// followEnded is run's end when a watch's changes ended: nothing, once ctx
// has; else the connection closed, and the engine can no longer follow
// what is in force.
func (e *Engine) followEnded(ctx context.Context, what string) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("follow %s: the connection to NATS closed", what)
}

func (e *Engine) onRule(ctx context.Context, en jetstream.KeyValueEntry, live bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.ruleHandled(en.Revision())
	prevRule, had := e.kvRules[strings.TrimPrefix(en.Key(), RulePrefix)]
	change, err := e.applyRule(en)
	sys := callref.System{Kind: callref.SystemPolicyRule, ID: strconv.FormatUint(en.Revision(), 10)}
	prev := e.cur.Load()
	if err == nil {
		var ev *decide.Evaluator
		if ev, err = e.build(ctx, e.code); err == nil {
			e.cur.Store(ev)
			e.rebuildShadow(ctx)
			if live && ev.Revision() != prev.Revision() {
				e.changed(ctx, sys.EventID(subject.PolicyChanged), change, prev.Revision(), ev.Revision(), ruleAuthor(en), nil)
			}
			return
		}
		// Put the rule map back as it was: the old policy stays in force.
		key := strings.TrimPrefix(en.Key(), RulePrefix)
		if had {
			e.kvRules[key] = prevRule
		} else {
			delete(e.kvRules, key)
		}
	}
	e.log.Error("rule change refused; the previous policy stays in force", "key", en.Key(), "err", err)
	if live {
		e.changed(ctx, sys.EventID("refused"), "rule change "+en.Key()+" refused", prev.Revision(), prev.Revision(), ruleAuthor(en), err)
	}
}

// ruleHandled records that the rules bucket's entry at rev was applied or
// refused here, and wakes whoever waits for it. Called with mu held.
func (e *Engine) ruleHandled(rev uint64) {
	if rev <= e.ruleRev {
		return
	}
	e.ruleRev = rev
	close(e.ruleSeen)
	e.ruleSeen = make(chan struct{})
}

// waitRule waits until this replica has handled the rules bucket up to rev,
// so that a rule stored through its API is in force here when the API
// answers. Other replicas follow the bucket on their own; a wait that times
// out is not an error: the rule is stored and takes effect when the watcher
// gets to it.
func (e *Engine) waitRule(ctx context.Context, rev uint64) {
	ctx, cancel := context.WithTimeout(ctx, ruleWait)
	defer cancel()
	for {
		e.mu.Lock()
		done, seen := e.ruleRev >= rev, e.ruleSeen
		e.mu.Unlock()
		if done {
			return
		}
		select {
		case <-seen:
		case <-ctx.Done():
			e.log.Warn("rule stored but not yet in force on this replica", "revision", rev)
			return
		}
	}
}

// ruleWait bounds how long a rule change waits to be in force before its
// API call answers.
const ruleWait = 5 * time.Second

// reloadDir rebuilds the policy when the .rego files or data.json changed.
func (e *Engine) reloadDir(ctx context.Context) {
	hash, err := dirHash(e.dir)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil && (hash == e.code.Hash || hash == e.badHash) {
		return
	}
	prev := e.cur.Load()
	var code *decide.Code
	if err == nil {
		code, err = decide.CodeFromDir(e.dir)
	}
	var ev *decide.Evaluator
	if err == nil {
		ev, err = e.build(ctx, code)
	}
	if err != nil {
		if hash == e.badHash && hash != "" {
			return
		}
		e.badHash = hash
		e.log.Error("policy reload refused; the previous policy stays in force", "dir", e.dir, "err", err)
		e.changed(ctx, callref.System{Kind: callref.SystemPolicyCode, ID: prev.Code().Hash + "-" + hash}.EventID("refused"), "rego reload of "+e.dir+" refused", prev.Revision(), prev.Revision(), nil, err)
		return
	}
	e.badHash = ""
	e.code = code
	e.cur.Store(ev)
	e.log.Info("policy reloaded", "dir", e.dir, "revision", ev.Revision())
	e.changed(ctx, callref.System{Kind: callref.SystemPolicyCode, ID: prev.Code().Hash + "-" + code.Hash}.EventID(subject.PolicyChanged), "rego reloaded from "+e.dir+" ("+strings.Join(slices.Sorted(maps.Keys(code.Modules)), ", ")+")", prev.Revision(), ev.Revision(), nil, nil)
}

// dirHash digests the policy files of dir as loaded (tests excluded).
func dirHash(dir string) (string, error) {
	fsys := os.DirFS(dir)
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	data := []byte("{}")
	for _, en := range entries {
		n := en.Name()
		if en.IsDir() || strings.HasSuffix(n, "_test.rego") || !(strings.HasSuffix(n, ".rego") || n == "data.json") {
			continue
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		if n == "data.json" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				return "", fmt.Errorf("data.json: %w", err)
			}
			if m == nil {
				m = map[string]any{}
			}
			data, _ = json.Marshal(m) // canonical, as decide.NewCode hashes it
			continue
		}
		fmt.Fprintf(h, "%s\x00%s\x00", n, b)
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// grantUsed records that grant g allowed call (grant_used, on the call's
// subject; id "<call>.<rev>.grant_used", so a redelivered request records
// one use) and, when that was its last use, that it is used up
// (grant_expired on airlock.evt._system.<grant>.grant_expired).
func (e *Engine) grantUsed(ctx context.Context, call *airlockv1.ToolCall, id string, g *airlockv1.StandingGrant) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	self := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"}
	used := envelope.ForCall(call, self)
	used.EventId = callref.Of(call).EventID(subject.GrantUsed)
	used.Body = &airlockv1.Event_GrantUsed{GrantUsed: &airlockv1.GrantUsed{GrantId: id, UsesLeft: g.GetUsesLeft(), LimitedUses: g.GetLimitedUses(), RuleId: g.GetRuleId()}}
	evs := []*airlockv1.Event{used}
	if g.GetLimitedUses() && g.GetUsesLeft() == 0 {
		evs = append(evs, &airlockv1.Event{EventId: callref.System{Kind: callref.SystemGrant, ID: id}.EventID(subject.GrantExpired), AgentId: subject.SystemAgent, CallId: id, Actor: self,
			Body: &airlockv1.Event_GrantExpired{GrantExpired: &airlockv1.GrantExpired{GrantId: id, Why: "used_up", ExpiresAt: g.GetExpiresAt()}}})
	}
	for _, ev := range evs {
		if _, err := e.pub.Publish(pctx, ev, ""); err != nil {
			e.log.Error("could not record a standing grant's use", "grant", id, "call", call.GetCallId(), "type", envelope.TypeOf(ev), "err", err)
		}
	}
}

// changed publishes policy_changed under the system subject. id is derived
// from the change itself, so every replica that sees it publishes the same
// event and the stream keeps one.
func (e *Engine) changed(ctx context.Context, id, change, prevRev, newRev string, by *airlockv1.Actor, refusal error) {
	pc := &airlockv1.PolicyChanged{Change: change, PolicyRevision: newRev, PreviousRevision: prevRev}
	if refusal != nil {
		pc.Refused, pc.Error = true, refusal.Error()
	}
	if by.GetId() == "" {
		// A change of the policy files: the policy service noticed it.
		by = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"}
	}
	ev := &airlockv1.Event{
		EventId: id, AgentId: subject.SystemAgent, CallId: subject.SystemCall,
		Actor: by,
		Body:  &airlockv1.Event_PolicyChanged{PolicyChanged: pc},
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.pub.Publish(pctx, ev, ""); err != nil {
		e.log.Error("could not publish policy_changed", "change", change, "err", err)
	}
}

// DecideNow implements SettledDecider: the Rego decision alone (a policy
// that fails denies, logged); final unless it asks, since a standing grant
// may answer an ask.
func (e *Engine) DecideNow(ctx context.Context, call *airlockv1.ToolCall) (*airlockv1.Decision, bool) {
	ev := e.cur.Load()
	d, err := ev.Evaluate(ctx, call, time.Now())
	if err != nil {
		e.log.Error("policy failed; denying", "call", call.GetCallId(), "revision", ev.Revision(), "err", err)
	}
	return d, d.GetAction() != airlockv1.Action_ACTION_ASK
}

// Finish implements SettledDecider: for an ask, a standing grant that
// applies turns it into an allow naming the grant (a deny is never
// overridden). Spending a grant's use is a compare-and-set on the grants
// bucket; a redelivered request finds its own use already recorded and is
// allowed again without spending another. A candidate in shadow is offered
// the call and the final decision; Finish does not wait for it. Neither call
// nor the decision may be changed once Finish returns.
func (e *Engine) Finish(ctx context.Context, call *airlockv1.ToolCall, d *airlockv1.Decision) *airlockv1.Decision {
	d = e.answerAsk(ctx, call, d, time.Now())
	e.shadow.Offer(call, d)
	return d
}

// Decide implements Decider: DecideNow, then Finish.
func (e *Engine) Decide(ctx context.Context, call *airlockv1.ToolCall) *airlockv1.Decision {
	d, _ := e.DecideNow(ctx, call)
	return e.Finish(ctx, call, d)
}

// answerAsk spends the first standing grant that answers an ask.
func (e *Engine) answerAsk(ctx context.Context, call *airlockv1.ToolCall, d *airlockv1.Decision, now time.Time) *airlockv1.Decision {
	// No grant stands in for a quorum (decide.GrantApplies): such an ask
	// need not look for one, nor wait for the grants in force.
	if d.Action != airlockv1.Action_ACTION_ASK || d.GetQuorum() > 1 {
		return d
	}
	e.grantMu.Lock()
	rev := e.grantRev
	e.grantMu.Unlock()
	if g := e.spendGrant(ctx, call, d, now); g != nil {
		return g
	}
	if e.grantsCaughtUp(ctx, rev) {
		// No grant in force answered, but the bucket had changes this
		// replica had not yet applied: decide with them, at the time
		// the wait ended.
		if g := e.spendGrant(ctx, call, d, time.Now()); g != nil {
			return g
		}
	}
	return d
}

// spendGrant spends the first standing grant in force that answers an
// ask and returns the decision it makes, or nil when none does.
func (e *Engine) spendGrant(ctx context.Context, call *airlockv1.ToolCall, d *airlockv1.Decision, now time.Time) *airlockv1.Decision {
	gs := grantStore{kv: e.grants}
	var spent *airlockv1.StandingGrant
	allow := grant.AnswerAsk(d, candidates(e.grantSnapshot(), call, d, now), func(g *airlockv1.StandingGrant) *airlockv1.StandingGrant {
		used, err := gs.spend(ctx, g.GetId(), call, d, now)
		if err != nil {
			// Safe side: without the grant a person decides.
			e.log.Warn("could not use standing grant; asking a person instead", "grant", g.GetId(), "call", call.GetCallId(), "err", err)
			return nil
		}
		spent = used
		return used
	})
	if spent == nil {
		return nil
	}
	e.grantUsed(ctx, call, allow.GetGrantId(), spent)
	return allow
}
