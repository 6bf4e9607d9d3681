package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// serveAPI registers the policy micro service (airlock.api.policy.*) on
// this replica; every replica serves it in one queue group, and every
// replica applies the resulting bucket change through its watcher.
// Serve answers the rules endpoints and follows policy changes (rules,
// grants, .rego files) until ctx ends; it calls ready once the endpoints
// are registered and the changes followed.
func (e *Engine) Serve(ctx context.Context, ready func()) error {
	api, err := e.serveAPI()
	if err != nil {
		return err
	}
	defer func() { _ = api.Stop() }()
	return e.run(ctx, ready)
}

func (e *Engine) serveAPI() (micro.Service, error) {
	srv, err := micro.AddService(e.deps.NC, micro.Config{
		Name: policyapi.Service, Version: "1.0.0",
		Description: "airlock policy: run-time rules and dry-run evaluation",
	})
	if err != nil {
		return nil, fmt.Errorf("start policy endpoints: %w", err)
	}
	g := srv.AddGroup(policyapi.Group)
	add := func(name, subj string, h micro.HandlerFunc) error {
		return g.AddEndpoint(name, h, micro.WithEndpointSubject(subj))
	}
	log := e.log
	gate := &rpc.Gate{Key: e.frontend, Refused: e.refusedRequest}
	errs := []error{
		add("rules_list", policyapi.EndpointRulesList, rpc.Handle(log, func() *airlockv1.RulesListRequest { return &airlockv1.RulesListRequest{} }, e.listRules)),
		add("rules_put", policyapi.EndpointRulesPut, rpc.HandleSealed(log, gate, func() *airlockv1.RulePutRequest { return &airlockv1.RulePutRequest{} }, e.putRule)),
		add("rules_delete", policyapi.EndpointRulesDelete, rpc.HandleSealed(log, gate, func() *airlockv1.RuleDeleteRequest { return &airlockv1.RuleDeleteRequest{} }, e.deleteRule)),
		add("eval", policyapi.EndpointEval, rpc.Handle(log, func() *airlockv1.PolicyEvalRequest { return &airlockv1.PolicyEvalRequest{} }, e.evalCall)),
		add("shadow_start", policyapi.EndpointShadowStart, rpc.HandleSealed(log, gate, func() *airlockv1.ShadowStartRequest { return &airlockv1.ShadowStartRequest{} }, e.startShadow)),
		add("shadow_stop", policyapi.EndpointShadowStop, rpc.HandleSealed(log, gate, func() *airlockv1.ShadowStopRequest { return &airlockv1.ShadowStopRequest{} }, e.stopShadow)),
		add("shadow_status", policyapi.EndpointShadowStatus, rpc.Handle(log, func() *airlockv1.ShadowStatusRequest { return &airlockv1.ShadowStatusRequest{} }, e.shadowStatus)),
	}
	if err := errors.Join(errs...); err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("add policy endpoints: %w", err)
	}
	return srv, nil
}

// refusedRequest records a rule change that no front-end sealed as an
// unauthorized_attempt under the system's policy subject.
func (e *Engine) refusedRequest(subj string, _ []byte, err error) {
	ev := &airlockv1.Event{
		AgentId: subject.SystemAgent, CallId: subject.SystemCall,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED, Id: "unknown"},
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
			Action: "policy:" + strings.TrimPrefix(subj, policyapi.Group+"."), Why: err.Error()}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, perr := e.pub.Publish(ctx, ev, ""); perr != nil {
		e.log.Error("could not record a refused policy request", "subject", subj, "err", perr)
	}
	e.log.Warn("policy request refused: not sealed by a front-end", "subject", subj, "err", err)
}

// principal is who changes a rule: the person the sealing front-end
// authenticated, with the front-end as the channel when it gave none.
func principal(ctx context.Context, by *airlockv1.Actor) (*airlockv1.Actor, error) {
	if by.GetId() == "" {
		return nil, apierr.New(apierr.InvalidRequest, "say who makes the change: set by.id to the authenticated person")
	}
	a := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: by.GetId(), Channel: by.GetChannel()}
	if a.Channel == "" {
		a.Channel = rpc.Frontend(ctx)
	}
	return a, nil
}

// Fallback says in words what decides a call that no rule matches.
const Fallback = "no rule matches: a reviewer decides (ask, medium risk); a profile bound to the agent can only make a decision stricter"

// listRules answers with the run-time rules in the bucket (tombstones left
// out) and the policy's own rules that they did not replace or delete:
// together, every rule that decides calls.
func (e *Engine) listRules(ctx context.Context, _ *airlockv1.RulesListRequest) (*airlockv1.RulesListResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	resp := &airlockv1.RulesListResponse{PolicyRevision: e.Revision(), Fallback: Fallback}
	for _, id := range slices.Sorted(maps.Keys(e.kvRules)) {
		if r := e.kvRules[id]; !r.Deleted {
			resp.Rules = append(resp.Rules, proto.Clone(r).(*airlockv1.PolicyRule))
		}
	}
	resp.BuiltinRules = BuiltinRules(e.code, e.kvRules)
	return resp, nil
}

// BuiltinRules are the rules of code's data.json that no run-time rule
// (overrides: rule id → rule, tombstones included) replaced or deleted,
// in priority order.
func BuiltinRules(code *decide.Code, overrides map[string]*airlockv1.PolicyRule) []*airlockv1.PolicyRule {
	// A policy may have no data.json at all (its own Rego only).
	airlock, _ := code.Data["airlock"].(map[string]any)
	list, _ := airlock["rules"].([]any)
	var out []*airlockv1.PolicyRule
	for _, x := range list {
		raw, err := json.Marshal(x)
		if err != nil {
			continue
		}
		r := &airlockv1.PolicyRule{}
		if err := envelope.JSONRead.Unmarshal(raw, r); err != nil || r.Id == "" {
			continue
		}
		if _, replaced := overrides[r.Id]; replaced {
			continue
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b *airlockv1.PolicyRule) int { return int(a.Priority) - int(b.Priority) })
	return out
}

// putRule validates and stores a rule; it is in force on this replica when
// the call answers, and on the others when their watchers see the write. The policy is built with the rule
// before it is stored, so a rule that would break evaluation is refused here.
func (e *Engine) putRule(ctx context.Context, req *airlockv1.RulePutRequest) (*airlockv1.RulePutResponse, error) {
	r := req.GetRule()
	if err := decide.ValidateRule(r); err != nil {
		return nil, apierr.Wrap(apierr.InvalidRequest, err, "rule refused")
	}
	by, err := principal(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	r = proto.Clone(r).(*airlockv1.PolicyRule)
	r.Deleted = false
	r.UpdatedBy = by
	r.UpdatedAt = timestamppb.Now()
	if err := e.tryRule(ctx, r); err != nil {
		return nil, apierr.Wrap(apierr.PolicyError, err, "rule %s would break the policy, so it was not stored", r.Id)
	}
	replaced := e.hasRule(r.Id)
	rev, err := e.store(ctx, r)
	if err != nil {
		return nil, err
	}
	e.waitRule(ctx, rev)
	return &airlockv1.RulePutResponse{Rule: r, KvRevision: rev, Replaced: replaced}, nil
}

// deleteRule stores a tombstone naming who deleted the rule, so the change
// and its author stay in the bucket history and in policy_changed. A rule of
// the policy's own data.json can be deleted the same way.
func (e *Engine) deleteRule(ctx context.Context, req *airlockv1.RuleDeleteRequest) (*airlockv1.RuleDeleteResponse, error) {
	by, err := principal(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	if !decide.ValidRuleID(req.GetId()) {
		return nil, apierr.New(apierr.InvalidRequest, "rule id %q is not valid", req.GetId())
	}
	if !e.hasRule(req.GetId()) {
		return nil, apierr.New(apierr.NotFound, "no rule %q: `airlock policy rules list` shows the rules", req.GetId())
	}
	r := &airlockv1.PolicyRule{Id: req.GetId(), Deleted: true, UpdatedBy: by, UpdatedAt: timestamppb.Now()}
	rev, err := e.store(ctx, r)
	if err != nil {
		return nil, err
	}
	e.waitRule(ctx, rev)
	return &airlockv1.RuleDeleteResponse{Deleted: true}, nil
}

func (e *Engine) hasRule(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.kvRules[id]; ok {
		return !r.Deleted
	}
	if list, ok := e.code.Data["airlock"].(map[string]any)["rules"].([]any); ok {
		for _, x := range list {
			if m, ok := x.(map[string]any); ok && m["id"] == id {
				return true
			}
		}
	}
	return false
}

func (e *Engine) tryRule(ctx context.Context, r *airlockv1.PolicyRule) error {
	e.mu.Lock()
	rules := make([]*airlockv1.PolicyRule, 0, len(e.kvRules)+1)
	for id, x := range e.kvRules {
		if id != r.Id {
			rules = append(rules, x)
		}
	}
	code := e.code
	e.mu.Unlock()
	_, err := decide.NewEvaluator(ctx, code, append(rules, r), e.deps.Config.Policy.Profiles, decide.WithAskDefaults(decide.AskDefaultsFrom(e.deps.Config)))
	return err
}

func (e *Engine) store(ctx context.Context, r *airlockv1.PolicyRule) (uint64, error) {
	b, err := pbjson.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("encode rule %s: %w", r.Id, err)
	}
	rev, err := e.rules.Put(ctx, RulePrefix+r.Id, b)
	if err != nil {
		return 0, apierr.Wrap(apierr.Unavailable, err, "store rule %s", r.Id)
	}
	return rev, nil
}

// evalCall dry-runs a call against the policy in force: no grant is spent
// and nothing is published.
func (e *Engine) evalCall(ctx context.Context, req *airlockv1.PolicyEvalRequest) (*airlockv1.PolicyEvalResponse, error) {
	call := proto.Clone(req.GetCall()).(*airlockv1.ToolCall)
	if call.AgentId == "" {
		call.AgentId = "cli"
	}
	if call.CallId == "" {
		call.CallId = "eval"
	}
	if r := ingress.Call(call); r != nil {
		return nil, apierr.New(apierr.InvalidRequest, "%s", r.Reason)
	}
	d, _ := e.Evaluator().Evaluate(ctx, call, time.Now())
	return &airlockv1.PolicyEvalResponse{Decision: d}, nil
}
