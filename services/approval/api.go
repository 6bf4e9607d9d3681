package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// requestTimeout bounds the work behind one endpoint request.
const requestTimeout = 15 * time.Second

// listLimit caps ListRequest.limit (and is the default when it is 0).
const listLimit = 500

// serveAPI registers the micro service: approvalapi's endpoints plus the
// agents' cancel subject. As micro does, each endpoint handles its requests
// one at a time per replica (a decision takes about half a millisecond);
// replicas share the load through micro's queue group.
func (s *Service) serveAPI(ctx context.Context) (apiServer, error) {
	srv, err := micro.AddService(s.deps.NC, micro.Config{
		Name:        approvalapi.Service,
		Version:     "1.0.0",
		Description: "airlock approvals: list, get, decide, cancel, approve a thread, standing grants",
	})
	if err != nil {
		return apiServer{}, fmt.Errorf("approval: start micro service: %w", err)
	}
	log := s.deps.Log.With("service", "approval")
	endpoints := []struct {
		name, subject string
		h             micro.HandlerFunc
	}{
		{"list", approvalapi.Subject(approvalapi.List), rpc.Handle(log, func() *airlockv1.ListRequest { return &airlockv1.ListRequest{} }, timed(s.List))},
		{"get", approvalapi.Subject(approvalapi.Get), rpc.Handle(log, func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} }, timed(s.Get))},
		{"decide", approvalapi.Subject(approvalapi.Decide), rpc.Handle(log, func() *airlockv1.DecideRequest { return &airlockv1.DecideRequest{} }, timed(s.Decide))},
		{"cancel", approvalapi.Subject(approvalapi.Cancel), rpc.Handle(log, func() *airlockv1.CancelRequest { return &airlockv1.CancelRequest{} }, timed(s.Cancel))},
		{"approve_thread", approvalapi.Subject(approvalapi.ApproveThread), rpc.Handle(log, func() *airlockv1.ApproveThreadRequest { return &airlockv1.ApproveThreadRequest{} }, timed(s.ApproveThread))},
		{"grants_create", approvalapi.Subject(approvalapi.GrantsCreate), rpc.Handle(log, func() *airlockv1.CreateGrantRequest { return &airlockv1.CreateGrantRequest{} }, timed(s.CreateGrant))},
		{"grants_list", approvalapi.Subject(approvalapi.GrantsList), rpc.Handle(log, func() *airlockv1.ListGrantsRequest { return &airlockv1.ListGrantsRequest{} }, timed(s.ListGrants))},
		{"grants_revoke", approvalapi.Subject(approvalapi.GrantsRevoke), rpc.Handle(log, func() *airlockv1.RevokeGrantRequest { return &airlockv1.RevokeGrantRequest{} }, timed(s.RevokeGrant))},
		{"agent_cancel", subject.AgentCancel("*"), s.agentCancel},
	}
	for _, e := range endpoints {
		if err := srv.AddEndpoint(e.name, e.h, micro.WithEndpointSubject(e.subject)); err != nil {
			_ = srv.Stop()
			return apiServer{}, fmt.Errorf("approval: add endpoint %s: %w", e.subject, err)
		}
	}
	return apiServer{svc: srv}, nil
}

func timed[Req, Resp any](fn func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		return fn(ctx, req)
	}
}

// human normalizes the principal a front-end passes: a person, with the
// channel they used. Agents never decide.
func human(a *airlockv1.Actor) (*airlockv1.Actor, error) {
	if a.GetId() == "" {
		return nil, apierr.New(apierr.InvalidRequest, "no principal given: pass the authenticated person's id")
	}
	switch a.GetType() {
	case airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED, airlockv1.ActorType_ACTOR_TYPE_HUMAN:
	default:
		return nil, apierr.New(apierr.NotAuthorized, "only people decide calls; %s is a %s", a.GetId(), strings.ToLower(strings.TrimPrefix(a.GetType().String(), "ACTOR_TYPE_")))
	}
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: a.GetId(), Channel: a.GetChannel()}, nil
}

// resolve finds the key of a call's record: the given revision, or the
// newest one when revision is 0.
func (s *Service) resolve(ctx context.Context, callID string, revision uint32) (string, error) {
	if err := ids.Validate("call id", callID); err != nil {
		return "", apierr.New(apierr.InvalidRequest, "%v", err)
	}
	if revision != 0 {
		if latest := s.index.latestRevision(callID); latest > revision {
			return "", apierr.New(apierr.Conflict, "revision %d of call %s was superseded by revision %d: reload the call and decide the new revision", revision, callID, latest)
		}
		return domain.Key(callID, revision), nil
	}
	rec, _, err := s.store.latest(ctx, callID, s.index.latestRevision(callID))
	if err != nil {
		return "", s.storeErr(callID, err)
	}
	return domain.Key(callID, domain.Revision(rec)), nil
}

func (s *Service) storeErr(callID string, err error) error {
	if errors.Is(err, errNotFound) {
		return apierr.New(apierr.NotFound, "no approval for call %s: check the id (`airlock approvals list` shows pending calls); calls that policy allowed or denied have none", callID)
	}
	return apierr.Wrap(apierr.Unavailable, err, "approval %s could not be read; try again", callID)
}

// domainErr turns the domain's refusals into API errors, recording refused
// attempts as unauthorized_attempt.
func (s *Service) domainErr(ctx context.Context, rec *airlockv1.ApprovalRecord, actor *airlockv1.Actor, err error) error {
	var refusal *domain.Refusal
	var inv *domain.Invalid
	switch {
	case errors.As(err, &refusal):
		s.refused(ctx, rec.GetCall(), actor, refusal)
		return apierr.New(apierr.NotAuthorized, "%s", refusal.Why)
	case errors.As(err, &inv):
		return apierr.New(apierr.InvalidRequest, "%s", inv.Why)
	case errors.Is(err, errNotFound):
		return s.storeErr(rec.GetCall().GetCallId(), err)
	}
	return apierr.Wrap(apierr.Unavailable, err, "the decision could not be stored; try again")
}

// Decide applies one principal's decision (endpoint "decide"). It is safe to
// repeat: a decision on a call that is no longer pending changes nothing and
// answers with the current record, changed=false and a sentence saying why.
// A principal who may not decide gets not_authorized, and the attempt is
// published as unauthorized_attempt.
func (s *Service) Decide(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	by, err := human(req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	kind := map[airlockv1.DecisionKind]domain.Kind{
		airlockv1.DecisionKind_DECISION_KIND_APPROVE:         domain.Approve,
		airlockv1.DecisionKind_DECISION_KIND_REJECT:          domain.Reject,
		airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES: domain.RequestChanges,
	}[req.GetKind()]
	if kind == 0 {
		return nil, apierr.New(apierr.InvalidRequest, "kind is missing: approve, reject or request changes")
	}
	key, err := s.resolve(ctx, req.GetCallId(), req.GetRevision())
	if err != nil {
		if apierr.CodeOf(err) == apierr.Conflict {
			if rec, _, lerr := s.store.latest(ctx, req.GetCallId(), s.index.latestRevision(req.GetCallId())); lerr == nil {
				call := proto.Clone(rec.GetCall()).(*airlockv1.ToolCall)
				call.Revision = req.GetRevision()
				s.refusedDecision(ctx, call, by, kind.Action(), domain.RefusedStale, apiMessage(err))
			}
		}
		return nil, err
	}
	d := domain.Decision{Kind: kind, By: by, Reason: req.GetReason(), Edited: req.GetEditedArguments(), SawDigest: req.GetArgumentsDigest()}
	return s.decideKey(ctx, key, d)
}

func (s *Service) decideKey(ctx context.Context, key string, d domain.Decision) (*airlockv1.DecideResponse, error) {
	var seen *airlockv1.ApprovalRecord
	rec, wrote, out, err := s.transition(ctx, key, func(cur *airlockv1.ApprovalRecord) (domain.Outcome, error) {
		seen = cur
		return domain.Decide(cur, d, s.dir, s.now())
	})
	if err != nil {
		if seen == nil {
			seen = &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{CallId: strings.Split(key, ".")[0]}}
		}
		return nil, s.domainErr(ctx, seen, d.By, err)
	}
	if out.Refused != "" {
		s.refusedDecision(ctx, rec.GetCall(), d.By, d.Kind.Action(), out.Refused, out.Message)
	}
	return &airlockv1.DecideResponse{Record: rec, Changed: wrote && out.Applied, Message: out.Message}, nil
}

// Get returns the newest revision's record of a call (endpoint "get").
func (s *Service) Get(ctx context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
	if err := ids.Validate("call id", req.GetCallId()); err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	rec, _, err := s.store.latest(ctx, req.GetCallId(), s.index.latestRevision(req.GetCallId()))
	if err != nil {
		return nil, s.storeErr(req.GetCallId(), err)
	}
	return &airlockv1.GetResponse{Record: rec}, nil
}

// List returns records matching every filter set, newest first (endpoint
// "list"). It reads this replica's index, which follows the bucket within
// milliseconds.
func (s *Service) List(_ context.Context, req *airlockv1.ListRequest) (*airlockv1.ListResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > listLimit {
		limit = listLimit
	}
	states := map[airlockv1.ApprovalState]bool{}
	for _, st := range req.GetStates() {
		states[st] = true
	}
	recs := s.index.selectRecords(func(r *airlockv1.ApprovalRecord) bool {
		c := r.GetCall()
		return (len(states) == 0 || states[r.GetState()]) &&
			(req.GetAgentId() == "" || c.GetAgentId() == req.GetAgentId()) &&
			(req.GetThreadId() == "" || c.GetThreadId() == req.GetThreadId()) &&
			(req.GetTool() == "" || c.GetTool() == req.GetTool() || c.GetServer()+"__"+c.GetTool() == req.GetTool()) &&
			r.GetDecision().GetRisk() >= req.GetMinRisk()
	})
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return &airlockv1.ListResponse{Records: recs}, nil
}

// Cancel withdraws a pending call on behalf of a person (endpoint "cancel"):
// one of its approvers, or the person it acts for. Agents use
// airlock.agent.<agent>.cancel instead.
func (s *Service) Cancel(ctx context.Context, req *airlockv1.CancelRequest) (*airlockv1.CancelResponse, error) {
	by, err := human(req.GetBy())
	if err != nil {
		return nil, err
	}
	key, err := s.resolve(ctx, req.GetCallId(), 0)
	if err != nil {
		return nil, err
	}
	rec, changed, err := s.cancelKey(ctx, key, by, req.GetReason())
	if err != nil {
		return nil, err
	}
	return &airlockv1.CancelResponse{Record: rec, Changed: changed}, nil
}

func (s *Service) cancelKey(ctx context.Context, key string, by *airlockv1.Actor, reason string) (*airlockv1.ApprovalRecord, bool, error) {
	var seen *airlockv1.ApprovalRecord
	rec, wrote, out, err := s.transition(ctx, key, func(cur *airlockv1.ApprovalRecord) (domain.Outcome, error) {
		seen = cur
		return domain.Cancel(cur, by, reason, s.dir, s.now())
	})
	if err != nil {
		if seen == nil {
			seen = &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{CallId: strings.Split(key, ".")[0]}}
		}
		return nil, false, s.domainErr(ctx, seen, by, err)
	}
	return rec, wrote && out.Applied, nil
}

// ApproveThread approves every pending call of a thread (endpoint
// "approve_thread"), each authorized on its own: the calls the principal
// may not approve are listed in refused with why, and recorded as
// unauthorized_attempt.
func (s *Service) ApproveThread(ctx context.Context, req *airlockv1.ApproveThreadRequest) (*airlockv1.ApproveThreadResponse, error) {
	by, err := human(req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	if req.GetThreadId() == "" {
		return nil, apierr.New(apierr.InvalidRequest, "thread_id is empty: name the thread whose calls to approve")
	}
	resp := &airlockv1.ApproveThreadResponse{Refused: map[string]string{}}
	pending := s.index.selectRecords(func(r *airlockv1.ApprovalRecord) bool {
		return r.GetState() == domain.Pending && r.GetCall().GetThreadId() == req.GetThreadId()
	})
	for _, rec := range pending {
		key := domain.Key(rec.GetCall().GetCallId(), domain.Revision(rec))
		r, err := s.decideKey(ctx, key, domain.Decision{Kind: domain.Approve, By: by, Reason: req.GetReason()})
		if err != nil {
			resp.Refused[rec.GetCall().GetCallId()] = apiMessage(err)
			continue
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func apiMessage(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// agentCancelRequest is the JSON an agent sends to airlock.agent.<agent>.cancel.
type agentCancelRequest struct {
	CallID string `json:"call_id"`
	Reason string `json:"reason"`
}

// agentCancelReply answers it.
type agentCancelReply struct {
	CallID   string `json:"call_id"`
	Revision uint32 `json:"revision"`
	State    string `json:"state"`
	Changed  bool   `json:"changed"`
	Message  string `json:"message,omitempty"`
}

// agentCancel lets an agent withdraw one of its own pending calls. The agent
// is the subject's token, which NATS permissions tie to the agent's
// credentials; a call of another agent is refused and recorded.
func (s *Service) agentCancel(r micro.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	fail := func(err error) {
		code := apierr.CodeOf(err)
		if rerr := r.Error(string(code), apiMessage(err), nil); rerr != nil {
			s.deps.Log.Warn("error reply failed", "subject", r.Subject(), "err", rerr)
		}
	}
	tokens := strings.Split(r.Subject(), ".")
	if len(tokens) != 4 {
		fail(apierr.New(apierr.InvalidRequest, "cancel on %q: use airlock.agent.<agent>.cancel", r.Subject()))
		return
	}
	agent := tokens[2]
	if err := ids.Validate("agent id", agent); err != nil {
		fail(apierr.New(apierr.InvalidRequest, "%v", err))
		return
	}
	var req agentCancelRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		fail(apierr.New(apierr.InvalidRequest, "cancel request is not JSON like {\"call_id\":\"...\",\"reason\":\"...\"}: %v", err))
		return
	}
	key, err := s.resolve(ctx, req.CallID, 0)
	if err != nil {
		fail(err)
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = "canceled by agent " + agent
	}
	rec, changed, err := s.cancelKey(ctx, key, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: agent}, reason)
	if err != nil {
		fail(err)
		return
	}
	reply := agentCancelReply{CallID: rec.GetCall().GetCallId(), Revision: domain.Revision(rec), State: domain.StateName(rec.GetState()), Changed: changed}
	if !changed {
		reply.Message = domain.Settled(rec)
	}
	data, _ := json.Marshal(reply)
	if err := r.Respond(data); err != nil {
		s.deps.Log.Warn("reply failed", "subject", r.Subject(), "err", err)
	}
}
