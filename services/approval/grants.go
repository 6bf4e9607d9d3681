package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/grant"
	"github.com/airlock-gate/airlock/services/shared/ids"
)

// Standing grants live in the grants bucket, key = grant id, value the
// protobuf binary of airlock.v1.StandingGrant. This service creates, lists
// and revokes them; the policy service reads them and spends a use with CAS
// (uses_left - 1, used_by += "<agent>.<call>.<revision>").

// CreateGrant builds an "always allow" grant from a call (endpoint
// "grants.create"): agent, server and tool come from the call's newest
// revision, narrowed by the request's argument globs, use limit and expiry.
// Only a principal who may approve that call may create it.
func (s *Service) CreateGrant(ctx context.Context, req *airlockv1.CreateGrantRequest) (*airlockv1.CreateGrantResponse, error) {
	by, err := human(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	ref, err := s.resolve(ctx, req.GetFromAgentId(), req.GetFromCallId(), req.GetFromRevision())
	if err != nil {
		return nil, err
	}
	rec, _, err := s.store.get(ctx, ref.Key())
	if err != nil {
		return nil, s.storeErr(ref, err)
	}
	id := ids.New("grant")
	if req.GetRequestId() != "" {
		// A replayed request creates the same grant once.
		if err := ids.Validate("request id", req.GetRequestId()); err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "%v", err)
		}
		id = "grant_" + req.GetRequestId()
	}
	g, err := domain.NewGrant(rec, req.GetGrant(), by, s.dir.Vouched(by), id, s.now())
	if err != nil {
		return nil, s.domainErr(ctx, rec, by, err)
	}
	data, err := proto.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("encode grant: %w", err)
	}
	if _, err := s.grants.Create(ctx, g.Id, data); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) && req.GetRequestId() != "" {
			existing, _, gerr := s.grant(ctx, g.Id)
			if gerr == nil {
				return &airlockv1.CreateGrantResponse{Grant: existing}, nil
			}
		}
		return nil, apierr.Wrap(apierr.Unavailable, err, "the grant could not be stored; try again")
	}
	s.deps.Log.Info("standing grant created", "grant", g.Id, "agent", g.AgentId, "tool", g.Server+"__"+g.Tool, "by", by.GetId(), "from_call", g.FromCallId)
	s.systemEvent(ctx, domain.GrantEvent(g, by, &airlockv1.GrantCreated{Grant: domain.GrantScope(g)}))
	return &airlockv1.CreateGrantResponse{Grant: g}, nil
}

// ListGrants lists grants (endpoint "grants.list"): the active ones, or all
// with include_inactive (revoked, expired, used up).
func (s *Service) ListGrants(ctx context.Context, req *airlockv1.ListGrantsRequest) (*airlockv1.ListGrantsResponse, error) {
	keys, err := bus.Keys(ctx, s.grants, ">")
	if err != nil {
		return nil, apierr.Wrap(apierr.Unavailable, err, "grants could not be listed; try again")
	}
	now := s.now()
	resp := &airlockv1.ListGrantsResponse{}
	for _, key := range keys {
		g, _, err := s.grant(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, apierr.Wrap(apierr.Unavailable, err, "grant %s could not be read; try again", key)
		}
		if req.GetIncludeInactive() || domain.GrantActive(g, now) {
			resp.Grants = append(resp.Grants, g)
		}
	}
	slices.SortFunc(resp.Grants, func(a, b *airlockv1.StandingGrant) int {
		return b.GetCreatedAt().AsTime().Compare(a.GetCreatedAt().AsTime())
	})
	return resp, nil
}

// RevokeGrant revokes a grant (endpoint "grants.revoke"). Its creator or an
// approver of the call it came from may; revoking twice changes nothing.
func (s *Service) RevokeGrant(ctx context.Context, req *airlockv1.RevokeGrantRequest) (*airlockv1.RevokeGrantResponse, error) {
	by, err := human(ctx, req.GetBy())
	if err != nil {
		return nil, err
	}
	if req.GetGrantId() == "" {
		return nil, apierr.New(apierr.InvalidRequest, "grant_id is empty: name the grant to revoke (`airlock approvals grants`, the console's Grants page or GET /api/v1/grants lists them)")
	}
	for range maxCASAttempts {
		g, rev, err := s.grant(ctx, req.GetGrantId())
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
			return nil, apierr.New(apierr.NotFound, "no grant %s: `airlock approvals grants`, the console's Grants page or GET /api/v1/grants lists the existing ones", req.GetGrantId())
		}
		if err != nil {
			return nil, apierr.Wrap(apierr.Unavailable, err, "grant %s could not be read; try again", req.GetGrantId())
		}
		var rec *airlockv1.ApprovalRecord
		if from, rerr := callref.New(g.GetAgentId(), g.GetFromCallId(), 0); rerr == nil {
			if rec, _, rerr = s.store.latest(ctx, s.index.latestRevision(from)); rerr != nil {
				rec = nil
			}
		}
		next, changed, err := domain.Revoke(g, rec, by, s.dir.Vouched(by))
		if err != nil {
			if rec == nil {
				rec = &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{CallId: g.GetFromCallId(), AgentId: g.GetAgentId()}}
			}
			return nil, s.domainErr(ctx, rec, by, err)
		}
		if !changed {
			return &airlockv1.RevokeGrantResponse{Grant: g}, nil
		}
		data, err := proto.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode grant: %w", err)
		}
		if _, err := s.grants.Update(ctx, g.GetId(), data, rev); err != nil {
			if bus.Conflict(err) {
				continue // the policy service spent a use meanwhile: revoke the fresh grant
			}
			return nil, apierr.Wrap(apierr.Unavailable, err, "grant %s could not be revoked; try again", g.GetId())
		}
		s.deps.Log.Info("standing grant revoked", "grant", g.GetId(), "by", by.GetId())
		s.systemEvent(ctx, domain.GrantEvent(next, by, &airlockv1.GrantRevoked{GrantId: g.GetId(), AgentId: g.GetAgentId(), Server: g.GetServer(), Tool: g.GetTool()}))
		return &airlockv1.RevokeGrantResponse{Grant: next}, nil
	}
	return nil, apierr.New(apierr.Conflict, "grant %s keeps changing; try again", req.GetGrantId())
}

func (s *Service) grant(ctx context.Context, key string) (*airlockv1.StandingGrant, uint64, error) {
	e, err := s.grants.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	g := &airlockv1.StandingGrant{}
	if err := proto.Unmarshal(e.Value(), g); err != nil {
		return nil, 0, fmt.Errorf("decode grant %s: %w", key, err)
	}
	return g, e.Revision(), nil
}

// grantSweepEvery is how many sweeps pass between looks for grants whose
// time ran out (every 10 s with the default sweep_interval of 1 s).
const grantSweepEvery = 10

// sweepGrants records grant_expired once for every grant whose expiry has
// passed (a grant used up is recorded by the policy service when it spends
// the last use). The stream is asked before publishing, and each replica
// remembers what it found, so a grant's expiry is recorded once however many
// replicas sweep and restart.
func (s *Service) sweepGrants(ctx context.Context) {
	now := s.now()
	if now.Sub(s.grantSwept) < grantSweepEvery*s.cfg.SweepInterval {
		return
	}
	s.grantSwept = now
	keys, err := bus.Keys(ctx, s.grants, ">")
	if err != nil {
		s.deps.Log.Warn("cannot list grants to record expiries; will retry", "err", err)
		return
	}
	var stream jetstream.Stream
	for _, key := range keys {
		if s.expiryRecorded[key] {
			continue
		}
		g, _, err := s.grant(ctx, key)
		if err != nil {
			continue
		}
		// A used-up grant's end is recorded by the policy service (used_up).
		if g.GetRevoked() || !grant.Expired(g, now) || g.GetLimitedUses() && g.GetUsesLeft() == 0 {
			continue
		}
		exp := g.GetExpiresAt()
		ev := domain.GrantEvent(g, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"},
			&airlockv1.GrantExpired{GrantId: g.GetId(), Why: "expired", ExpiresAt: exp})
		if stream == nil {
			if stream, err = s.deps.JS.Stream(ctx, s.deps.Config.Stream.Name); err != nil {
				s.deps.Log.Warn("cannot check grant expiries", "err", err)
				return
			}
		}
		if stored, err := eventStored(ctx, stream, ev); err != nil || stored {
			s.expiryRecorded[key] = err == nil
			continue
		}
		if err := s.publish(ctx, ev); err != nil {
			s.deps.Log.Warn("recording a grant expiry failed; will retry", "grant", key, "err", err)
			continue
		}
		s.expiryRecorded[key] = true
	}
}
