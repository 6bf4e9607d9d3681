package approval

import (
	"context"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/notify"
)

// followClients redraws the messages of a pending call (Slack and Teams
// cards, ...) when whether its MCP client waits for the outcome changes:
// the MCP gateway records that in the client-waits bucket, and the
// channels draw it on the card (clientwait.CardLine). Every replica
// follows, so with several replicas a card may be redrawn once by each:
// the same card.
func (s *Service) followClients(ctx context.Context) {
	if s.clients == nil || len(s.fan.notifiers) == 0 {
		return
	}
	s.clients.Follow(ctx, s.deps.Log, func(agent, call string, waiting bool) {
		ref := s.index.latestRevision(callref.Ref{Agent: agent, Call: call, Rev: 1})
		rec, _, err := s.store.latest(ctx, ref)
		if err != nil {
			s.deps.Log.Info("approval: a call whose client started or stopped waiting has no record", "agent", agent, "call", call, "err", err)
			return
		}
		if rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || len(rec.GetNotifications()) == 0 {
			return
		}
		s.fan.eachRef(ctx, rec, "client", func(ctx context.Context, n notify.Notifier, r *airlockv1.ApprovalRecord, ref string) error {
			return n.Update(ctx, r, ref)
		})
	})
}
