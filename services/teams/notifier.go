package teams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

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

// Name is the channel name in `notified` events and NotificationRefs, and
// in policies' notify lists ("teams", "teams:<conversation id>").
const Name = "teams"

// Frontend is the name Teams activities seal their decisions with.
const Frontend = "teams"

// Option adjusts a Notifier or Activities handler (tests, mostly).
type Option func(*options)

type options struct {
	retry     Retry
	approvals approvals
	vouched   VouchedGroups
}

// VouchedGroups returns the approver groups a front-end in the same process
// vouches for principal beyond approval.groups (the console's single
// sign-on: what the person's groups gave them at their last sign-in).
type VouchedGroups func(ctx context.Context, principal string) ([]string, error)

// WithVouchedGroups sends the groups f returns for a Teams user's principal
// with their decisions, as Slack does.
func WithVouchedGroups(f VouchedGroups) Option { return func(o *options) { o.vouched = f } }

// WithRetry replaces DefaultRetry().
func WithRetry(r Retry) Option { return func(o *options) { o.retry = r } }

func buildOptions(deps svc.Deps, opts []Option) options {
	o := options{retry: DefaultRetry()}
	for _, f := range opts {
		f(&o)
	}
	if o.approvals == nil && deps.NC != nil {
		// Without the front-end key decisions are refused by the approval
		// service; NewActivities reports that at start.
		fk, _ := deps.FrontendKey()
		o.approvals = approvalapi.New(deps.NC, fk, Frontend)
	}
	return o
}

// Enabled reports whether Teams is configured (teams.app_id is set).
func Enabled(deps svc.Deps) bool { return deps.Config.Teams.AppID != "" }

// newBot is the connector with the bot's credentials from deps.Config.
func newBot(deps svc.Deps, o options, log *slog.Logger) (*connector, error) {
	cfg := deps.Config.Teams
	if cfg.AppID == "" {
		return nil, errors.New("teams.app_id is empty: set it to the bot's Microsoft App ID (or AIRLOCK_TEAMS_APP_ID) to enable Teams")
	}
	pw, err := cfg.Password()
	if err != nil {
		return nil, err
	}
	return newConnector(cfg.AppID, pw, cfg.Token(), o.retry, log), nil
}

// Notifier posts an Adaptive Card for each pending call routed to Teams
// and keeps it up to date. It implements notify.Notifier; the approval
// service calls it, possibly from several replicas, and may repeat a call
// after a crash: a repeated Announce finds the card already posted (in the
// shared bucket) instead of posting a second one.
type Notifier struct {
	bot          *connector
	store        *seen.Bucket
	clients      *clientwait.Store // nil: cards say nothing of MCP clients
	serviceURL   string
	conversation string
	publicURL    string
	log          *slog.Logger
}

var (
	_ notify.Notifier = (*Notifier)(nil)
	_ notify.Digester = (*Notifier)(nil)
)

// NewNotifier builds the notifier from deps.Config (teams.*,
// http.public_url, buckets.teams_seen). It refuses to start without the
// bot's app id and secret.
func NewNotifier(ctx context.Context, deps svc.Deps, opts ...Option) (*Notifier, error) {
	o := buildOptions(deps, opts)
	log := deps.Log.With("notifier", Name)
	bot, err := newBot(deps, o, log)
	if err != nil {
		return nil, err
	}
	st, err := seen.Open(ctx, deps.JS, deps.Config.Buckets.TeamsSeen, "Teams")
	if err != nil {
		return nil, err
	}
	clients, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		log.Warn("cards will not say whether an MCP client waits", "err", err)
	}
	cfg := deps.Config.Teams
	return &Notifier{bot: bot, store: st, clients: clients, serviceURL: cfg.ServiceURL, conversation: cfg.Conversation,
		publicURL: deps.Config.HTTP.PublicURL, log: log}, nil
}

// Name implements notify.Notifier.
func (n *Notifier) Name() string { return Name }

// Wants implements notify.Notifier: true when the policy decision's notify
// list names Teams ("teams" or "teams:<conversation id>").
func (n *Notifier) Wants(rec *airlockv1.ApprovalRecord) bool { return len(n.Targets(rec)) > 0 }

// Targets lists the conversations rec is routed to (notify.Targets: in
// the order the policy names them, without repeats, "escalate:teams" once
// the call has escalated): "teams:19:abc@thread.tacv2" →
// "19:abc@thread.tacv2", a bare "teams" → teams.conversation.
func (n *Notifier) Targets(rec *airlockv1.ApprovalRecord) []string {
	var out []string
	for _, conv := range notify.Targets(rec, Name) {
		if conv == "" {
			conv = n.conversation
		}
		if conv != "" && !slices.Contains(out, conv) {
			out = append(out, conv)
		}
	}
	return out
}

// cardActivity is the message that carries rec's card; client is the line
// saying whether the agent's MCP client waits ("" for none).
func cardActivity(rec *airlockv1.ApprovalRecord, publicURL, client string) outActivity {
	call := rec.GetCall()
	return outActivity{
		Type: "message",
		// What Teams shows in notifications and the activity feed.
		Summary:     escape.TeamsLine(fmt.Sprintf("%s: %s (risk %s, call %s)", statusWord(rec), calls.QualifiedTool(call), calls.RiskName(rec.GetDecision().GetRisk()), call.GetCallId())),
		Attachments: []attachment{{ContentType: ContentType, Content: WithClient(Render(rec, publicURL), client)}},
	}
}

// Announce implements notify.Notifier: it posts one card per target
// conversation, all at once, and returns their references joined by
// commas. When some conversations fail it still returns the others'
// references (without error) so their cards get the outcome; it fails only
// when no card could be posted.
func (n *Notifier) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	act := cardActivity(rec, n.publicURL, n.clients.CardLine(ctx, rec, n.log))
	ref, err := notify.Fanout(n.Targets(rec), func(conv string) (string, error) { return n.postCard(ctx, rec, conv, act) })
	switch {
	case err == nil:
		return ref, nil
	case ref != "":
		n.log.Error("card not posted in some Teams conversations", "call", rec.GetCall().GetCallId(), "posted", ref, "err", err)
		return ref, nil
	}
	return "", fmt.Errorf("announce call %s in Teams: %w", rec.GetCall().GetCallId(), err)
}

// postCard posts rec's card in conv once: it reuses a card already posted
// (by this or another replica, as remembered in the bucket).
func (n *Notifier) postCard(ctx context.Context, rec *airlockv1.ApprovalRecord, conv string, act outActivity) (string, error) {
	key := callref.Of(rec.GetCall()).Key() + "." + seen.Digest(conv)
	ref, err := n.store.Posted(ctx, key)
	if err != nil || ref != "" {
		return ref, err
	}
	id, err := n.bot.post(ctx, n.serviceURL, conv, act)
	if err != nil {
		return "", err
	}
	ref = cardRef(conv, id)
	if err := n.store.MarkPosted(ctx, key, ref); err != nil {
		// The card is out; only a repeated Announce could post it twice.
		n.log.Warn("card posted but not remembered", "call", rec.GetCall().GetCallId(), "ref", ref, "err", err)
	}
	n.log.Info("card posted", "call", rec.GetCall().GetCallId(), "conversation", conv, "activity", id)
	return ref, nil
}

// cardRef is one card's reference: conversation and activity id, each
// query-escaped (conversation ids hold ':', ';' and '@'), joined by '/'.
func cardRef(conv, id string) string { return url.QueryEscape(conv) + "/" + url.QueryEscape(id) }

// Update implements notify.Notifier: every card in ref is redrawn for
// rec's current state, all at once: the outcome, or while it is pending
// whether the agent's MCP client still waits. A card Teams no longer has (deleted,
// bot removed) is skipped, since retrying cannot help.
func (n *Notifier) Update(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	act := cardActivity(rec, n.publicURL, n.clients.CardLine(ctx, rec, n.log))
	err := eachCard(ref, func(conv, id string) error {
		err := n.bot.update(ctx, n.serviceURL, conv, id, act)
		if gone(err) {
			n.log.Warn("card can no longer be updated; skipping it", "call", rec.GetCall().GetCallId(), "conversation", conv, "err", err)
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update Teams card of call %s: %w", rec.GetCall().GetCallId(), err)
	}
	return nil
}

// Redraw implements notify.Redrawer: Update draws the card for rec's
// current state, the line saying whether its client waits included.
func (n *Notifier) Redraw(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	return n.Update(ctx, rec, ref)
}

// Remind implements notify.Notifier: a reply in each card's thread saying
// the call still waits (or was escalated).
func (n *Notifier) Remind(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	call := rec.GetCall()
	text := fmt.Sprintf("Reminder: %s (call %s) is still waiting for a decision; deadline %s.",
		calls.QualifiedTool(call), call.GetCallId(), deadlineText(rec))
	if rec.GetEscalated() {
		text = fmt.Sprintf("Escalated: %s (call %s) is still waiting; now also asked: %s. Deadline %s.",
			calls.QualifiedTool(call), call.GetCallId(), strings.Join(rec.GetDecision().GetEscalateTo(), ", "), deadlineText(rec))
	}
	err := eachCard(ref, func(conv, id string) error {
		err := n.bot.reply(ctx, n.serviceURL, conv, id, textActivity(text))
		if gone(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remind in Teams about call %s: %w", call.GetCallId(), err)
	}
	return nil
}

// Digest implements notify.Digester: one plain message in each
// conversation the last coalesced call was routed to.
func (n *Notifier) Digest(ctx context.Context, d notify.Digest) error {
	text := d.Text() + " " + strings.TrimRight(n.publicURL, "/") + "/"
	_, err := notify.Fanout(n.Targets(d.Latest), func(conv string) (string, error) {
		return n.bot.post(ctx, n.serviceURL, conv, textActivity(text))
	})
	if err != nil {
		return fmt.Errorf("post the digest of agent %s in Teams: %w", d.Agent, err)
	}
	return nil
}

// textActivity is a message of plain text: Teams draws no markdown in it,
// and the text is escaped (escape.Teams).
func textActivity(text string) outActivity {
	return outActivity{Type: "message", TextFormat: "plain", Text: escape.Teams(text)}
}

// eachCard runs f for every card of ref concurrently.
func eachCard(ref string, f func(conv, id string) error) error {
	return notify.EachRef(ref, func(p string) error {
		c, a, _ := strings.Cut(p, "/")
		conv, err1 := url.QueryUnescape(c)
		id, err2 := url.QueryUnescape(a)
		if err1 != nil || err2 != nil || conv == "" || id == "" {
			return fmt.Errorf("Teams reference %q is not conversation/activity", p)
		}
		return f(conv, id)
	})
}
