// Package lognotify is the simplest notification channel: it writes every
// pending call, reminder and outcome to a structured log. It wants every
// call, never fails, and is safe for concurrent use.
package lognotify

import (
	"context"
	"log/slog"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/notify"
)

// Name is the channel name in `notified` events.
const Name = "log"

// Notifier logs to a slog.Logger.
type Notifier struct{ log *slog.Logger }

// New returns a notifier writing to log.
func New(log *slog.Logger) *Notifier { return &Notifier{log: log.With("channel", Name)} }

// Name implements notify.Notifier.
func (n *Notifier) Name() string { return Name }

// Wants implements notify.Notifier: the log is told about every call.
func (n *Notifier) Wants(*airlockv1.ApprovalRecord) bool { return true }

// Announce implements notify.Notifier. The ref is "<agent>.<call>.<revision>";
// announcing again (after a crash) just logs again.
func (n *Notifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	c := rec.GetCall()
	ref := Ref(rec)
	n.log.InfoContext(ctx, "approval needed", "ref", ref, "agent", c.GetAgentId(), "tool", calls.QualifiedTool(c),
		"on_behalf_of", c.GetOnBehalfOf(), "on_behalf_of_verified", c.GetOnBehalfOfVerified(), "risk", risk(rec), "reason", rec.GetDecision().GetReason(),
		"approvers", strings.Join(rec.GetDecision().GetApprovers(), ","), "deadline", rec.GetDeadline().AsTime())
	return ref, nil
}

// Remind implements notify.Notifier.
func (n *Notifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	n.log.InfoContext(ctx, "approval still needed", "ref", ref, "approvers", strings.Join(rec.GetDecision().GetApprovers(), ","),
		"deadline", rec.GetDeadline().AsTime())
	return nil
}

// Update implements notify.Notifier.
func (n *Notifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	n.log.InfoContext(ctx, "approval outcome", "ref", ref, "state", state(rec), "by", rec.GetDecidedBy().GetId(),
		"by_type", calls.ActorTypeName(rec.GetDecidedBy()), "reason", rec.GetReason())
	return nil
}

// Digest implements notify.Digester.
func (n *Notifier) Digest(ctx context.Context, d notify.Digest) error {
	n.log.InfoContext(ctx, "approvals needed, not announced one by one", "agent", d.Agent, "calls", d.Calls)
	return nil
}

// Ref is the reference Announce returns for rec.
func Ref(rec *airlockv1.ApprovalRecord) string {
	return callref.Of(rec.GetCall()).Key()
}

func state(rec *airlockv1.ApprovalRecord) string { return calls.StateName(rec.GetState()) }

func risk(rec *airlockv1.ApprovalRecord) string { return calls.RiskName(rec.GetDecision().GetRisk()) }
