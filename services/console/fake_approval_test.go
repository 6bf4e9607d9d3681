package console_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// fakeApproval answers the approval service's endpoints from memory, with
// just enough of the state machine for the console's handlers: it refuses
// whom the approval service's rule refuses (calls.Directory.Barred, over
// the configuration's groups), answers a decision on a
// decided call with changed=false, and publishes the outcome event so the
// live inbox sees it. It is a real micro service on the real bus.
type fakeApproval struct {
	mu        sync.Mutex
	recs      map[string]*airlockv1.ApprovalRecord
	grants    map[string]*airlockv1.StandingGrant
	decisions []*airlockv1.DecideRequest
	threads   []*airlockv1.ApproveThreadRequest
	// gets counts the records read (Get), for tests of what a handler reads.
	gets int
	pub  *bus.Publisher
	dir  calls.Directory
}

func startFakeApproval(t *testing.T, deps svc.Deps) *fakeApproval {
	t.Helper()
	f := &fakeApproval{recs: map[string]*airlockv1.ApprovalRecord{}, grants: map[string]*airlockv1.StandingGrant{}, pub: deps.Publisher("approval"),
		dir: calls.DirectoryOf(deps.Config)}
	srv, err := micro.AddService(deps.NC, micro.Config{Name: approvalapi.Service, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	g := srv.AddGroup(subject.APIPrefix + "." + approvalapi.Service)
	add := func(name string, h micro.HandlerFunc) {
		if err := g.AddEndpoint(nameOf(name), h, micro.WithEndpointSubject(name)); err != nil {
			t.Fatal(err)
		}
	}
	log := deps.Log
	add(approvalapi.List, rpc.Handle(log, func() *airlockv1.ListRequest { return &airlockv1.ListRequest{} }, f.list))
	add(approvalapi.Get, rpc.Handle(log, func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} }, f.get))
	add(approvalapi.Decide, rpc.Handle(log, func() *airlockv1.DecideRequest { return &airlockv1.DecideRequest{} }, f.decide))
	add(approvalapi.ApproveThread, rpc.Handle(log, func() *airlockv1.ApproveThreadRequest { return &airlockv1.ApproveThreadRequest{} }, f.approveThread))
	add(approvalapi.GrantsCreate, rpc.Handle(log, func() *airlockv1.CreateGrantRequest { return &airlockv1.CreateGrantRequest{} }, f.createGrant))
	add(approvalapi.GrantsList, rpc.Handle(log, func() *airlockv1.ListGrantsRequest { return &airlockv1.ListGrantsRequest{} }, f.listGrants))
	add(approvalapi.GrantsRevoke, rpc.Handle(log, func() *airlockv1.RevokeGrantRequest { return &airlockv1.RevokeGrantRequest{} }, f.revokeGrant))
	return f
}

func nameOf(endpoint string) string {
	out := []byte(endpoint)
	for i, b := range out {
		if b == '.' {
			out[i] = '_'
		}
	}
	return string(out)
}

func (f *fakeApproval) put(rec *airlockv1.ApprovalRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs[rec.GetCall().GetCallId()] = rec
}

// record is a copy of the record of call id.
func (f *fakeApproval) record(id string) *airlockv1.ApprovalRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return proto.Clone(f.recs[id]).(*airlockv1.ApprovalRecord)
}

// getsSoFar is how many records were read so far.
func (f *fakeApproval) getsSoFar() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func (f *fakeApproval) decided() []*airlockv1.DecideRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.decisions)
}

func (f *fakeApproval) list(_ context.Context, req *airlockv1.ListRequest) (*airlockv1.ListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &airlockv1.ListResponse{}
	for _, r := range f.recs {
		if len(req.States) > 0 && !slices.Contains(req.States, r.GetState()) {
			continue
		}
		if req.AgentId != "" && r.GetCall().GetAgentId() != req.AgentId {
			continue
		}
		if req.ThreadId != "" && r.GetCall().GetThreadId() != req.ThreadId {
			continue
		}
		// As the approval service does: one record JSON cannot hold is sent
		// with marker strings, so it cannot break the list, and a large one
		// is abridged.
		out.Records = append(out.Records, calls.Abridged(proto.Clone(r).(*airlockv1.ApprovalRecord)))
	}
	return out, nil
}

func (f *fakeApproval) get(_ context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	r, ok := f.recs[req.CallId]
	if !ok {
		return nil, apierr.New(apierr.NotFound, "no approval for call %s", req.CallId)
	}
	return &airlockv1.GetResponse{Record: calls.Showable(proto.Clone(r).(*airlockv1.ApprovalRecord))}, nil
}

func (f *fakeApproval) decide(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	f.mu.Lock()
	f.decisions = append(f.decisions, proto.Clone(req).(*airlockv1.DecideRequest))
	r, ok := f.recs[req.CallId]
	if !ok {
		f.mu.Unlock()
		return nil, apierr.New(apierr.NotFound, "no approval for call %s", req.CallId)
	}
	who := req.GetPrincipal().GetId()
	if r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		f.mu.Unlock()
		return &airlockv1.DecideResponse{Record: r, Changed: false, Message: "already " + r.GetState().String()}, nil
	}
	switch f.dir.Barred(r, who) {
	case calls.NotBarred:
	case calls.OwnCall:
		f.mu.Unlock()
		return nil, apierr.New(apierr.NotAuthorized, "%s cannot decide a call made on their own behalf", who)
	default:
		f.mu.Unlock()
		return nil, apierr.New(apierr.NotAuthorized, "%s is not among the approvers of call %s", who, req.CallId)
	}
	if req.Revision != 0 && req.Revision != max(r.GetCall().GetRevision(), 1) {
		f.mu.Unlock()
		return nil, apierr.New(apierr.Conflict, "revision %d was superseded", req.Revision)
	}
	ev := &airlockv1.Event{AgentId: r.GetCall().GetAgentId(), CallId: req.CallId, Revision: max(r.GetCall().GetRevision(), 1), Actor: req.GetPrincipal()}
	switch req.Kind {
	case airlockv1.DecisionKind_DECISION_KIND_APPROVE:
		r.State = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
		r.Votes = append(r.Votes, &airlockv1.Vote{By: req.GetPrincipal(), At: timestamppb.Now(), Comment: req.Reason})
		r.EditedArguments = req.EditedArguments
		ev.Body = &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: r.Call, Edited: req.EditedArguments != nil}}
	case airlockv1.DecisionKind_DECISION_KIND_REJECT:
		r.State = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
		ev.Body = &airlockv1.Event_Rejected{Rejected: &airlockv1.Rejected{Reason: req.Reason}}
	case airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES:
		r.State = airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED
		ev.Body = &airlockv1.Event_ChangesRequested{ChangesRequested: &airlockv1.ChangesRequested{Feedback: req.Reason}}
	default:
		f.mu.Unlock()
		return nil, apierr.New(apierr.InvalidRequest, "unknown decision kind")
	}
	r.DecidedBy, r.Reason, r.UpdatedAt = req.GetPrincipal(), req.Reason, timestamppb.Now()
	out := &airlockv1.DecideResponse{Record: proto.Clone(r).(*airlockv1.ApprovalRecord), Changed: true, Message: fmt.Sprintf("%s by %s", r.GetState(), who)}
	f.mu.Unlock()
	if _, err := f.pub.Publish(ctx, ev, ""); err != nil {
		return nil, err
	}
	return out, nil
}

func (f *fakeApproval) approveThread(ctx context.Context, req *airlockv1.ApproveThreadRequest) (*airlockv1.ApproveThreadResponse, error) {
	f.mu.Lock()
	f.threads = append(f.threads, req)
	var ids []string
	out := &airlockv1.ApproveThreadResponse{Refused: map[string]string{}}
	for _, c := range req.GetCalls() {
		r, ok := f.recs[c.GetCallId()]
		switch {
		case c.GetArgumentsDigest() == "":
			f.mu.Unlock()
			return nil, apierr.New(apierr.InvalidRequest, "calls: %s names no arguments_digest", c.GetCallId())
		case ok && r.GetArgumentsDigest() != c.GetArgumentsDigest():
			out.Refused[c.GetCallId()] = "the arguments were edited"
		case ok && r.GetCall().GetAgentId() == req.GetAgentId() && r.GetCall().GetThreadId() == req.ThreadId &&
			r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
			ids = append(ids, c.GetCallId())
		}
	}
	f.mu.Unlock()
	for _, id := range ids {
		resp, err := f.decide(ctx, &airlockv1.DecideRequest{CallId: id, Principal: req.Principal, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Reason: req.Reason})
		if err != nil {
			out.Refused[id] = err.Error()
			continue
		}
		out.Results = append(out.Results, resp)
	}
	return out, nil
}

func (f *fakeApproval) createGrant(_ context.Context, req *airlockv1.CreateGrantRequest) (*airlockv1.CreateGrantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.recs[req.FromCallId]; !ok {
		return nil, apierr.New(apierr.NotFound, "no call %s", req.FromCallId)
	}
	g := proto.Clone(req.Grant).(*airlockv1.StandingGrant)
	g.Id = fmt.Sprintf("grant_%d", len(f.grants)+1)
	g.CreatedBy, g.CreatedAt = req.By, timestamppb.Now()
	f.grants[g.Id] = g
	return &airlockv1.CreateGrantResponse{Grant: g}, nil
}

func (f *fakeApproval) listGrants(_ context.Context, req *airlockv1.ListGrantsRequest) (*airlockv1.ListGrantsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &airlockv1.ListGrantsResponse{}
	for _, g := range f.grants {
		if g.Revoked && !req.IncludeInactive {
			continue
		}
		out.Grants = append(out.Grants, proto.Clone(g).(*airlockv1.StandingGrant))
	}
	return out, nil
}

func (f *fakeApproval) revokeGrant(_ context.Context, req *airlockv1.RevokeGrantRequest) (*airlockv1.RevokeGrantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.grants[req.GrantId]
	if !ok {
		return nil, apierr.New(apierr.NotFound, "no grant %s", req.GrantId)
	}
	g.Revoked, g.RevokedBy = true, req.By
	return &airlockv1.RevokeGrantResponse{Grant: proto.Clone(g).(*airlockv1.StandingGrant)}, nil
}
