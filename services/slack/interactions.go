package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/seen"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// approvals is what the interactions endpoint needs from the approval
// service; *approvalapi.Client implements it. The approval service alone
// decides whether a principal may act on a call.
type approvals interface {
	Decide(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error)
	Get(ctx context.Context, agent, callID string, revision uint32) (*airlockv1.ApprovalRecord, error)
}

// InteractionsPath is where the interactions endpoint is mounted; Slack's
// interactivity request URL is https://<console host>/slack/interactions.
const InteractionsPath = "/slack/interactions"

const (
	// maxBodyBytes bounds an interaction post; Slack's are a few KiB (the
	// clicked message is included).
	maxBodyBytes = 1 << 20
	// workTimeout bounds the work done after a click is acknowledged.
	workTimeout = 45 * time.Second
	// metricsService labels this endpoint in airlock_messages_total.
	metricsService = "slack"
)

// Interactions is the handler of POST /slack/interactions, Slack's
// interactivity request URL. Per request it verifies Slack's signature over
// the raw body (5-minute timestamp window), refuses a payload already
// received (the seen-set is in JetStream KV, shared by every replica),
// answers within milliseconds, and then does the work in the background:
// maps the Slack user to an airlock principal (slack.users), sends the
// decision to the approval service, and redraws the clicked card. Reject and
// Request changes first open a modal for the text; its submission decides.
//
// Everything is idempotent: a click delivered twice is refused by the
// seen-set, and a decision sent twice is answered by the approval service
// with the current state.
type Interactions struct {
	secret    string
	users     map[string]string
	store     *seen.Bucket
	approvals approvals
	pub       *bus.Publisher
	api       *api
	publicURL string
	log       *slog.Logger
	metrics   *obs.Metrics

	base    context.Context
	stop    context.CancelFunc
	work    sync.WaitGroup
	timeout time.Duration
	vouched VouchedGroups // nil: none
}

// NewInteractions builds the handler from deps.Config (slack.*,
// http.public_url, buckets.slack_seen). It refuses to start without a
// signing secret (nothing could be verified) or a bot token (no card could
// be updated and no modal opened).
func NewInteractions(ctx context.Context, deps svc.Deps, opts ...Option) (*Interactions, error) {
	cfg := deps.Config.Slack
	if cfg.SigningSecret == "" {
		return nil, errors.New("slack.signing_secret is empty: copy it from the Slack app's Basic Information page into slack.signing_secret or AIRLOCK_SLACK_SIGNING_SECRET")
	}
	if cfg.BotToken == "" {
		return nil, errors.New("slack.bot_token is empty: set it (xoxb-...) or AIRLOCK_SLACK_BOT_TOKEN to enable Slack")
	}
	if _, err := deps.FrontendKey(); err != nil && deps.NC != nil {
		return nil, fmt.Errorf("slack interactions decide for people Slack authenticated, which needs the front-end key: %w", err)
	}
	o := buildOptions(deps, opts)
	if o.approvals == nil {
		return nil, errors.New("slack interactions need the approval service: no NATS connection was given")
	}
	st, err := seen.Open(ctx, deps.JS, deps.Config.Buckets.SlackSeen, "Slack")
	if err != nil {
		return nil, err
	}
	log := deps.Log.With("component", "slack-interactions")
	base, stop := context.WithCancel(context.WithoutCancel(ctx))
	return &Interactions{
		secret: cfg.SigningSecret, users: cfg.Users, store: st, approvals: o.approvals,
		pub: deps.Publisher("slack"), api: newAPI(cfg.BotToken, cfg.APIURL, o.retry, log),
		publicURL: deps.Config.HTTP.PublicURL, log: log, metrics: deps.Metrics,
		base: base, stop: stop, timeout: workTimeout, vouched: o.vouched,
	}, nil
}

// Close waits for acknowledged interactions still being worked on, until
// ctx ends; then it cancels them.
func (h *Interactions) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.work.Wait(); close(done) }()
	select {
	case <-done:
		h.stop()
		return nil
	case <-ctx.Done():
		h.stop()
		return fmt.Errorf("slack interactions still in progress at shutdown: %w", ctx.Err())
	}
}

// click is one verified interaction, reduced to what the work needs.
type click struct {
	key     string // a digest of what Slack signed (timestamp and body): unique per post
	user    string // Slack user id
	name    string // Slack user name, for messages and the audit
	channel string // channel and ts of the card clicked (empty when unknown)
	ts      string
	trigger string
	value   ButtonValue
	kind    airlockv1.DecisionKind
	reason  string
}

// ServeHTTP implements http.Handler.
func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	outcome := h.serve(w, r)
	if h.metrics != nil {
		h.metrics.Observe(metricsService, outcome, started)
	}
}

func (h *Interactions) serve(w http.ResponseWriter, r *http.Request) string {
	if r.Method != http.MethodPost {
		http.Error(w, "Slack interactions are POSTed here.", http.StatusMethodNotAllowed)
		return "refused"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		http.Error(w, "The request body is too large or unreadable.", http.StatusRequestEntityTooLarge)
		return "refused"
	}
	if why := h.verify(r.Header, body); why != "" {
		h.log.Warn("Slack interaction refused", "why", why, "remote", r.RemoteAddr)
		http.Error(w, why, http.StatusUnauthorized)
		return "refused"
	}
	// What Slack signed (timestamp and body) names the interaction, not the
	// signature's text: its hex is read in either case, so the same click
	// could otherwise be replayed with the signature in capitals.
	key := seen.Digest(r.Header.Get("X-Slack-Request-Timestamp") + ":" + string(body))
	first, err := h.store.FirstSight(r.Context(), key)
	if err != nil {
		// Without the shared seen-set a replay could not be told apart: fail closed.
		h.log.Error("cannot check Slack interaction for replay", "err", err)
		http.Error(w, "airlock cannot check this request for replay right now; try again in a moment.", http.StatusServiceUnavailable)
		return "error"
	}
	if !first {
		h.log.Warn("replayed Slack interaction refused", "remote", r.RemoteAddr)
		http.Error(w, "This interaction was already received; a replay is refused.", http.StatusConflict)
		return "refused"
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		http.Error(w, "Expected a form with a payload field, as Slack sends.", http.StatusBadRequest)
		return "refused"
	}
	var cb slackgo.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		http.Error(w, "The payload is not a Slack interaction.", http.StatusBadRequest)
		return "refused"
	}
	switch cb.Type {
	case slackgo.InteractionTypeBlockActions:
		return h.blockActions(w, key, &cb)
	case slackgo.InteractionTypeViewSubmission:
		return h.viewSubmission(w, key, &cb)
	}
	w.WriteHeader(http.StatusOK) // other interaction types are not ours to handle
	return "ignored"
}

// verify checks Slack's v0 signature and timestamp window and returns why
// the request is refused, or "".
func (h *Interactions) verify(header http.Header, body []byte) string {
	sv, err := slackgo.NewSecretsVerifier(header, h.secret)
	switch {
	case errors.Is(err, slackgo.ErrExpiredTimestamp):
		return "The request timestamp is more than 5 minutes from airlock's clock; refused (check the server's clock if this repeats)."
	case err != nil:
		return "The request lacks a valid Slack signature (X-Slack-Signature, X-Slack-Request-Timestamp)."
	}
	if _, err := sv.Write(body); err != nil {
		return "The request body could not be verified."
	}
	if sv.Ensure() != nil {
		return "The Slack signature does not match the body: check slack.signing_secret."
	}
	return ""
}

func (h *Interactions) blockActions(w http.ResponseWriter, key string, cb *slackgo.InteractionCallback) string {
	w.WriteHeader(http.StatusOK) // acknowledged; the rest happens after
	if len(cb.ActionCallback.BlockActions) == 0 {
		return "ignored"
	}
	act := cb.ActionCallback.BlockActions[0]
	kind, ok := map[string]airlockv1.DecisionKind{
		ActionApprove:        airlockv1.DecisionKind_DECISION_KIND_APPROVE,
		ActionReject:         airlockv1.DecisionKind_DECISION_KIND_REJECT,
		ActionRequestChanges: airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES,
	}[act.ActionID]
	if !ok {
		return "ignored" // e.g. the "Open in console" link button
	}
	v, err := ParseButtonValue(act.Value)
	if err != nil {
		h.log.Warn("Slack button without an airlock value", "action", act.ActionID, "err", err)
		return "refused"
	}
	c := click{
		key: key, user: cb.User.ID, name: cb.User.Name, trigger: cb.TriggerID, value: v, kind: kind,
		channel: firstNonEmpty(cb.Container.ChannelID, cb.Channel.ID), ts: firstNonEmpty(cb.Container.MessageTs, cb.Message.Timestamp),
	}
	h.spawn(func(ctx context.Context) {
		principal, ok := h.principal(ctx, c)
		if !ok {
			return
		}
		if kind == airlockv1.DecisionKind_DECISION_KIND_APPROVE {
			if h.approvable(ctx, c) {
				h.decide(ctx, c, principal)
			}
			return
		}
		h.openReasonModal(ctx, c)
	})
	return "ok"
}

// modalMeta travels in the modal's private_metadata from the click to the
// submission: which card, which call, which decision.
type modalMeta struct {
	ButtonValue
	Kind    airlockv1.DecisionKind `json:"kind"`
	Channel string                 `json:"channel,omitempty"`
	TS      string                 `json:"ts,omitempty"`
}

func (h *Interactions) viewSubmission(w http.ResponseWriter, key string, cb *slackgo.InteractionCallback) string {
	if cb.View.CallbackID != CallbackReason {
		w.WriteHeader(http.StatusOK)
		return "ignored"
	}
	var meta modalMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil || meta.Call == "" {
		h.log.Warn("Slack modal without airlock metadata", "err", err)
		w.WriteHeader(http.StatusOK)
		return "refused"
	}
	reason := ""
	if cb.View.State != nil {
		reason = strings.TrimSpace(cb.View.State.Values[BlockReason][InputReason].Value)
	}
	if reason == "" {
		// Answered in the response so the modal stays open with the message.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(slackgo.NewErrorsViewSubmissionResponse(map[string]string{BlockReason: "Write a few words: the agent receives them."}))
		return "refused"
	}
	w.WriteHeader(http.StatusOK) // closes the modal; the decision follows
	c := click{key: key, user: cb.User.ID, name: cb.User.Name, value: meta.ButtonValue, kind: meta.Kind,
		channel: meta.Channel, ts: meta.TS, reason: reason}
	h.spawn(func(ctx context.Context) {
		if principal, ok := h.principal(ctx, c); ok {
			h.decide(ctx, c, principal)
		}
	})
	return "ok"
}

// spawn runs f after the response was sent, with its own deadline.
func (h *Interactions) spawn(f func(ctx context.Context)) {
	h.work.Add(1)
	go func() {
		defer h.work.Done()
		ctx, cancel := context.WithTimeout(h.base, h.timeout)
		defer cancel()
		f(ctx)
	}()
}

// principal maps the Slack user to an airlock principal. An unmapped user
// is told so, and the attempt is recorded as unauthorized_attempt.
func (h *Interactions) principal(ctx context.Context, c click) (string, bool) {
	if p := h.users[c.user]; p != "" {
		return p, true
	}
	agent, thread, asJSON := c.value.Agent, "", false
	// The record, when the approval service answers, is the authority on
	// which agent the call belongs to.
	if rec, err := h.approvals.Get(ctx, c.value.Agent, c.value.Call, c.value.Revision); err == nil && rec.GetCall().GetAgentId() != "" {
		agent, thread, asJSON = rec.GetCall().GetAgentId(), rec.GetCall().GetThreadId(), rec.GetCall().GetJsonEvents()
	}
	ev := &airlockv1.Event{
		EventId:  callref.System{Kind: callref.SystemSlack, ID: seen.Digest(c.key)}.EventID(subject.UnauthorizedAttempt), // a retried publish of the same refusal is stored once
		AgentId:  agent,
		CallId:   c.value.Call,
		Revision: c.value.Revision,
		ThreadId: thread,
		Json:     asJSON,
		Actor:    &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "slack:" + c.user, Channel: Name},
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
			Action: calls.ActionWord(c.kind),
			Why:    fmt.Sprintf("Slack user %s (%s) is not mapped to an airlock principal in slack.users", c.user, c.name),
		}},
	}
	if _, err := h.pub.Publish(ctx, ev, ""); err != nil {
		h.log.Error("could not record unauthorized Slack attempt", "user", c.user, "call", c.value.Call, "err", err)
	}
	h.log.Warn("unmapped Slack user refused", "user", c.user, "call", c.value.Call, "action", calls.ActionWord(c.kind))
	h.tell(ctx, c, fmt.Sprintf(":no_entry_sign: Your Slack account (`%s`) is not linked to an airlock principal, so you cannot decide calls. "+
		"Ask an airlock admin to add it under `slack.users`. This attempt was recorded.", escape.SlackText(c.user)))
	return "", false
}

// decide sends the decision to the approval service and shows the result
// on the clicked card (the approval service also updates every channel's
// card through the notifier; showing it here too answers the clicker at
// once, and covers a card that was posted twice).
func (h *Interactions) decide(ctx context.Context, c click, principal string) {
	req := &airlockv1.DecideRequest{
		AgentId: c.value.Agent, CallId: c.value.Call, Revision: c.value.Revision, Kind: c.kind, Reason: c.reason,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: principal, Channel: Name},
	}
	log := h.log.With("call", c.value.Call, "revision", c.value.Revision, "principal", principal, "action", calls.ActionWord(c.kind))
	if h.vouched != nil {
		groups, err := h.vouched(ctx, principal)
		if err != nil {
			// The approval service still knows approval.groups: decide with those.
			log.Warn("could not read the groups the console's single sign-on gave this person", "err", err)
		}
		req.Principal.Groups = groups
	}
	resp, err := h.decideRetrying(ctx, req)
	switch {
	case err == nil:
		log.Info("Slack decision sent", "changed", resp.GetChanged(), "message", resp.GetMessage())
		h.showOnCard(ctx, c, resp.GetRecord())
		if !resp.GetChanged() {
			h.tell(ctx, c, "Nothing changed: "+escape.SlackText(orText(resp.GetMessage(), "the call is "+calls.StateText(resp.GetRecord().GetState())))+".")
		}
	case apierr.CodeOf(err) == apierr.NotAuthorized:
		log.Warn("approval service refused the Slack decision", "err", err)
		h.tell(ctx, c, ":no_entry_sign: airlock refused your decision: "+escape.SlackText(apierr.MessageOf(err))+" The attempt was recorded.")
	case apierr.CodeOf(err) == apierr.Unavailable || errors.Is(err, context.DeadlineExceeded):
		log.Error("approval service unavailable for a Slack decision", "err", err)
		h.tell(ctx, c, ":warning: airlock's approval service did not answer, so your decision was not recorded. Try again in a minute, or decide in the console: "+ConsoleLink(h.publicURL, c.value.Agent, c.value.Call))
	default:
		// Already decided, superseded revision, unknown call...: show where it stands.
		log.Info("Slack decision not applied", "err", err)
		if rec, gerr := h.approvals.Get(ctx, c.value.Agent, c.value.Call, 0); gerr == nil && rec != nil {
			h.showOnCard(ctx, c, rec)
			h.tell(ctx, c, "This card was out of date: the call is "+calls.StateText(rec.GetState())+". "+escape.SlackText(apierr.MessageOf(err)))
			return
		}
		h.tell(ctx, c, ":warning: airlock could not record your decision: "+escape.SlackText(apierr.MessageOf(err)))
	}
}

// approvable reports whether the clicked revision may be approved from
// Slack: its card shows every argument (a card that cannot has no Approve
// button; a click from an older card is answered the same way). It tells
// the reviewer why not.
func (h *Interactions) approvable(ctx context.Context, c click) bool {
	rec, err := h.approvals.Get(ctx, c.value.Agent, c.value.Call, c.value.Revision)
	switch {
	case err != nil:
		h.log.Warn("could not read the call before a Slack approval", "call", c.value.Call, "err", err)
		h.tell(ctx, c, ":warning: airlock could not read this call, so your approval was not recorded: "+escape.SlackText(apierr.MessageOf(err))+" Try again, or decide in the console: "+ConsoleLink(h.publicURL, c.value.Agent, c.value.Call))
		return false
	case !notify.ArgumentsFit(rec):
		h.tell(ctx, c, "A Slack card cannot show every argument of this call in full, so it is approved in the console, where every argument is shown: "+ConsoleLink(h.publicURL, c.value.Agent, c.value.Call))
		return false
	}
	return true
}

// decideRetrying retries while the approval service is unreachable;
// decisions are idempotent there, so a retry after a lost reply is harmless.
func (h *Interactions) decideRetrying(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := h.approvals.Decide(actx, req)
		cancel()
		if err == nil || apierr.CodeOf(err) != apierr.Unavailable || attempt == 5 {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// openReasonModal asks for the rejection reason or the requested changes.
// A click on a card that is no longer pending (or whose revision was
// superseded) gets the current state instead of a modal.
func (h *Interactions) openReasonModal(ctx context.Context, c click) {
	// The trigger id expires 3 s after the click: look the call up quickly.
	gctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	rec, err := h.approvals.Get(gctx, c.value.Agent, c.value.Call, 0)
	cancel()
	if err == nil && rec != nil && (rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING || rec.GetCall().GetRevision() != c.value.Revision) {
		h.showOnCard(ctx, c, rec)
		h.tell(ctx, c, "This card was out of date: the call is "+calls.StateText(rec.GetState())+".")
		return
	}
	// If the lookup failed, the modal still opens: the submission decides, and reports any problem then.
	meta, _ := json.Marshal(modalMeta{ButtonValue: c.value, Kind: c.kind, Channel: c.channel, TS: c.ts})
	if err := h.api.openView(ctx, c.trigger, reasonModal(c, rec, string(meta))); err != nil {
		h.log.Error("could not open the Slack modal", "call", c.value.Call, "err", err)
		h.tell(ctx, c, ":warning: Slack did not open the form ("+escape.SlackText(err.Error())+"). Click again, or decide in the console: "+ConsoleLink(h.publicURL, c.value.Agent, c.value.Call))
	}
}

func reasonModal(c click, rec *airlockv1.ApprovalRecord, meta string) slackgo.ModalViewRequest {
	title, submit, label, hint := "Reject call", "Reject", "Reason", "The agent receives this reason; the call will not run."
	if c.kind == airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES {
		title, submit, label, hint = "Request changes", "Send feedback", "What should change?", "The agent receives this feedback and may submit a revised call."
	}
	what := fmt.Sprintf("call %s, revision %d", escape.Slack(c.value.Call), c.value.Revision)
	if rec != nil {
		what = escape.Slack(calls.QualifiedTool(rec.GetCall())) + " · " + what
	}
	input := slackgo.NewPlainTextInputBlockElement(plain("Be specific"), InputReason)
	input.Multiline = true
	input.MaxLength = 2000
	block := slackgo.NewInputBlock(BlockReason, plain(label), plain(hint), input)
	return slackgo.ModalViewRequest{
		Type: slackgo.VTModal, CallbackID: CallbackReason, PrivateMetadata: meta,
		Title: plain(title), Submit: plain(submit), Close: plain("Cancel"),
		Blocks: slackgo.Blocks{BlockSet: []slackgo.Block{slackgo.NewSectionBlock(mrkdwn(what), nil, nil), block}},
	}
}

// showOnCard redraws the clicked card for rec.
func (h *Interactions) showOnCard(ctx context.Context, c click, rec *airlockv1.ApprovalRecord) {
	if c.channel == "" || c.ts == "" || rec == nil {
		return
	}
	msg := Render(rec, h.publicURL)
	if rec.GetCall().GetRevision() > c.value.Revision {
		msg = RenderSuperseded(rec, c.value.Revision, h.publicURL)
	}
	if err := h.api.update(ctx, nil, c.channel, c.ts, msg.Options()...); err != nil {
		h.log.Warn("could not update the clicked Slack card", "call", c.value.Call, "err", err)
	}
}

// tell answers the clicking user privately in the card's channel.
func (h *Interactions) tell(ctx context.Context, c click, text string) {
	if c.channel == "" {
		return
	}
	if err := h.api.ephemeral(ctx, c.channel, c.user, text); err != nil {
		h.log.Warn("could not answer the Slack user", "user", c.user, "err", err)
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
