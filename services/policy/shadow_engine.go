package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/policy/shadow"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/grant"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// ShadowKey is the policy bucket key of the shadow state (ShadowState as
// protojson): whether a candidate runs in shadow, and the candidate itself.
const ShadowKey = "shadow"

// MaxCandidateBytes bounds a candidate's modules and data together, so the
// state fits one bucket value.
const MaxCandidateBytes = 256 << 10

// shadowRun is what the engine holds of the shadow state (under Engine.mu).
type shadowRun struct {
	state *airlockv1.ShadowState
	rev   uint64
	code  *decide.Code
	// err says why this replica cannot run the stored candidate.
	err string
}

// actionWord is "allow", "ask" or "deny".
func actionWord(a airlockv1.Action) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "ACTION_"))
}

// loadShadow reads the stored shadow state at start, so a restarted
// replica runs the same candidate as before.
func (e *Engine) loadShadow(ctx context.Context) error {
	en, err := e.rules.Get(ctx, ShadowKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("read the shadow state: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applyShadow(ctx, en)
	return nil
}

// applyShadow takes one entry of the shadow key and puts its candidate in
// shadow (or none). Callers hold e.mu. It reports whether the entry was new.
func (e *Engine) applyShadow(ctx context.Context, en jetstream.KeyValueEntry) bool {
	if en.Revision() <= e.sh.rev {
		return false
	}
	st := &airlockv1.ShadowState{}
	if en.Operation() == jetstream.KeyValuePut {
		if err := protojson.Unmarshal(en.Value(), st); err != nil {
			e.sh = shadowRun{rev: en.Revision(), err: fmt.Sprintf("the stored shadow state does not decode: %v", err)}
			e.log.Error("shadow state ignored: it does not decode; shadow is off on this replica", "err", err)
			e.rebuildShadow(ctx)
			return true
		}
	}
	e.sh = shadowRun{state: st, rev: en.Revision()}
	if st.On {
		code, err := candidateCode(st.Modules, st.DataJson)
		if err != nil {
			e.sh.err = err.Error()
			e.log.Error("the candidate in shadow does not compile here; shadow is off on this replica", "candidate", st.CandidateDigest, "err", err)
		}
		e.sh.code = code
	}
	e.rebuildShadow(ctx)
	return true
}

// candidateCode compiles a candidate's modules and data.json text.
func candidateCode(modules map[string]string, dataJSON string) (*decide.Code, error) {
	var data map[string]any
	if dataJSON != "" {
		if err := json.Unmarshal([]byte(dataJSON), &data); err != nil {
			return nil, fmt.Errorf("the candidate's data.json is not a JSON object: %w", err)
		}
	}
	return decide.NewCode(modules, data)
}

// rebuildShadow builds the candidate's evaluator with the run-time rules
// and profile bindings the live one has, and puts it in shadow; called
// whenever either changes. Callers hold e.mu.
func (e *Engine) rebuildShadow(ctx context.Context) {
	if e.sh.code == nil || !e.sh.state.GetOn() {
		e.shadow.Set(nil)
		return
	}
	ev, err := e.build(ctx, e.sh.code)
	if err != nil {
		e.sh.err = fmt.Sprintf("the candidate does not build with the run-time rules in force: %v", err)
		e.log.Error("shadow is off on this replica: the candidate does not build with the run-time rules", "candidate", e.sh.code.Hash, "err", err)
		e.shadow.Set(nil)
		return
	}
	e.sh.err = ""
	e.shadow.Set(&shadow.Candidate{Digest: e.sh.code.Hash, Decide: e.candidateDecider(ev)})
}

// candidateDecider decides as the live Decide does — the Rego decision,
// then for an ask a standing grant that applies — without spending a use
// or publishing anything. The grant the live decision used counts as
// still usable: spending its last use live must not read as a divergence.
func (e *Engine) candidateDecider(ev *decide.Evaluator) func(context.Context, *airlockv1.ToolCall, *airlockv1.Decision, time.Time) (*airlockv1.Decision, error) {
	return func(ctx context.Context, call *airlockv1.ToolCall, live *airlockv1.Decision, now time.Time) (*airlockv1.Decision, error) {
		d, err := ev.Evaluate(ctx, call, now)
		if err != nil || d.Action != airlockv1.Action_ACTION_ASK {
			return d, err
		}
		// The snapshot in force is never modified: a changed grant goes
		// into a copy of this candidate's own, taken without a lock.
		grants := e.grantSnapshot()
		if used, ok := grants[live.GetGrantId()]; ok && used.GetLimitedUses() && used.GetUsesLeft() == 0 {
			g := proto.Clone(used).(*airlockv1.StandingGrant)
			g.UsesLeft = 1
			grants = maps.Clone(grants)
			grants[live.GetGrantId()] = g
		}
		return grant.AnswerAsk(d, candidates(grants, call, d, now), func(g *airlockv1.StandingGrant) *airlockv1.StandingGrant { return g }), nil
	}
}

// onShadow applies a change of the shadow key seen by the watcher and, when
// live, records it as shadow_changed; every replica records the same event
// id for one change, so the stream keeps one.
func (e *Engine) onShadow(ctx context.Context, en jetstream.KeyValueEntry, live bool) {
	e.mu.Lock()
	changed := e.applyShadow(ctx, en)
	st := e.sh.state
	e.mu.Unlock()
	if !changed || !live || st == nil {
		return
	}
	by := st.GetBy()
	if by.GetId() == "" {
		by = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"}
	}
	ev := &airlockv1.Event{
		EventId: callref.System{Kind: callref.SystemShadow, ID: strconv.FormatUint(en.Revision(), 10)}.EventID(subject.ShadowChanged),
		AgentId: subject.SystemAgent, CallId: subject.SystemCall, Actor: by,
		Body: &airlockv1.Event_ShadowChanged{ShadowChanged: &airlockv1.ShadowChanged{
			On: st.On, CandidateDigest: st.CandidateDigest, Modules: slices.Sorted(maps.Keys(st.Modules)), Source: st.Source}},
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.pub.Publish(pctx, ev, ""); err != nil {
		e.log.Error("could not record a shadow change", "on", st.On, "candidate", st.CandidateDigest, "err", err)
	}
}

// recordDivergence publishes one shadow_divergence under the system
// subject, with an id derived from the call revision and the candidate, so
// a redelivered request records it once.
func (e *Engine) recordDivergence(ctx context.Context, dv shadow.Divergence) error {
	ref := callref.Of(dv.Call)
	h := sha256.Sum256([]byte(ref.Key() + "\x00" + dv.Digest))
	id := hex.EncodeToString(h[:12])
	args := dv.Call.GetArguments()
	if args != nil {
		masked, err := structpb.NewStruct(calls.Redacted(args, append(slices.Clone(dv.Live.GetRedact()), dv.Candidate.GetRedact()...)))
		if err != nil {
			return fmt.Errorf("mask the arguments: %w", err)
		}
		args = masked
	}
	ev := &airlockv1.Event{
		EventId: callref.System{Kind: callref.SystemShadowCall, ID: id}.EventID(subject.ShadowDivergence),
		AgentId: subject.SystemAgent, CallId: id, ThreadId: dv.Call.GetThreadId(),
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
		Body: &airlockv1.Event_ShadowDivergence{ShadowDivergence: &airlockv1.ShadowDivergence{
			AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev, Server: dv.Call.GetServer(), Tool: dv.Call.GetTool(),
			LiveAction: actionWord(dv.Live.GetAction()), LiveRuleId: dv.Live.GetRuleId(), LiveGrantId: dv.Live.GetGrantId(),
			LivePolicyRevision: dv.Live.GetPolicyRevision(),
			CandidateAction:    actionWord(dv.Candidate.GetAction()), CandidateRuleId: dv.Candidate.GetRuleId(),
			CandidateReason: dv.Candidate.GetReason(), CandidateGrantId: dv.Candidate.GetGrantId(), CandidateDigest: dv.Digest,
			Arguments: args, ArgumentsDigest: dv.Live.GetArgumentsDigest(),
		}},
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := e.pub.Publish(pctx, ev, "")
	return err
}

// startShadow checks a candidate (size, compiles, builds with the run-time
// rules in force) and stores it as the shadow state; every replica's
// watcher puts it in shadow.
func (e *Engine) startShadow(ctx context.Context, req *airlockv1.ShadowStartRequest) (*airlockv1.ShadowStatusResponse, error) {
	by, err := principal(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	size := len(req.GetDataJson())
	for name, text := range req.GetModules() {
		size += len(name) + len(text)
	}
	if size > MaxCandidateBytes {
		return nil, apierr.New(apierr.InvalidRequest, "the candidate is %d bytes, more than the %d a shadow candidate may hold: leave out files it does not need", size, MaxCandidateBytes)
	}
	code, err := candidateCode(req.GetModules(), req.GetDataJson())
	if err != nil {
		return nil, apierr.Wrap(apierr.InvalidRequest, err, "the candidate was refused, so shadow did not start (fix it and try `airlock policy test` on its directory)")
	}
	e.mu.Lock() // build reads the run-time rules
	_, err = e.build(ctx, code)
	e.mu.Unlock()
	if err != nil {
		return nil, apierr.Wrap(apierr.PolicyError, err, "the candidate does not build with the run-time rules in force, so shadow did not start")
	}
	st := &airlockv1.ShadowState{On: true, CandidateDigest: code.Hash, Modules: req.GetModules(), DataJson: req.GetDataJson(),
		Source: req.GetSource(), By: by, At: timestamppb.Now()}
	rev, err := e.putShadow(ctx, st)
	if err != nil {
		return nil, err
	}
	return e.shadowStatusOf(st, rev, ""), nil
}

// stopShadow stores shadow as off, naming the candidate that was running.
func (e *Engine) stopShadow(ctx context.Context, req *airlockv1.ShadowStopRequest) (*airlockv1.ShadowStatusResponse, error) {
	by, err := principal(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	cur := e.sh.state
	e.mu.Unlock()
	if !cur.GetOn() {
		return nil, apierr.New(apierr.NotFound, "no candidate runs in shadow: start one with `airlock policy shadow start --dir DIR`")
	}
	st := &airlockv1.ShadowState{On: false, CandidateDigest: cur.GetCandidateDigest(), Source: cur.GetSource(), By: by, At: timestamppb.Now()}
	rev, err := e.putShadow(ctx, st)
	if err != nil {
		return nil, err
	}
	return e.shadowStatusOf(st, rev, ""), nil
}

func (e *Engine) putShadow(ctx context.Context, st *airlockv1.ShadowState) (uint64, error) {
	b, err := pbjson.Marshal(st)
	if err != nil {
		return 0, fmt.Errorf("encode the shadow state: %w", err)
	}
	rev, err := e.rules.Put(ctx, ShadowKey, b)
	if err != nil {
		return 0, apierr.Wrap(apierr.Unavailable, err, "store the shadow state")
	}
	return rev, nil
}

// shadowStatus answers with the shadow state this replica applies and its
// counters.
func (e *Engine) shadowStatus(_ context.Context, _ *airlockv1.ShadowStatusRequest) (*airlockv1.ShadowStatusResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.shadowStatusOf(e.sh.state, e.sh.rev, e.sh.err), nil
}

func (e *Engine) shadowStatusOf(st *airlockv1.ShadowState, rev uint64, why string) *airlockv1.ShadowStatusResponse {
	s := e.shadow.Stats()
	resp := &airlockv1.ShadowStatusResponse{KvRevision: rev, Evaluated: s.Evaluated, Diverged: s.Diverged, Failed: s.Failed, Dropped: s.Dropped, Error: why}
	if st != nil {
		resp.State = proto.Clone(st).(*airlockv1.ShadowState)
		resp.Modules = slices.Sorted(maps.Keys(st.Modules))
		resp.State.Modules, resp.State.DataJson = nil, ""
	}
	return resp
}

// ShadowCandidate is the digest of the candidate this replica runs in
// shadow, "" when none.
func (e *Engine) ShadowCandidate() string {
	if c := e.shadow.Current(); c != nil {
		return c.Digest
	}
	return ""
}

// ShadowStats are this replica's shadow counters.
func (e *Engine) ShadowStats() shadow.Stats { return e.shadow.Stats() }

// ShadowIdle reports whether this replica's candidate is deciding nothing
// and nothing waits for it: every call offered to it so far is counted in
// ShadowStats and its divergence, if any, recorded.
func (e *Engine) ShadowIdle() bool { return e.shadow.Idle() }
