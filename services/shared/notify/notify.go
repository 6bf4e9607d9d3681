// Package notify is what every notification channel (log, web console,
// Slack, ...) implements. The approval service announces each new pending
// call to every channel at once, and when the call is decided anywhere it
// updates every channel's message with the outcome.
package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

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

// Redrawer is a channel whose message of a pending call shows more than
// the call: Slack and Teams cards say whether the agent's MCP client still
// waits (clientwait.CardLine). The approval service redraws such messages
// when that changes. Update is for the outcome (an email, a webhook, a
// PagerDuty resolve): a channel that is not a Redrawer is told nothing
// while the call waits.
type Redrawer interface {
	// Redraw draws rec, still pending, again on the message ref.
	Redraw(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error
}

// Digester is a channel that can tell, in one message, of the pending
// calls of one agent it did not announce one by one: past
// approval.notify_burst the approval service coalesces an agent's calls on
// each channel, so that no agent can flood reviewers (R-attack5 F3). A
// channel that is not a Digester sends nothing for them; the calls wait in
// the console either way.
type Digester interface {
	Digest(ctx context.Context, d Digest) error
}

// Digest is what a Digester tells: Calls of agent Agent were not announced
// on the channel since its last digest. Latest is the last of them, for the
// channel to route the digest as it would have routed that call (its notify
// list, its approvers); a digest shows none of its arguments.
type Digest struct {
	Agent  string
	Calls  int
	Latest *airlockv1.ApprovalRecord
}

// Text is the digest in one sentence, for a channel that shows text.
func (d Digest) Text() string {
	return fmt.Sprintf("agent %s has %d more %s waiting for a person, not announced one by one: open the console to see them", d.Agent, d.Calls, plural(d.Calls, "call", "calls"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Fanout posts to every target at once (post returns the reference of one
// message) and returns the references of those that succeeded joined by
// commas, with the failures joined in err: a channel that posts to several
// places still updates the messages it could post when some failed.
func Fanout(targets []string, post func(target string) (string, error)) (ref string, err error) {
	refs := make([]string, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Go(func() { refs[i], errs[i] = post(target) })
	}
	wg.Wait()
	var ok []string
	for _, r := range refs {
		if r != "" {
			ok = append(ok, r)
		}
	}
	return strings.Join(ok, ","), errors.Join(errs...)
}

// EachRef runs f at once for every message of a reference Fanout joined,
// and joins their errors.
func EachRef(ref string, f func(one string) error) error {
	var parts []string
	for p := range strings.SplitSeq(ref, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { errs[i] = f(p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
