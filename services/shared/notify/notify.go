// Package notify is what every notification channel (log, web console,
// Slack, ...) implements. The approval service announces each new pending
// call to every channel at once, and when the call is decided anywhere it
// updates every channel's message with the outcome.
package notify

import (
	"context"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Notifier is one channel.
type Notifier interface {
	// Name identifies the channel in `notified` events and NotificationRefs ("log", "slack", ...).
	Name() string
	// Wants reports whether this channel should be told about rec, from the
	// policy decision's notify list (e.g. "slack:#ops"); a channel that is
	// always told returns true.
	Wants(rec *airlockv1.ApprovalRecord) bool
	// Announce tells the channel about a pending call and returns a
	// reference to the message (e.g. Slack "C123/1700000000.000100") that
	// Update will need. It may be called again for the same call after a
	// crash; channels should not fail on that.
	Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (ref string, err error)
	// Remind re-announces a call still pending (reminder or escalation).
	Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error
	// Update shows the call's current (final) state on the message ref.
	Update(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error
}
