// Package approvaltest is a small stand-in for the approval service's
// micro endpoints (decide, get) on a real NATS connection, for the tests of
// front-ends that decide through approvalapi (Slack, Teams). It keeps the
// service's rules that front-ends rely on: only the decision's approvers
// may decide, the first decision wins, a later one changes nothing and
// says so.
package approvaltest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Fake is the stand-in. Every decide request it receives is also sent on
// Decides, so a test waits for one (NextDecide) or checks there was none.
type Fake struct {
	Decides chan *airlockv1.DecideRequest

	mu   sync.Mutex
	recs map[string]*airlockv1.ApprovalRecord
}

// Start serves the endpoints on deps.NC until the test ends, holding recs.
func Start(t *testing.T, deps svc.Deps, recs ...*airlockv1.ApprovalRecord) *Fake {
	t.Helper()
	a := &Fake{recs: map[string]*airlockv1.ApprovalRecord{}, Decides: make(chan *airlockv1.DecideRequest, 100)}
	for _, r := range recs {
		a.Put(r)
	}
	srv, err := micro.AddService(deps.NC, micro.Config{Name: approvalapi.Service, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	add := func(name string, h micro.HandlerFunc) {
		if err := srv.AddEndpoint(name, h, micro.WithEndpointSubject(approvalapi.Subject(name))); err != nil {
			t.Fatal(err)
		}
	}
	add(approvalapi.Decide, rpc.Handle(deps.Log, func() *airlockv1.DecideRequest { return &airlockv1.DecideRequest{} }, a.decide))
	add(approvalapi.Get, rpc.Handle(deps.Log, func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} },
		func(_ context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
			rec, ok := a.Get(req.CallId)
			if !ok {
				return nil, apierr.New(apierr.NotFound, "no call %s", req.CallId)
			}
			return &airlockv1.GetResponse{Record: rec}, nil
		}))
	testenv.Subscribed(t, deps.NC)
	return a
}

// Put stores (a copy of) r, replacing the record of its call.
func (a *Fake) Put(r *airlockv1.ApprovalRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs[r.Call.CallId] = proto.Clone(r).(*airlockv1.ApprovalRecord)
}

// Get returns a copy of the record of call id.
func (a *Fake) Get(id string) (*airlockv1.ApprovalRecord, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.recs[id]
	if !ok {
		return nil, false
	}
	return proto.Clone(r).(*airlockv1.ApprovalRecord), true
}

func (a *Fake) decide(_ context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	a.Decides <- req
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.recs[req.CallId]
	switch {
	case !ok:
		return nil, apierr.New(apierr.NotFound, "no call %s", req.CallId)
	case !slices.Contains(rec.Decision.Approvers, req.Principal.GetId()):
		return nil, apierr.New(apierr.NotAuthorized, "%s is not among the approvers of call %s.", req.Principal.GetId(), req.CallId)
	case rec.State != airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
		return &airlockv1.DecideResponse{Record: proto.Clone(rec).(*airlockv1.ApprovalRecord), Message: "already decided"}, nil
	}
	rec.State = map[airlockv1.DecisionKind]airlockv1.ApprovalState{
		airlockv1.DecisionKind_DECISION_KIND_APPROVE:         airlockv1.ApprovalState_APPROVAL_STATE_APPROVED,
		airlockv1.DecisionKind_DECISION_KIND_REJECT:          airlockv1.ApprovalState_APPROVAL_STATE_REJECTED,
		airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES: airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED,
	}[req.Kind]
	rec.DecidedBy, rec.Reason = req.Principal, req.Reason
	return &airlockv1.DecideResponse{Record: proto.Clone(rec).(*airlockv1.ApprovalRecord), Changed: true, Message: "done"}, nil
}

// NextDecide waits up to 10 s for the next decide request.
func (a *Fake) NextDecide(t *testing.T) *airlockv1.DecideRequest {
	t.Helper()
	select {
	case r := <-a.Decides:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the approval service received no decision within 10s")
		return nil
	}
}
