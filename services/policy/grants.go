package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
)

// MaxUsedBy bounds StandingGrant.used_by: the most recent uses are kept,
// enough to recognise a redelivered request.
const MaxUsedBy = 100

// grantStore spends standing grants in the grants bucket.
type grantStore struct {
	kv jetstream.KeyValue
}

// spend records that call used grant id, with compare-and-set: it returns
// the grant as stored after the use, or nil when the grant no longer applies
// (revoked, used up, deleted meanwhile). A call revision already in used_by
// is a redelivery: it is allowed again without spending another use.
func (s grantStore) spend(ctx context.Context, id string, call *airlockv1.ToolCall, d *airlockv1.Decision, now time.Time) (*airlockv1.StandingGrant, error) {
	key := decide.UseKey(call)
	for attempt := 0; attempt < 20; attempt++ {
		e, err := s.kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read grant %s: %w", id, err)
		}
		g := &airlockv1.StandingGrant{}
		if err := proto.Unmarshal(e.Value(), g); err != nil {
			return nil, nil // an unreadable grant grants nothing
		}
		if !decide.GrantApplies(g, call, d, now) {
			return nil, nil
		}
		if slices.Contains(g.UsedBy, key) {
			return g, nil
		}
		if g.LimitedUses {
			g.UsesLeft--
		}
		g.UsedBy = append(g.UsedBy, key)
		if len(g.UsedBy) > MaxUsedBy {
			g.UsedBy = g.UsedBy[len(g.UsedBy)-MaxUsedBy:]
		}
		b, err := proto.Marshal(g)
		if err != nil {
			return nil, fmt.Errorf("encode grant %s: %w", id, err)
		}
		_, err = s.kv.Update(ctx, id, b, e.Revision())
		if err == nil {
			return g, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("spend grant %s: %w", id, err)
		}
		// Someone else changed the grant meanwhile: read it again.
	}
	return nil, fmt.Errorf("spend grant %s: too much contention, gave up", id)
}

// candidates returns the grants that apply to call, in a stable order
// (unlimited first, then by id) so replicas pick the same one; each is
// named by its key (a grant stored without its id is copied with it, the
// snapshot is never modified). grant.AnswerAsk takes the first that answers.
func candidates(grants map[string]*airlockv1.StandingGrant, call *airlockv1.ToolCall, d *airlockv1.Decision, now time.Time) []*airlockv1.StandingGrant {
	var ids []string
	for id, g := range grants {
		if decide.GrantApplies(g, call, d, now) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return decide.CompareGrants(grants[a], grants[b], a, b) })
	gs := make([]*airlockv1.StandingGrant, len(ids))
	for i, id := range ids {
		gs[i] = grants[id]
		if gs[i].GetId() != id {
			gs[i] = proto.Clone(gs[i]).(*airlockv1.StandingGrant)
			gs[i].Id = id
		}
	}
	return gs
}
