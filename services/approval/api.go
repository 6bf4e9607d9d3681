package approval

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// requestTimeout bounds the work behind one endpoint request.
const requestTimeout = 15 * time.Second

// listLimit caps ListRequest.limit (and is the default when it is 0).
const listLimit = 500

// serveAPI registers the micro service: approvalapi's endpoints plus the
// agents' cancel and read subjects (airlock.agent.<agent>.cancel, .events). As micro does, each endpoint handles its requests
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
	// Everything that changes a record acts for a person a front-end
	// authenticated: it is sealed with the front-end key or refused.
	gate := &rpc.Gate{Key: s.frontend, Now: s.now, Refused: s.refusedRequest}
	endpoints := []struct {
		name, subject string
		h             micro.HandlerFunc
	}{
		{"list", approvalapi.Subject(approvalapi.List), rpc.Handle(log, func() *airlockv1.ListRequest { return &airlockv1.ListRequest{} }, timed(s.List))},
		{"get", approvalapi.Subject(approvalapi.Get), rpc.Handle(log, func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} }, timed(s.Get))},
		{"decide", approvalapi.Subject(approvalapi.Decide), rpc.HandleSealed(log, gate, func() *airlockv1.DecideRequest { return &airlockv1.DecideRequest{} }, timed(s.Decide))},
		{"cancel", approvalapi.Subject(approvalapi.Cancel), rpc.HandleSealed(log, gate, func() *airlockv1.CancelRequest { return &airlockv1.CancelRequest{} }, timed(s.Cancel))},
		{"approve_thread", approvalapi.Subject(approvalapi.ApproveThread), rpc.HandleSealed(log, gate, func() *airlockv1.ApproveThreadRequest { return &airlockv1.ApproveThreadRequest{} }, timed(s.ApproveThread))},
		{"grants_create", approvalapi.Subject(approvalapi.GrantsCreate), rpc.HandleSealed(log, gate, func() *airlockv1.CreateGrantRequest { return &airlockv1.CreateGrantRequest{} }, timed(s.CreateGrant))},
		{"grants_list", approvalapi.Subject(approvalapi.GrantsList), rpc.Handle(log, func() *airlockv1.ListGrantsRequest { return &airlockv1.ListGrantsRequest{} }, timed(s.ListGrants))},
		{"grants_revoke", approvalapi.Subject(approvalapi.GrantsRevoke), rpc.HandleSealed(log, gate, func() *airlockv1.RevokeGrantRequest { return &airlockv1.RevokeGrantRequest{} }, timed(s.RevokeGrant))},
		{"in_doubt_list", approvalapi.Subject(approvalapi.InDoubtList), rpc.Handle(log, func() *airlockv1.ListInDoubtRequest { return &airlockv1.ListInDoubtRequest{} }, timed(s.ListInDoubt))},
		{"in_doubt_get", approvalapi.Subject(approvalapi.InDoubtGet), rpc.Handle(log, func() *airlockv1.GetInDoubtRequest { return &airlockv1.GetInDoubtRequest{} }, timed(s.GetInDoubt))},
		{"in_doubt_resolve", approvalapi.Subject(approvalapi.InDoubtResolve), rpc.HandleSealed(log, gate, func() *airlockv1.ResolveInDoubtRequest { return &airlockv1.ResolveInDoubtRequest{} }, timed(s.ResolveInDoubt))},
		{"agent_cancel", subject.AgentCancel("*"), rpc.Recover(log, s.agentCancel)},
		// an agent's read of its call's last stored events, registered
		// last (testenv.ApprovalServing waits for it)
		{"agent_events", subject.AgentEvents("*"), rpc.Recover(log, s.reads.Handle)},
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
// channel they used (the sealing front-end when the request names none).
// Agents never decide.
func human(ctx context.Context, a *airlockv1.Actor) (*airlockv1.Actor, error) {
	if a.GetId() == "" {
		return nil, apierr.New(apierr.InvalidRequest, "no principal given: pass the authenticated person's id")
	}
	switch a.GetType() {
	case airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED, airlockv1.ActorType_ACTOR_TYPE_HUMAN:
	default:
		return nil, apierr.New(apierr.NotAuthorized, "only people decide calls; %s is a %s", a.GetId(), calls.ActorTypeName(a))
	}
	channel := a.GetChannel()
	if channel == "" {
		channel = rpc.Frontend(ctx)
	}
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: a.GetId(), Channel: channel, Groups: a.GetGroups()}, nil
}

// refusedRequest records a request no front-end sealed as an
// unauthorized_attempt, on the call it names when it names one.
func (s *Service) refusedRequest(subj string, data []byte, err error) {
	var named struct {
		AgentID string `json:"agentId"`
		CallID  string `json:"callId"`
	}
	_ = json.Unmarshal(data, &named)
	call := &airlockv1.ToolCall{AgentId: subject.SystemAgent, CallId: "_approval"}
	if ref, rerr := callref.New(named.AgentID, named.CallID, 0); rerr == nil {
		call = &airlockv1.ToolCall{AgentId: ref.Agent, CallId: ref.Call}
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	s.refused(ctx, call, &airlockv1.Actor{Id: "unknown"}, &domain.Refusal{
		Action: strings.TrimPrefix(subj, approvalapi.Subject("")),
		Why:    "request not sealed by an airlock front-end: " + err.Error(),
	})
}

// resolve finds the record key of the revision a request names. Revision
// 0 means revision 1 for a call that has only that one; once a call has a
// later revision the request must name the revision its person reviewed.
func (s *Service) resolve(ctx context.Context, agent, callID string, revision uint32) (callref.Ref, error) {
	ref, err := callref.New(agent, callID, revision)
	if err != nil {
		return callref.Ref{}, apierr.New(apierr.InvalidRequest, "name the call by agent_id and call_id: %v", err)
	}
	latest := s.index.latestRevision(ref)
	if revision != 0 {
		if latest.Rev <= revision {
			// The index follows the bucket a moment behind: ask the bucket
			// whether a newer revision was just created.
			switch _, _, err := s.store.get(ctx, ref.WithRev(revision+1).Key()); {
			case err == nil:
				latest = ref.WithRev(revision + 1)
			case !errors.Is(err, errNotFound):
				return callref.Ref{}, s.storeErr(ref, err)
			}
		}
		if latest.Rev > revision {
			return callref.Ref{}, apierr.New(apierr.Conflict, "revision %d of call %s was superseded by revision %d: reload the call and decide the new revision", revision, ref.Call, latest.Rev)
		}
		return ref, nil
	}
	rec, _, err := s.store.latest(ctx, latest)
	if err != nil {
		return callref.Ref{}, s.storeErr(ref, err)
	}
	if newest := domain.RefOf(rec); newest.Rev > 1 {
		return callref.Ref{}, apierr.New(apierr.InvalidRequest, "call %s has %d revisions: name the revision you reviewed with `--revision N` (`airlock approvals`) or \"revision\": N (REST); the newest is revision %[2]d", ref.Call, newest.Rev)
	}
	return ref.WithRev(1), nil
}

func (s *Service) storeErr(ref callref.Ref, err error) error {
	if errors.Is(err, errNotFound) {
		return apierr.New(apierr.NotFound, "no approval for call %s: check the agent and call id (`airlock approvals list` shows pending calls); "+
			"calls that policy allowed or denied have none, and an ended call's record is removed %s after it ended (approval.ended_retention): "+
			"`airlock audit query --call %s` shows its history", ref, s.cfg.EndedRetention, ref.Call)
	}
	return apierr.Wrap(apierr.Unavailable, err, "approval %s could not be read; try again", ref)
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
		return s.storeErr(domain.RefOf(rec), err)
	}
	return apierr.Wrap(apierr.Unavailable, err, "the decision could not be stored; try again")
}

// Decide applies one principal's decision (endpoint "decide"). It is safe to
// repeat: a decision on a call that is no longer pending changes nothing and
// answers with the current record, changed=false and a sentence saying why.
// A principal who may not decide gets not_authorized, and the attempt is
// published as unauthorized_attempt.
func (s *Service) Decide(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	by, err := human(ctx, req.GetPrincipal())
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
	ref, err := s.resolve(ctx, req.GetAgentId(), req.GetCallId(), req.GetRevision())
	if err != nil {
		if apierr.CodeOf(err) == apierr.Conflict {
			if latest, lerr := callref.New(req.GetAgentId(), req.GetCallId(), 0); lerr == nil {
				s.recordStale(ctx, latest, req.GetRevision(), by, kind, err)
			}
		}
		return nil, err
	}
	d := domain.Decision{Kind: kind, By: by, Reason: req.GetReason(), Edited: req.GetEditedArguments(), SawDigest: req.GetArgumentsDigest()}
	if d.Edited != nil && kind == domain.Approve {
		if d.Redecided, err = s.redecide(ctx, ref, d.Edited); err != nil {
			return nil, err
		}
	}
	return s.decideRef(ctx, ref, d)
}

// recordStale records a decision on a revision that is not the call's
// newest as decision_refused (stale_revision) on the revision it named.
func (s *Service) recordStale(ctx context.Context, latest callref.Ref, rev uint32, by *airlockv1.Actor, kind domain.Kind, err error) {
	if rec, _, lerr := s.store.latest(ctx, s.index.latestRevision(latest)); lerr == nil {
		call := proto.Clone(rec.GetCall()).(*airlockv1.ToolCall)
		call.Revision = rev
		s.refusedDecision(ctx, call, by, kind.Action(), domain.RefusedStale, apierr.MessageOf(err))
	}
}

// redecide asks the policy about the call of ref with the edited
// arguments: an edit is a new call as far as the policy goes, so a deny
// rule or a stricter ask applies to it (the domain merges the answer). The
// policy service answers on airlock.api.policy.eval; when it does not, the
// edit is refused (fail closed) and nothing changes.
func (s *Service) redecide(ctx context.Context, ref callref.Ref, edited *structpb.Struct) (*airlockv1.Decision, error) {
	rec, _, err := s.store.get(ctx, ref.Key())
	if err != nil {
		return nil, s.storeErr(ref, err)
	}
	call := proto.Clone(rec.GetCall()).(*airlockv1.ToolCall)
	call.Arguments = edited
	if r := ingress.Call(call); r != nil {
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments cannot be used: %s", r.Reason)
	}
	d, err := s.evalPolicy(ctx, call)
	switch {
	case apierr.CodeOf(err) == apierr.InvalidRequest:
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments cannot be used: %s", apierr.MessageOf(err))
	case err != nil:
		return nil, apierr.Wrap(apierr.Unavailable, err, "the policy service did not answer, so the edited arguments could not be checked and were not approved: try again in a moment")
	case d == nil:
		return nil, apierr.New(apierr.Unavailable, "the policy service answered without a decision, so the edited arguments were not approved: try again in a moment")
	}
	return d, nil
}

func (s *Service) decideRef(ctx context.Context, ref callref.Ref, d domain.Decision) (*airlockv1.DecideResponse, error) {
	if err := checkReason(d.Reason); err != nil {
		return nil, err
	}
	key := ref.Key()
	var seen *airlockv1.ApprovalRecord
	rec, wrote, out, err := s.transition(ctx, key, func(cur *airlockv1.ApprovalRecord) (domain.Outcome, error) {
		seen = cur
		return domain.Decide(cur, d, s.dir.Vouched(d.By), s.now())
	})
	if err != nil {
		if seen == nil {
			seen = &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev}}
		}
		return nil, s.domainErr(ctx, seen, d.By, err)
	}
	if out.Refused != "" {
		s.refusedDecision(ctx, rec.GetCall(), d.By, d.Kind.Action(), out.Refused, out.Message)
	}
	return &airlockv1.DecideResponse{Record: calls.Showable(rec), Changed: wrote && out.Applied, Message: out.Message}, nil
}

// Get returns the record of a call revision, the newest when the request
// names none (endpoint "get").
func (s *Service) Get(ctx context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
	ref, err := callref.New(req.GetAgentId(), req.GetCallId(), req.GetRevision())
	if err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "name the call by agent_id and call_id: %v", err)
	}
	var rec *airlockv1.ApprovalRecord
	if req.GetRevision() != 0 {
		rec, _, err = s.store.get(ctx, ref.Key())
	} else {
		rec, _, err = s.store.latest(ctx, s.index.latestRevision(ref))
	}
	if err != nil {
		return nil, s.storeErr(ref, err)
	}
	return &airlockv1.GetResponse{Record: calls.Showable(rec)}, nil
}

// List returns records matching every filter set, newest first (endpoint
// "list"). It reads this replica's index, which follows the bucket within
// milliseconds. Each record is abridged (calls.Abridged) and a reply holds
// only as many as fit in listReplyBytes; next_page_token continues the list.
// However large the calls one agent sends, no reviewer's list grows past
// what the bus carries.
func (s *Service) List(_ context.Context, req *airlockv1.ListRequest) (*airlockv1.ListResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > listLimit {
		limit = listLimit
	}
	after, err := parsePageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	states := map[airlockv1.ApprovalState]bool{}
	for _, st := range req.GetStates() {
		states[st] = true
	}
	recs := s.index.page(req.GetAgentId(), after, limit, func(r *entry) bool {
		return (len(states) == 0 || states[r.state]) &&
			(req.GetThreadId() == "" || r.thread == req.GetThreadId()) &&
			(req.GetTool() == "" || r.tool == req.GetTool() || r.server+"__"+r.tool == req.GetTool()) &&
			r.risk >= req.GetMinRisk()
	})
	resp := &airlockv1.ListResponse{}
	budget, size := s.listReplyBytes(), 0
	for _, r := range recs {
		if len(resp.Records) == limit {
			break
		}
		// One record whose values JSON cannot hold must not break the
		// list, nor one agent's large calls every reviewer's.
		shown := calls.Abridged(r)
		data, err := protojson.Marshal(shown)
		if err != nil {
			s.deps.Log.Warn("approval: a record that cannot be listed is left out", "call", domain.RefOf(r).String(), "err", err)
			continue
		}
		if len(resp.Records) > 0 && size+len(data) > budget {
			resp.NextPageToken = pageTokenOf(resp.Records[len(resp.Records)-1])
			break
		}
		resp.Records, size = append(resp.Records, shown), size+len(data)+1
	}
	return resp, nil
}

// listReplyBytes is how much encoded record a list reply may hold: half of
// what the connection's server lets a message carry (max_payload), leaving
// room for the rest of the reply.
func (s *Service) listReplyBytes() int {
	if n := s.deps.NC.MaxPayload(); n > 0 {
		return int(n / 2)
	}
	return 512 << 10
}

// pagePos is where a list page ended: the last record's creation time and
// key. Lists are ordered newest first, then by key (index.page).
type pagePos struct {
	created int64
	key     string
}

func pageTokenOf(rec *airlockv1.ApprovalRecord) string {
	return strconv.FormatInt(rec.GetCreatedAt().AsTime().UnixNano(), 10) + "~" + domain.RefOf(rec).Key()
}

func parsePageToken(tok string) (*pagePos, error) {
	if tok == "" {
		return nil, nil
	}
	created, key, ok := strings.Cut(tok, "~")
	n, err := strconv.ParseInt(created, 10, 64)
	if !ok || err != nil || key == "" {
		return nil, apierr.New(apierr.InvalidRequest, "page_token %q is not one a list reply gave: pass its next_page_token as it is", tok)
	}
	return &pagePos{created: n, key: key}, nil
}

// Cancel withdraws a pending call on behalf of a person (endpoint "cancel"):
// one of its approvers, the person it acts for, or an operator the
// front-end vouches for (Actor.operator: the console's admin). Agents use
// airlock.agent.<agent>.cancel instead.
func (s *Service) Cancel(ctx context.Context, req *airlockv1.CancelRequest) (*airlockv1.CancelResponse, error) {
	by, err := human(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	// The operator role counts for a cancel only (human drops it for
	// decisions), and only on a request sealed as the console's, the
	// front-end that holds people's roles. The name is the sealer's own
	// word: this keeps a front-end's mistake from granting the role, not a
	// front-end holding the shared key (which may name any person anyway).
	by.Operator = req.GetBy().GetOperator() && rpc.Frontend(ctx) == approvalapi.ConsoleFrontend
	ref, err := s.newest(ctx, req.GetAgentId(), req.GetCallId())
	if err != nil {
		return nil, err
	}
	rec, changed, err := s.cancelRef(ctx, ref, by, req.GetReason())
	if err != nil {
		return nil, err
	}
	return &airlockv1.CancelResponse{Record: calls.Showable(rec), Changed: changed}, nil
}

// newest is the newest revision of a call: cancelling withdraws whatever
// of the call is still pending.
func (s *Service) newest(ctx context.Context, agent, callID string) (callref.Ref, error) {
	rec, err := s.newestRecord(ctx, agent, callID)
	if err != nil {
		return callref.Ref{}, err
	}
	return domain.RefOf(rec), nil
}

// newestRecord is the record of the newest revision of a call.
func (s *Service) newestRecord(ctx context.Context, agent, callID string) (*airlockv1.ApprovalRecord, error) {
	ref, err := callref.New(agent, callID, 0)
	if err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "name the call by agent_id and call_id: %v", err)
	}
	rec, _, err := s.store.latest(ctx, s.index.latestRevision(ref))
	if err != nil {
		return nil, s.storeErr(ref, err)
	}
	return rec, nil
}

func (s *Service) cancelRef(ctx context.Context, ref callref.Ref, by *airlockv1.Actor, reason string) (*airlockv1.ApprovalRecord, bool, error) {
	if err := checkReason(reason); err != nil {
		return nil, false, err
	}
	var seen *airlockv1.ApprovalRecord
	rec, wrote, out, err := s.transition(ctx, ref.Key(), func(cur *airlockv1.ApprovalRecord) (domain.Outcome, error) {
		seen = cur
		return domain.Cancel(cur, by, reason, s.dir.Vouched(by), s.now())
	})
	if err != nil {
		if seen == nil {
			seen = &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev}}
		}
		return nil, false, s.domainErr(ctx, seen, by, err)
	}
	return rec, wrote && out.Applied, nil
}

// checkReason refuses a decision's or a cancel's reason longer than its
// event may carry: the reason is stored in the record and in the event
// the agent reads, and an event over the stream's message size is never
// stored, so the record would change while the trail and the agent never
// heard of it (and the sweeper would retry its publish forever). Every
// person's and agent's reason passes here, whatever the front-end.
func checkReason(reason string) error {
	if len(reason) > ingress.MaxReasonLen {
		return apierr.New(apierr.InvalidRequest, "the reason is %d bytes: keep it under %d", len(reason), ingress.MaxReasonLen)
	}
	return nil
}

// ApproveThread approves the pending calls of one agent's thread that the
// reviewer was shown and confirmed (endpoint "approve_thread"): exactly the
// revisions listed in calls, each still pending, of agent_id, in thread_id,
// each authorized on its own, each vote for the arguments_digest the
// reviewer was shown (a call edited since is not approved). A thread id is chosen by its agent, so it
// never reaches another agent's calls, and a call that joined the thread
// after the reviewer looked is not approved. Calls the principal may not
// approve, or that are no longer pending, are listed in refused with why.
func (s *Service) ApproveThread(ctx context.Context, req *airlockv1.ApproveThreadRequest) (*airlockv1.ApproveThreadResponse, error) {
	by, err := human(ctx, req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	if err := ids.ValidateAgent(req.GetAgentId()); err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "agent_id: %v: a thread belongs to one agent", err)
	}
	if req.GetThreadId() == "" {
		return nil, apierr.New(apierr.InvalidRequest, "thread_id is empty: name the thread whose calls to approve")
	}
	if len(req.GetCalls()) == 0 {
		return nil, apierr.New(apierr.InvalidRequest, "calls is empty: list the call revisions the reviewer was shown (list the thread's pending calls first)")
	}
	for _, c := range req.GetCalls() {
		if c.GetArgumentsDigest() == "" {
			return nil, apierr.New(apierr.InvalidRequest, "calls: %s/%s names no arguments_digest: give each call revision with the arguments_digest of the arguments the reviewer was shown", c.GetAgentId(), c.GetCallId())
		}
	}
	resp := &airlockv1.ApproveThreadResponse{Refused: map[string]string{}}
	for _, c := range req.GetCalls() {
		ref, err := callref.OfProto(c)
		if err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "calls: %v", err)
		}
		if ref.Agent != req.GetAgentId() {
			resp.Refused[ref.String()] = fmt.Sprintf("call %s belongs to agent %s, not to %s whose thread this is", ref.Call, ref.Agent, req.GetAgentId())
			continue
		}
		rec, _, err := s.store.get(ctx, ref.Key())
		switch {
		case errors.Is(err, errNotFound):
			resp.Refused[ref.String()] = "no such call revision waits for approval"
			continue
		case err != nil:
			return nil, s.storeErr(ref, err)
		case rec.GetCall().GetThreadId() != req.GetThreadId():
			resp.Refused[ref.String()] = fmt.Sprintf("call %s is not in thread %s", ref.Call, req.GetThreadId())
			continue
		case rec.GetState() != domain.Pending:
			resp.Refused[ref.String()] = domain.Settled(rec)
			continue
		}
		// The vote is for the arguments the reviewer was shown: after an
		// edit they saw other ones, and the domain does not count it.
		r, err := s.decideRef(ctx, ref, domain.Decision{Kind: domain.Approve, By: by, Reason: req.GetReason(), SawDigest: c.GetArgumentsDigest()})
		switch {
		case err != nil:
			resp.Refused[ref.String()] = apierr.MessageOf(err)
			continue
		case !r.GetChanged() && r.GetRecord().GetState() == domain.Pending && r.GetRecord().GetArgumentsDigest() != c.GetArgumentsDigest():
			resp.Refused[ref.String()] = r.GetMessage()
			continue
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// agentCancelRequest is the JSON an agent sends to airlock.agent.<agent>.cancel.
type agentCancelRequest struct {
	CallID string `json:"call_id"`
	Reason string `json:"reason"`
	// Revision is the revision the agent submitted and withdraws (0: its
	// first). A call waiting for a person is withdrawn whatever it says;
	// one still waiting for the policy only when it names the revision
	// the policy would record next, so that a cancel of a call sent back
	// for changes never withdraws a revision 2 not submitted.
	Revision uint32 `json:"revision,omitempty"`
	// JSONEvents: the agent reads its events in protojson. A withdrawal
	// of a call the policy never recorded is written in it (nothing else
	// says how the call's request was encoded).
	JSONEvents bool `json:"json_events,omitempty"`
}

// maxAgentCancelBytes bounds an agentCancelRequest: a call id and a reason
// of ingress.MaxReasonLen bytes, each byte escaped as \u00XX in the worst
// case, with room to spare.
const maxAgentCancelBytes = 8 * ingress.MaxReasonLen

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
// credentials, and the call is looked up under that agent only: an agent
// can name only its own calls.
func (s *Service) agentCancel(r micro.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	fail := func(err error) { s.answerErr(r, err) }
	tokens := strings.Split(r.Subject(), ".")
	if len(tokens) != 4 {
		fail(apierr.New(apierr.InvalidRequest, "cancel on %q: use airlock.agent.<agent>.cancel", r.Subject()))
		return
	}
	agent := tokens[2]
	if err := ids.ValidateAgent(agent); err != nil {
		fail(apierr.New(apierr.InvalidRequest, "%v", err))
		return
	}
	// Bounded before decoding: an agent's body may be as large as the
	// bus lets it publish, and this is all a cancel carries.
	if n := len(r.Data()); n > maxAgentCancelBytes {
		fail(apierr.New(apierr.InvalidRequest, "cancel request is %d bytes: send only the call id and a reason of at most %d bytes (the request at most %d)", n, ingress.MaxReasonLen, maxAgentCancelBytes))
		return
	}
	var req agentCancelRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		fail(apierr.New(apierr.InvalidRequest, "cancel request is not JSON like {\"call_id\":\"...\",\"reason\":\"...\"}: %v", err))
		return
	}
	// Handled on a goroutine of its own: the endpoint's requests arrive one
	// at a time, and a cancel may wait on the trail (withdraw), so one
	// agent's burst would hold every other agent's cancel behind it.
	if !s.cancelsOf.Take(agent) {
		fail(apierr.New(apierr.Unavailable, "agent %s has %d cancels being handled at once: wait for their answers, then cancel again", agent, maxCancelsPerAgent))
		return
	}
	select {
	case s.cancelSlots <- struct{}{}:
	case <-ctx.Done():
		s.cancelsOf.Give(agent)
		fail(apierr.New(apierr.Unavailable, "the approval service is handling %d cancels at once: cancel again in a moment", cancelWorkers))
		return
	}
	s.bg.Add(1)
	go rpc.Recover(s.deps.Log, func(r micro.Request) {
		defer s.bg.Done()
		defer func() { <-s.cancelSlots }()
		defer s.cancelsOf.Give(agent)
		s.answerAgentCancel(r, agent, req)
	})(r)
}

// answerErr answers r with err's code and message.
func (s *Service) answerErr(r micro.Request, err error) {
	if rerr := r.Error(string(apierr.CodeOf(err)), apierr.MessageOf(err), nil); rerr != nil {
		s.deps.Log.Warn("error reply failed", "subject", r.Subject(), "err", rerr)
	}
}

// maxCancelsPerAgent and cancelWorkers bound the agents' cancels a replica
// handles at once: each agent's, and all of them.
const (
	maxCancelsPerAgent = 4
	cancelWorkers      = 32
)

// answerAgentCancel withdraws the call req names for agent and answers r.
func (s *Service) answerAgentCancel(r micro.Request, agent string, req agentCancelRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	fail := func(err error) { s.answerErr(r, err) }
	reason := req.Reason
	if reason == "" {
		reason = "canceled by agent " + agent
	}
	rec, changed, err := s.withdraw(ctx, agent, req, reason)
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

// withdraw cancels the newest revision of an agent's call for the agent.
// That revision may be put to people but not recorded yet: this service's
// consumer is behind (a flood, slow previews), and the policy's
// approval_requested waits in the stream. A hook that gave up waiting
// withdraws its call at once (airlock hook --wait), and such a call,
// recorded pending a moment later, would wait for its deadline, holding
// its thread's queue, while the agent was told no. So the trail is read
// too, and a revision it asks about that has no record yet is recorded
// canceled from it: the request delivered later finds it ended. A call
// the policy has not decided yet (its request in the intake) is withdrawn
// by a `canceled` event the policy finds (withdrawUndecided).
func (s *Service) withdraw(ctx context.Context, agent string, req agentCancelRequest, reason string) (*airlockv1.ApprovalRecord, bool, error) {
	// A call the policy puts to people while it is withdrawn as one it has
	// not decided is withdrawn again from the top, as one put to people.
	for range 2 {
		rec, changed, err := s.withdrawOnce(ctx, agent, req, reason)
		if !errors.Is(err, errPutToPeople) {
			return rec, changed, err
		}
	}
	return nil, false, apierr.New(apierr.Unavailable, "call %s/%s is being put to people: cancel again in a moment", agent, req.CallID)
}

func (s *Service) withdrawOnce(ctx context.Context, agent string, req agentCancelRequest, reason string) (*airlockv1.ApprovalRecord, bool, error) {
	callID := req.CallID
	by := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: agent}
	rec, err := s.newestRecord(ctx, agent, callID)
	if err != nil && apierr.CodeOf(err) != apierr.NotFound {
		return nil, false, err
	}
	ref := domain.RefOf(rec)
	if err == nil && rec.GetState() == domain.Pending {
		// No newer revision can wait behind a pending one (a revision
		// follows only a request for changes): the trail is not read.
		return s.cancelRef(ctx, ref, by, reason)
	}
	revAsked, seq, rerr := s.lastEventOf(ctx, callref.Ref{Agent: agent, Call: callID}, subject.ApprovalRequested)
	if rerr != nil {
		if err != nil {
			// Not "no such call": it may wait in the stream, to be put to people.
			return nil, false, apierr.Wrap(apierr.Unavailable, rerr, "call %s/%s has no record, and whether it was put to people could not be read; try again", agent, callID)
		}
		s.deps.Log.Warn("reading whether a call the agent withdraws was put to people failed; only its record is canceled", "agent", agent, "call", callID, "err", rerr)
	}
	sentBack := err == nil && rec.GetState() == domain.ChangesRequested
	if revAsked != nil && (err != nil || revAsked.GetRevision() > ref.Rev) {
		asked := callref.Ref{Agent: agent, Call: callID, Rev: revAsked.GetRevision()}
		ended, eerr := s.endedInTrail(ctx, asked)
		switch {
		case eerr != nil:
			return nil, false, apierr.Wrap(apierr.Unavailable, eerr, "withdraw %s: whether it ended could not be read; try again", asked)
		case ended != nil && envelope.TypeOf(ended) == subject.ChangesRequested:
			// Sent back, its record gone (approval.ended_retention): the
			// next revision may wait for the policy.
			sentBack = true
		case ended != nil:
			// Ended with no record: gone (approval.ended_retention) or never
			// written (refused past a bound). An older revision's record is
			// not the call the agent withdraws.
			return nil, false, apierr.New(apierr.NotFound, "call %s waits for nobody: it ended %s (`airlock audit query --call %s` shows its history)", asked, strings.ReplaceAll(envelope.TypeOf(ended), "_", " "), callID)
		default:
			return s.withdrawUnrecorded(ctx, revAsked, seq, by, reason)
		}
	}
	if err != nil || sentBack {
		// Nothing put to people: the call, or the revision that follows
		// the one sent back, may wait in the intake for the policy.
		out, changed, werr := s.withdrawUndecided(ctx, agent, req, by, reason)
		switch {
		case !errors.Is(werr, errNotUndecided):
			return out, changed, werr
		case rec == nil:
			return nil, false, cmp.Or(err, werr)
		}
	}
	return s.cancelRef(ctx, ref, by, reason)
}

// errPutToPeople: the policy put the call to people while it was withdrawn
// as one it had not decided.
var errPutToPeople = errors.New("the call was put to people meanwhile")

// errNotUndecided: the call the agent withdraws is not one the policy has
// yet to decide: it decided it (allowed or denied), or the agent has no
// request waiting for it (a mistyped id, or a call sent back whose next
// revision was not submitted). The cancel answers as for any call with no
// pending record.
var errNotUndecided = errors.New("not a call the policy has yet to decide")

// withdrawUndecided withdraws a call the policy has not decided yet: its
// request waits in the intake (the policy is behind), so there is neither a
// record nor an approval_requested, and a call allowed later would run
// after its agent (an MCP client that gave up, a hook that told its agent
// no) withdrew it. A `canceled` event is appended to the call's events
// after the last one read (compare-and-append), for the revision the
// policy would record next; the policy, reaching the request, finds it and
// decides nothing (policy's sequence). It is written only while the agent
// has requests waiting in the intake (stored under the agent alone, so the
// call may be one of them: reading them all for its id would let one agent
// make every cancel cost a thousand reads), else errNotUndecided; and, as
// it is an event in the trail whether or not the call was submitted, an
// agent makes at most limits.agent_calls_per_minute of them a minute (per
// replica), as many as the calls it may submit.
func (s *Service) withdrawUndecided(ctx context.Context, agent string, req agentCancelRequest, by *airlockv1.Actor, reason string) (*airlockv1.ApprovalRecord, bool, error) {
	callID := req.CallID
	if err := checkReason(reason); err != nil {
		return nil, false, err
	}
	if err := ids.Validate("call id", callID); err != nil {
		return nil, false, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	callSubjects := subject.OfCall(agent, callID)
	took := false // one of the agent's withdrawals a minute, whatever the conflicts
	for range maxWithdrawAttempts {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := bus.LastStoredLeader(rctx, s.deps.NC, s.deps.Config.Stream.Name, callSubjects)
		cancel()
		if err != nil {
			return nil, false, apierr.Wrap(apierr.Unavailable, err, "call %s/%s has no record, and whether the policy decided it could not be read; try again", agent, callID)
		}
		ref, seq, recordedJSON := callref.Ref{Agent: agent, Call: callID, Rev: 1}, uint64(0), false
		if m != nil {
			seq = bus.StoredSeq(m)
			var withdrawn *airlockv1.Event
			if ref.Rev, recordedJSON, withdrawn, err = s.undecidedRevision(ctx, agent, callID); err != nil || withdrawn != nil {
				if err != nil {
					return nil, false, err
				}
				return withdrawnRecord(withdrawn), false, nil
			}
		}
		named := max(req.Revision, 1)
		if ref.Rev < named {
			return nil, false, errNotUndecided // a revision not submitted yet
		}
		waits, err := s.requestsWait(ctx, agent)
		if err != nil || !waits {
			return nil, false, cmp.Or(err, errNotUndecided)
		}
		if ref.Rev != named {
			// The call was sent back for changes, and its next revision may
			// wait for the policy: withdrawn only when named, so that a
			// cancel of the revision sent back never withdraws one not
			// submitted, nor answers "nothing changed" while one runs later.
			return nil, false, apierr.New(apierr.Conflict, "call %s/%s was sent back for changes and revision %d may wait for the policy: name the revision you submitted (revision %d) to withdraw it", agent, callID, ref.Rev, ref.Rev)
		}
		if !took {
			if !s.withdrawals.Take(agent, s.now()) {
				return nil, false, apierr.New(apierr.Unavailable, "agent %s withdrew %d calls the policy had not decided in the last minute (limits.agent_calls_per_minute): cancel again in a minute", agent, s.deps.Config.Limits.AgentCallsPerMinute)
			}
			took = true
		}
		// The encoding of the agent's events: as it says, as the revision
		// sent back was recorded, else as its newest event.
		jsonEvents := req.JSONEvents || recordedJSON || ref.Rev == 1 && s.agentReadsJSON(ctx, agent)
		ev := envelope.ForCall(&airlockv1.ToolCall{AgentId: agent, CallId: callID, Revision: ref.Rev, JsonEvents: jsonEvents}, by)
		ev.EventId, ev.Time = ref.EventID(subject.Canceled), timestamppb.New(s.now())
		ev.Body = &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{Reason: reason}}
		if err := s.decisions.SealDecision(ev); err != nil {
			return nil, false, apierr.Wrap(apierr.Internal, err, "withdraw %s", ref)
		}
		_, err = s.pub.PublishAfter(ctx, ev, "", callSubjects, seq)
		switch {
		case err == nil:
			s.deps.Log.Info("call withdrawn by its agent before the policy decided it", "call", ref.String())
			return withdrawnRecord(ev), true, nil
		case !errors.Is(err, bus.ErrConflict):
			return nil, false, apierr.Wrap(apierr.Unavailable, err, "withdraw %s: its cancellation could not be stored; try again", ref)
		}
		// Another event of the call was stored meanwhile: read again.
	}
	return nil, false, apierr.New(apierr.Unavailable, "call %s/%s kept changing while it was withdrawn: cancel again", agent, callID)
}

// undecidedRevision is the revision of agent's call (one with events) that
// the policy would record next, when the revision before it is not being
// decided: revision 1 when none is recorded, or the one after a revision
// sent back for changes. withdrawn is the `canceled` event of that
// revision when it was withdrawn already. A revision being decided (its
// decision not stored yet) is Unavailable, "cancel again"; one the policy
// allowed or denied errNotUndecided; one it put to people errPutToPeople.
// Each read is the stream's leader's, made after the call's last sequence
// was read: anything stored since makes the compare-and-append after that
// sequence fail, so no read here can be older than what the append
// follows (a replica behind could miss a revision the policy recorded, and
// the withdrawal would name it).
// jsonEvents, for a revision after the first, is whether its events are
// protojson, as the recorded revision's are.
func (s *Service) undecidedRevision(ctx context.Context, agent, callID string) (rev uint32, jsonEvents bool, withdrawn *airlockv1.Event, err error) {
	last := func(typ string) (*airlockv1.Event, error) {
		subj, err := subject.Event(agent, callID, typ)
		if err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "%v", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		m, err := bus.LastStoredLeader(rctx, s.deps.NC, s.deps.Config.Stream.Name, subj)
		if err != nil {
			return nil, apierr.Wrap(apierr.Unavailable, err, "whether the policy decided call %s/%s could not be read; try again", agent, callID)
		}
		if m == nil {
			return nil, nil
		}
		ev, err := envelope.Decode(m.Data, m.Header)
		if err != nil {
			return nil, apierr.Wrap(apierr.Internal, err, "the %s event of call %s/%s cannot be read", typ, agent, callID)
		}
		return ev, nil
	}
	revOf := func(ev *airlockv1.Event) uint32 {
		if ev == nil {
			return 0
		}
		return max(ev.GetRevision(), 1)
	}
	req, err := last(subject.Requested)
	if err != nil {
		return 0, false, nil, err
	}
	recorded := revOf(req) // 0: none
	c, err := last(subject.Canceled)
	if err != nil {
		return 0, false, nil, err
	}
	if revOf(c) > recorded {
		return revOf(c), false, c, nil // withdrawn before the policy recorded it
	}
	if recorded == 0 {
		// Only refusals so far (an `invalid` ends no call: a request
		// refused over its agent's budget is submitted again, same id).
		return 1, false, nil, nil
	}
	ref := callref.Ref{Agent: agent, Call: callID, Rev: recorded}
	if cr, err := last(subject.ChangesRequested); err != nil || revOf(cr) == recorded {
		// The next revision's events follow the encoding of this one's.
		return recorded + 1, req.GetRequested().GetCall().GetJsonEvents(), nil, err
	}
	for _, typ := range subject.PolicyOutcomes {
		d, err := last(typ)
		switch {
		case err != nil:
			return 0, false, nil, err
		case revOf(d) != recorded:
		case typ == subject.ApprovalRequested:
			return 0, false, nil, errPutToPeople
		default:
			return 0, false, nil, errNotUndecided // allowed or denied
		}
	}
	return 0, false, nil, apierr.New(apierr.Unavailable, "call %s is being decided: cancel again in a moment", ref)
}

// agentReadsJSON reports whether agent's newest event, of any call, is
// protojson: what a revision 1 the policy never recorded is written in
// (its request, in the intake, is not read). An agent with no event, or
// one that cannot be read, gets protobuf, the canonical encoding.
func (s *Service) agentReadsJSON(ctx context.Context, agent string) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := bus.LastStoredLeader(rctx, s.deps.NC, s.deps.Config.Stream.Name, subject.OfAgent(agent))
	if err != nil || m == nil {
		return false
	}
	return envelope.IsJSON(m.Header)
}

// requestsWait reports whether agent has requests waiting in the intake
// for the policy: the stream's count of them (its info, filtered to the
// agent's subject), so no request's content is read.
func (s *Service) requestsWait(ctx context.Context, agent string) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := bus.StoredOn(rctx, s.deps.NC, s.deps.Config.Intake.Name, subject.AgentRequests(agent))
	if err != nil {
		return false, apierr.Wrap(apierr.Unavailable, err, "whether agent %s has requests waiting for the policy could not be read; try again", agent)
	}
	return n > 0, nil
}

// maxWithdrawAttempts bounds withdrawUndecided's compare-and-append
// retries; each conflict means another event of the call was stored.
const maxWithdrawAttempts = 5

// withdrawnRecord is what a cancel answers about a call withdrawn before
// the policy decided it, from its `canceled` event: no record is stored.
func withdrawnRecord(ev *airlockv1.Event) *airlockv1.ApprovalRecord {
	return &airlockv1.ApprovalRecord{
		Call:      &airlockv1.ToolCall{AgentId: ev.GetAgentId(), CallId: ev.GetCallId(), Revision: max(ev.GetRevision(), 1)},
		State:     domain.Canceled,
		Reason:    ev.GetCanceled().GetReason(),
		DecidedBy: ev.GetActor(),
		UpdatedAt: ev.GetTime(),
	}
}

// endedInTrail is the event that ended ref's wait for people (approved,
// rejected, changes requested, expired, canceled) or a later revision's,
// which ended it too; nil when the trail has none: an ended call's record
// leaves the bucket after approval.ended_retention, and a call refused
// past a bound never had one, so no record does not mean nothing was
// decided.
func (s *Service) endedInTrail(ctx context.Context, ref callref.Ref) (*airlockv1.Event, error) {
	anyRev := callref.Ref{Agent: ref.Agent, Call: ref.Call}
	for _, typ := range subject.ApprovalOutcomes {
		ev, _, err := s.lastEventOf(ctx, anyRev, typ)
		if err != nil {
			return nil, err
		}
		if ev != nil && ev.GetRevision() >= ref.Rev {
			return ev, nil
		}
	}
	return nil, nil
}

// withdrawUnrecorded records the revision asked about (the policy's
// approval_requested, stored at seq) already canceled by by, as the
// consumer would record it and by then cancel it, and publishes its
// event. Where the consumer would write no record (its agent holds its
// share of the bucket's bytes, or the bucket is past its refusal mark)
// nothing is written: the consumer refuses it, and the agent is told to
// try again. A record stored meanwhile is canceled as any other.
func (s *Service) withdrawUnrecorded(ctx context.Context, asked *airlockv1.Event, seq uint64, by *airlockv1.Actor, reason string) (*airlockv1.ApprovalRecord, bool, error) {
	if err := checkReason(reason); err != nil {
		return nil, false, err
	}
	rec, err := domain.NewRecord(asked, s.settings, s.now())
	if err != nil {
		return nil, false, apierr.Wrap(apierr.Internal, err, "the call's approval_requested event cannot be read")
	}
	rec.RequestedSeq, rec.Queued = seq, domain.InQueue(rec)
	ref := domain.RefOf(rec)
	key := ref.Key()
	refused := func(why string) error {
		return apierr.New(apierr.Unavailable, "call %s is put to people but not recorded yet, and %s, so the approval service will refuse it without a record when it reaches it: nobody will be asked (cancel again to read its end)", ref, why)
	}
	v := s.index.admit(key, rec.GetCall().GetAgentId(), s.deps.Config.Approval.MaxPendingPerAgent, s.deps.Config.ApprovalBytesPerAgent(), proto.Size(rec))
	switch {
	case v.known:
		return s.cancelRef(ctx, ref, by, reason)
	case v.overBytes:
		return nil, false, refused(fmt.Sprintf("its agent holds its share of the approvals bucket (approval.max_bytes_per_agent, %d bytes)", s.deps.Config.ApprovalBytesPerAgent()))
	}
	full, err := s.pastRefusalMark(ctx)
	if err != nil || full != "" {
		if v.admitted {
			s.index.forget(key)
		}
		if err != nil {
			return nil, false, apierr.Wrap(apierr.Unavailable, err, "withdraw %s", ref)
		}
		return nil, false, refused("the approvals bucket " + full + ", past its refusal mark")
	}
	out, err := domain.Cancel(rec, by, reason, s.dir, s.now())
	if err != nil {
		s.index.forget(key)
		return nil, false, s.domainErr(ctx, rec, by, err)
	}
	rec = out.Record
	_, err = s.store.create(ctx, rec)
	s.index.forget(key) // counted until created; the watch counts it ended
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Recorded meanwhile by the consumer: canceled as any other.
		return s.cancelRef(ctx, ref, by, reason)
	case err != nil:
		return nil, false, apierr.Wrap(apierr.Unavailable, err, "withdraw %s: its record could not be stored; try again", ref)
	}
	s.deps.Log.Info("call withdrawn by its agent before it was recorded", "key", key)
	if err := s.publishDecision(ctx, rec); err != nil {
		s.deps.Log.Error("cancellation stored but its event is not published yet; the sweeper will retry", "key", key, "err", err)
	}
	if err := s.supersede(ctx, rec); err != nil {
		s.deps.Log.Warn("superseding the earlier revisions of a withdrawn call failed; they wait until decided or expired", "key", key, "err", err)
	}
	return rec, true, nil
}
