package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/seen"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Name is the channel name in `notified` events and NotificationRefs.
const Name = "slack"

// Option adjusts a Notifier or Interactions handler (tests, mostly).
type Option func(*options)

type options struct {
	retry     Retry
	approvals approvals
	budget    time.Duration
	vouched   VouchedGroups
}

// VouchedGroups returns the approver groups a front-end in the same process
// vouches for principal beyond approval.groups (the console's single
// sign-on: what the person's groups gave them at their last sign-in).
type VouchedGroups func(ctx context.Context, principal string) ([]string, error)

// WithVouchedGroups sends the groups f returns for a Slack user's principal
// with their decisions, so that a person who signs in to the console by
// single sign-on decides from Slack as the same member of the same groups.
func WithVouchedGroups(f VouchedGroups) Option { return func(o *options) { o.vouched = f } }

// DefaultBudget bounds how long one card post or update keeps being
// retried, whatever the caller's deadline.
const DefaultBudget = 2 * time.Minute

// WithRetry replaces DefaultRetry().
func WithRetry(r Retry) Option { return func(o *options) { o.retry = r } }

// Frontend is the name Slack interactions seal their decisions with.
const Frontend = "slack"

func buildOptions(deps svc.Deps, opts []Option) options {
	o := options{retry: DefaultRetry(), budget: DefaultBudget}
	for _, f := range opts {
		f(&o)
	}
	if o.approvals == nil && deps.NC != nil {
		// Without the front-end key decisions are refused by the approval
		// service; NewInteractions reports that at start.
		fk, _ := deps.FrontendKey()
		o.approvals = approvalapi.New(deps.NC, fk, Frontend)
	}
	return o
}

// Enabled reports whether Slack is configured (slack.bot_token is set).
func Enabled(deps svc.Deps) bool { return deps.Config.Slack.BotToken != "" }

// Notifier posts a Block Kit card for each pending call routed to Slack and
// keeps it up to date. It implements notify.Notifier; the approval service
// calls it, possibly from several replicas, and may repeat a call after a
// crash: a repeated Announce finds the card already posted (in the shared
// bucket) instead of posting a second one.
type Notifier struct {
	api       *api
	store     *seen.Bucket
	clients   *clientwait.Store // nil: cards say nothing of MCP clients
	channel   string
	publicURL string
	log       *slog.Logger
	budget    time.Duration

	mu      sync.Mutex
	flights map[string]*flight // card posts in progress, by card key
	order   *cardOrder         // updates in flight, by message
}

var (
	_ notify.Notifier = (*Notifier)(nil)
	_ notify.Digester = (*Notifier)(nil)
)

// NewNotifier builds the notifier from deps.Config (slack.*, http.public_url,
// buckets.slack_seen). It refuses to start without a bot token.
func NewNotifier(ctx context.Context, deps svc.Deps, opts ...Option) (*Notifier, error) {
	cfg := deps.Config.Slack
	if cfg.BotToken == "" {
		return nil, errors.New("slack.bot_token is empty: set it (xoxb-...) or AIRLOCK_SLACK_BOT_TOKEN to enable Slack")
	}
	o := buildOptions(deps, opts)
	st, err := seen.Open(ctx, deps.JS, deps.Config.Buckets.SlackSeen, "Slack")
	if err != nil {
		return nil, err
	}
	log := deps.Log.With("notifier", Name)
	clients, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		log.Warn("cards will not say whether an MCP client waits", "err", err)
	}
	return &Notifier{
		api: newAPI(cfg.BotToken, cfg.APIURL, o.retry, log), store: st, clients: clients,
		channel: cfg.Channel, publicURL: deps.Config.HTTP.PublicURL, log: log, budget: o.budget,
		flights: map[string]*flight{}, order: newCardOrder(o.budget),
	}, nil
}

// Name implements notify.Notifier.
func (n *Notifier) Name() string { return Name }

// Wants implements notify.Notifier: true when the policy decision's notify
// list names Slack ("slack" or "slack:<channel>").
func (n *Notifier) Wants(rec *airlockv1.ApprovalRecord) bool { return len(n.Targets(rec)) > 0 }

// Targets lists the Slack channels rec is routed to, in the order the
// policy names them, without repeats: "slack:#ops" → "#ops", a bare
// "slack" → slack.channel.
func (n *Notifier) Targets(rec *airlockv1.ApprovalRecord) []string {
	var out []string
	seen := map[string]bool{}
	for _, entry := range rec.GetDecision().GetNotify() {
		entry = strings.TrimSpace(entry)
		var ch string
		switch {
		case entry == Name:
			ch = n.channel
		case strings.HasPrefix(entry, Name+":"):
			ch = strings.TrimSpace(strings.TrimPrefix(entry, Name+":"))
		}
		if ch != "" && !seen[ch] {
			seen[ch] = true
			out = append(out, ch)
		}
	}
	return out
}

// Announce implements notify.Notifier: it posts one card per target
// channel, all channels at once, and returns their references joined by
// commas ("C123/1700000000.000100,C456/..."). When some channels fail it
// still returns the others' references (without error) so their cards get
// the outcome; it fails only when no card could be posted. A post that
// outlives ctx (Slack asked to wait longer) carries on in the background,
// and a repeated Announce finds it instead of posting twice.
func (n *Notifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	msg := WithClient(Render(rec, n.publicURL), n.clients.CardLine(ctx, rec, n.log))
	ref, err := notify.Fanout(n.Targets(rec), func(ch string) (string, error) {
		return detached(ctx, n.budget, func(ctx context.Context) (string, error) {
			return n.announceTo(ctx, rec, ch, msg)
		})
	})
	switch {
	case err == nil:
		return ref, nil
	case ref != "":
		n.log.Error("card not posted in some Slack channels", "call", rec.GetCall().GetCallId(), "posted", ref, "err", err)
		return ref, nil
	}
	return "", fmt.Errorf("announce call %s in Slack: %w", rec.GetCall().GetCallId(), err)
}

// detached runs f with its own time budget, so that Slack's Retry-After is
// honoured even when the caller gives up sooner: the caller's ctx bounds
// how long it waits, not how long the card keeps being retried.
func detached[T any](ctx context.Context, budget time.Duration, f func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		v, err := f(dctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, fmt.Errorf("Slack has not answered yet; still retrying in the background: %w", ctx.Err())
	}
}

// detachedErr is detached for work without a result.
func (n *Notifier) detachedErr(ctx context.Context, f func(context.Context) error) error {
	_, err := detached(ctx, n.budget, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// announceTo posts rec's card in channel once: it reuses a card already
// posted (by this or another replica, as remembered in the bucket) and
// joins a post of the same card still in flight in this process.
func (n *Notifier) announceTo(ctx context.Context, rec *airlockv1.ApprovalRecord, channel string, msg Message) (string, error) {
	key := callref.Of(rec.GetCall()).Key() + "." + seen.Digest(channel)
	n.mu.Lock()
	if f, ok := n.flights[key]; ok {
		n.mu.Unlock()
		select {
		case <-f.done:
			return f.ref, f.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	n.flights[key] = f
	n.mu.Unlock()

	f.ref, f.err = n.postCard(ctx, rec, channel, msg, key)
	n.mu.Lock()
	delete(n.flights, key)
	n.mu.Unlock()
	close(f.done)
	return f.ref, f.err
}

// flight is a card post in progress.
type flight struct {
	done chan struct{}
	ref  string
	err  error
}

func (n *Notifier) postCard(ctx context.Context, rec *airlockv1.ApprovalRecord, channel string, msg Message, key string) (string, error) {
	ref, err := n.store.Posted(ctx, key)
	if err != nil || ref != "" {
		return ref, err
	}
	ch, ts, err := n.api.post(ctx, channel, msg.Options()...)
	if err != nil {
		return "", err
	}
	ref = ch + "/" + ts
	if err := n.store.MarkPosted(ctx, key, ref); err != nil {
		// The card is out; only a repeated Announce could post it twice.
		n.log.Warn("card posted but not remembered", "call", rec.GetCall().GetCallId(), "ref", ref, "err", err)
	}
	n.log.Info("card posted", "call", rec.GetCall().GetCallId(), "channel", channel, "ref", ref)
	return ref, nil
}

// Update implements notify.Notifier: every message in ref is redrawn for
// rec's current state (chat.update), all at once: the outcome, or while
// it is pending whether the agent's MCP client still waits. A message Slack no longer
// has (deleted, channel archived) is skipped, since retrying cannot help.
// Updates of one message keep the order of the calls (cardOrder): an update
// that a later Update of the same message supersedes stops, even while it
// waits to retry, and returns nil, since the later one draws the newer state.
func (n *Notifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	var drawOnce sync.Once
	var msg Message
	draw := func(ctx context.Context) Message {
		drawOnce.Do(func() { msg = WithClient(Render(rec, n.publicURL), n.clients.CardLine(ctx, rec, n.log)) })
		return msg
	}
	err := eachMessage(ref, func(ch, ts string) error {
		return n.detachedErr(ctx, func(ctx context.Context) error {
			// The turn is taken before drawing the card (which reads the
			// bucket), so that drawing cannot reorder two updates.
			t := n.order.begin(ch+"/"+ts, calls.Stage(rec.GetState()))
			defer n.order.end(t)
			err := n.api.update(ctx, t, ch, ts, draw(ctx).Options()...)
			switch {
			case errors.Is(err, errSuperseded):
				n.log.Info("card update superseded by a newer one; dropped", "call", rec.GetCall().GetCallId(), "ref", ch+"/"+ts)
				return nil
			case gone(err):
				n.log.Warn("card can no longer be updated; skipping it", "call", rec.GetCall().GetCallId(), "ref", ch+"/"+ts, "err", err)
				return nil
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("update Slack card of call %s: %w", rec.GetCall().GetCallId(), err)
	}
	return nil
}

// Redraw implements notify.Redrawer: Update draws the card for rec's
// current state, the line saying whether its client waits included.
func (n *Notifier) Redraw(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	return n.Update(ctx, rec, ref)
}

// Remind implements notify.Notifier: a reply in each card's thread, also
// shown in the channel, saying the call still waits (or was escalated).
func (n *Notifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	call := rec.GetCall()
	text := fmt.Sprintf(":alarm_clock: Reminder: %s (call %s) is still waiting for a decision; deadline %s.",
		escape.Slack(calls.QualifiedTool(call)), escape.Slack(call.GetCallId()), deadlineText(rec.GetDeadline().AsTime(), rec.GetDeadline() != nil))
	if rec.GetEscalated() {
		text = fmt.Sprintf(":rotating_light: Escalated: %s (call %s) is still waiting; now also asked: %s. Deadline %s.",
			escape.Slack(calls.QualifiedTool(call)), escape.Slack(call.GetCallId()), escape.SlackText(strings.Join(rec.GetDecision().GetEscalateTo(), ", ")),
			deadlineText(rec.GetDeadline().AsTime(), rec.GetDeadline() != nil))
	}
	err := eachMessage(ref, func(ch, ts string) error {
		return n.detachedErr(ctx, func(ctx context.Context) error {
			_, _, err := n.api.post(ctx, ch, slackgo.MsgOptionText(text, false), slackgo.MsgOptionTS(ts), slackgo.MsgOptionBroadcast())
			if gone(err) {
				return nil
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("remind in Slack about call %s: %w", call.GetCallId(), err)
	}
	return nil
}

// Digest implements notify.Digester: one message in each channel the last
// coalesced call was routed to, saying how many of the agent's calls wait
// without a card of their own, with a link to the console.
func (n *Notifier) Digest(ctx context.Context, d notify.Digest) error {
	text := fmt.Sprintf(":inbox_tray: Agent %s has %d more %s waiting for a decision, not posted one by one: <%s|open the console>.",
		escape.Slack(d.Agent), d.Calls, map[bool]string{true: "call", false: "calls"}[d.Calls == 1], strings.TrimRight(n.publicURL, "/")+"/")
	_, err := notify.Fanout(n.Targets(d.Latest), func(ch string) (string, error) {
		return "", n.detachedErr(ctx, func(ctx context.Context) error {
			_, _, err := n.api.post(ctx, ch, slackgo.MsgOptionText(text, false))
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("post the digest of agent %s in Slack: %w", d.Agent, err)
	}
	return nil
}

// eachMessage runs f for every "channel/ts" in ref concurrently.
func eachMessage(ref string, f func(ch, ts string) error) error {
	return notify.EachRef(ref, func(p string) error {
		ch, ts, ok := strings.Cut(p, "/")
		if !ok || ch == "" || ts == "" {
			return fmt.Errorf("Slack reference %q is not channel/ts", p)
		}
		return f(ch, ts)
	})
}

// gone reports Slack errors meaning the message cannot be touched again.
func gone(err error) bool {
	switch slackErrorCode(err) {
	case "message_not_found", "cant_update_message", "channel_not_found", "is_archived", "thread_not_found":
		return true
	}
	return false
}
