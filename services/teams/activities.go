package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/seen"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// approvals is what the endpoint needs from the approval service;
// *approvalapi.Client implements it. The approval service alone decides
// whether a principal may act on a call.
type approvals interface {
	Decide(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error)
	Get(ctx context.Context, agent, callID string, revision uint32) (*airlockv1.ApprovalRecord, error)
}

// MessagesPath is where the bot's messaging endpoint is mounted; register
// https://<console host>/teams/messages as the bot's messaging endpoint.
const MessagesPath = "/teams/messages"

const (
	// maxBodyBytes bounds an activity (Teams' own limit is about 40 KB).
	maxBodyBytes = 256 << 10
	// workTimeout bounds the work done for one activity; the Bot Connector
	// waits 15 s for the answer.
	workTimeout = 12 * time.Second
	// metricsService labels this endpoint in airlock_messages_total.
	metricsService = "teams"
)

// Activities is the handler of POST /teams/messages, the bot's messaging
// endpoint. Per request it verifies the Bot Framework's token before it
// reads the activity (keys from the OpenID metadata, issuer, audience = the
// bot's app id, expiry, the serviceurl claim equal to the activity's
// serviceUrl), refuses an activity already received (by its id; the
// seen-set is in JetStream KV, shared by every replica) with the call's
// current state, maps the Teams user to an airlock principal (teams.users),
// sends the decision to the approval service and redraws the card.
// Activities that carry no card action are acknowledged and ignored.
type Activities struct {
	appID     string
	verifier  *verifier
	users     map[string]string
	store     *seen.Bucket
	approvals approvals
	pub       *bus.Publisher
	bot       *connector
	publicURL string
	log       *slog.Logger
	metrics   *obs.Metrics
	vouched   VouchedGroups // nil: none
}

// NewActivities builds the handler from deps.Config (teams.*,
// http.public_url, buckets.teams_seen). It refuses to start without the
// bot's app id and secret (no token could be checked for its audience, no
// card updated) or without the front-end key.
func NewActivities(ctx context.Context, deps svc.Deps, opts ...Option) (*Activities, error) {
	cfg := deps.Config.Teams
	if _, err := deps.FrontendKey(); err != nil && deps.NC != nil {
		return nil, fmt.Errorf("teams activities decide for people Teams authenticated, which needs the front-end key: %w", err)
	}
	o := buildOptions(deps, opts)
	if o.approvals == nil {
		return nil, errors.New("teams activities need the approval service: no NATS connection was given")
	}
	log := deps.Log.With("component", "teams-activities")
	bot, err := newBot(deps, o, log)
	if err != nil {
		return nil, err
	}
	if cfg.OpenIDMetadataURL == "" {
		return nil, errors.New("teams.openid_metadata_url is empty: leave it unset for the Bot Framework's")
	}
	st, err := seen.Open(ctx, deps.JS, deps.Config.Buckets.TeamsSeen, "Teams")
	if err != nil {
		return nil, err
	}
	return &Activities{
		appID: cfg.AppID, verifier: newVerifier(cfg.AppID, cfg.OpenIDMetadataURL, &http.Client{Timeout: 10 * time.Second}),
		users: cfg.Users, store: st, approvals: o.approvals, pub: deps.Publisher("teams"), bot: bot,
		publicURL: deps.Config.HTTP.PublicURL, log: log, metrics: deps.Metrics, vouched: o.vouched,
	}, nil
}

// inActivity is the part of an inbound activity airlock reads.
type inActivity struct {
	Type       string `json:"type"`
	ID         string `json:"id"`
	ServiceURL string `json:"serviceUrl"`
	ChannelID  string `json:"channelId"`
	From       struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		AADObjectID string `json:"aadObjectId"`
	} `json:"from"`
	Conversation struct {
		ID string `json:"id"`
	} `json:"conversation"`
	ReplyToID string          `json:"replyToId"`
	Value     json.RawMessage `json:"value"`
}

// action is one verified card action, reduced to what the work needs.
type action struct {
	act  inActivity
	data ActionData
	kind airlockv1.DecisionKind
}

// ServeHTTP implements http.Handler.
func (h *Activities) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	code, msg, outcome := h.serve(r)
	if h.metrics != nil {
		h.metrics.Observe(metricsService, outcome, started)
	}
	if code == http.StatusOK {
		w.WriteHeader(code)
		return
	}
	http.Error(w, msg, code)
}

// serve handles one request and returns the status, the sentence that
// explains a refusal, and the outcome for the metrics.
func (h *Activities) serve(r *http.Request) (int, string, string) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "Bot Framework activities are POSTed here.", "refused"
	}
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return http.StatusUnauthorized, "The request lacks the Bot Framework's token (Authorization: Bearer).", "refused"
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		return http.StatusRequestEntityTooLarge, "The request body is too large or unreadable.", "refused"
	}
	claimedURL, err := h.verifier.verify(r.Context(), raw)
	if err != nil {
		h.log.Warn("Teams activity refused: token not valid", "err", err, "remote", r.RemoteAddr)
		return http.StatusUnauthorized, "The Bot Framework token is not valid for this bot (signature, issuer, audience or expiry); refused.", "refused"
	}
	var act inActivity
	if err := json.Unmarshal(body, &act); err != nil {
		return http.StatusBadRequest, "The body is not a Bot Framework activity.", "refused"
	}
	if strings.TrimRight(act.ServiceURL, "/") != strings.TrimRight(claimedURL, "/") {
		h.log.Warn("Teams activity refused: serviceUrl differs from the token's", "activity", act.ServiceURL, "token", claimedURL)
		return http.StatusUnauthorized, "The activity's serviceUrl is not the one its token was issued for; refused.", "refused"
	}
	a, ok := h.parse(act)
	if !ok {
		return http.StatusOK, "", "ignored" // a message or event that is not a card action
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), workTimeout)
	defer cancel()
	first, err := h.store.FirstSight(ctx, seen.Digest(act.Conversation.ID+"\x00"+act.ID))
	if err != nil {
		// Without the shared seen-set a replay could not be told apart: fail closed.
		h.log.Error("cannot check Teams activity for replay", "err", err)
		return http.StatusServiceUnavailable, "airlock cannot check this activity for replay right now; try again in a moment.", "error"
	}
	if !first {
		return http.StatusConflict, h.replayed(ctx, a), "refused"
	}
	principal, ok := h.principal(ctx, a)
	if !ok {
		return http.StatusOK, "", "refused"
	}
	h.decide(ctx, a, principal)
	return http.StatusOK, "", "ok"
}

// parse reads a card action from the activity's value: Action.Submit
// sends its data (and the reason input) there.
func (h *Activities) parse(act inActivity) (action, bool) {
	if act.Type != "message" || len(act.Value) == 0 || act.ID == "" {
		return action{}, false
	}
	var d ActionData
	if err := json.Unmarshal(act.Value, &d); err != nil || d.Call == "" || d.Agent == "" {
		return action{}, false
	}
	kind, ok := map[string]airlockv1.DecisionKind{
		VerbApprove:        airlockv1.DecisionKind_DECISION_KIND_APPROVE,
		VerbReject:         airlockv1.DecisionKind_DECISION_KIND_REJECT,
		VerbRequestChanges: airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES,
	}[d.Verb]
	if !ok {
		return action{}, false
	}
	d.Reason = strings.TrimSpace(d.Reason)
	return action{act: act, data: d, kind: kind}, true
}

// replayed answers an activity already received with the call's current
// state; it decides nothing.
func (h *Activities) replayed(ctx context.Context, a action) string {
	h.log.Warn("replayed Teams activity refused", "activity", a.act.ID, "call", a.data.Call)
	state := "unknown to airlock right now"
	if rec, err := h.approvals.Get(ctx, a.data.Agent, a.data.Call, 0); err == nil && rec != nil {
		state = calls.StateText(rec.GetState())
	}
	return fmt.Sprintf("This activity was already received; a replay decides nothing. The call is %s.", state)
}

// teamsUser is how the user is named in teams.users: the Entra object id
// when Teams sends it, else the Teams id.
func teamsUser(act inActivity) string {
	if act.From.AADObjectID != "" {
		return act.From.AADObjectID
	}
	return act.From.ID
}

// principal maps the Teams user to an airlock principal. An unmapped user
// is told so, and the attempt is recorded as unauthorized_attempt.
func (h *Activities) principal(ctx context.Context, a action) (string, bool) {
	for _, id := range []string{a.act.From.AADObjectID, a.act.From.ID} {
		if p := h.users[id]; id != "" && p != "" {
			return p, true
		}
	}
	user := teamsUser(a.act)
	agent, thread, asJSON := a.data.Agent, "", false
	// The record, when the approval service answers, is the authority on
	// which agent the call belongs to.
	if rec, err := h.approvals.Get(ctx, a.data.Agent, a.data.Call, a.data.Revision); err == nil && rec.GetCall().GetAgentId() != "" {
		agent, thread, asJSON = rec.GetCall().GetAgentId(), rec.GetCall().GetThreadId(), rec.GetCall().GetJsonEvents()
	}
	ev := &airlockv1.Event{
		EventId:  callref.System{Kind: callref.SystemTeams, ID: seen.Digest(a.act.Conversation.ID + "\x00" + a.act.ID)}.EventID(subject.UnauthorizedAttempt),
		AgentId:  agent,
		CallId:   a.data.Call,
		Revision: a.data.Revision,
		ThreadId: thread,
		Json:     asJSON,
		Actor:    &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "teams:" + user, Channel: Name},
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
			Action: calls.ActionWord(a.kind),
			Why:    fmt.Sprintf("Teams user %s (%s) is not mapped to an airlock principal in teams.users", user, a.act.From.Name),
		}},
	}
	if _, err := h.pub.Publish(ctx, ev, ""); err != nil {
		h.log.Error("could not record unauthorized Teams attempt", "user", user, "call", a.data.Call, "err", err)
	}
	h.log.Warn("unmapped Teams user refused", "user", user, "call", a.data.Call, "action", calls.ActionWord(a.kind))
	h.tell(ctx, a, fmt.Sprintf("Your Teams account (%s) is not linked to an airlock principal, so you cannot decide calls. "+
		"Ask an airlock admin to add it under teams.users. This attempt was recorded.", user))
	return "", false
}

// decide sends the decision to the approval service and shows the result
// on the card the action came from (the approval service also updates
// every channel's card through the notifiers; doing it here too answers
// the reviewer at once).
func (h *Activities) decide(ctx context.Context, a action, principal string) {
	d := a.data
	log := h.log.With("call", d.Call, "revision", d.Revision, "principal", principal, "action", calls.ActionWord(a.kind))
	if a.kind != airlockv1.DecisionKind_DECISION_KIND_APPROVE && d.Reason == "" {
		h.tell(ctx, a, "Write a reason before you "+calls.ActionWord(a.kind)+": the agent receives it. Nothing was decided.")
		return
	}
	if a.kind == airlockv1.DecisionKind_DECISION_KIND_APPROVE && !h.approvable(ctx, a) {
		return
	}
	req := &airlockv1.DecideRequest{
		AgentId: d.Agent, CallId: d.Call, Revision: d.Revision, Kind: a.kind, Reason: d.Reason,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: principal, Channel: Name},
	}
	if h.vouched != nil {
		groups, err := h.vouched(ctx, principal)
		if err != nil {
			// The approval service still knows approval.groups: decide with those.
			log.Warn("could not read the groups the console's single sign-on gave this person", "err", err)
		}
		req.Principal.Groups = groups
	}
	resp, err := h.approvals.Decide(ctx, req)
	link := notify.ConsoleURL(h.publicURL, d.Agent, d.Call)
	switch {
	case err == nil:
		log.Info("Teams decision sent", "changed", resp.GetChanged(), "message", resp.GetMessage())
		h.showOnCard(ctx, a, resp.GetRecord())
		if !resp.GetChanged() {
			h.tell(ctx, a, "Nothing changed: the call is "+calls.StateText(resp.GetRecord().GetState())+".")
		}
	case apierr.CodeOf(err) == apierr.NotAuthorized:
		log.Warn("approval service refused the Teams decision", "err", err)
		h.tell(ctx, a, "airlock refused your decision: "+apierr.MessageOf(err)+" The attempt was recorded.")
	case apierr.CodeOf(err) == apierr.Unavailable || errors.Is(err, context.DeadlineExceeded):
		log.Error("approval service unavailable for a Teams decision", "err", err)
		h.tell(ctx, a, "airlock's approval service did not answer, so your decision was not recorded. Try again in a minute, or decide in the console: "+link)
	default:
		// Already decided, superseded revision, unknown call...: show where it stands.
		log.Info("Teams decision not applied", "err", err)
		if rec, gerr := h.approvals.Get(ctx, d.Agent, d.Call, 0); gerr == nil && rec != nil {
			h.showOnCard(ctx, a, rec)
			h.tell(ctx, a, "This card was out of date: the call is "+calls.StateText(rec.GetState())+". "+apierr.MessageOf(err))
			return
		}
		h.tell(ctx, a, "airlock could not record your decision: "+apierr.MessageOf(err))
	}
}

// approvable reports whether the revision may be approved from Teams: its
// card shows every argument (a card that cannot has no Approve action).
func (h *Activities) approvable(ctx context.Context, a action) bool {
	rec, err := h.approvals.Get(ctx, a.data.Agent, a.data.Call, a.data.Revision)
	link := notify.ConsoleURL(h.publicURL, a.data.Agent, a.data.Call)
	switch {
	case err != nil:
		h.log.Warn("could not read the call before a Teams approval", "call", a.data.Call, "err", err)
		h.tell(ctx, a, "airlock could not read this call, so your approval was not recorded: "+apierr.MessageOf(err)+" Try again, or decide in the console: "+link)
		return false
	case !notify.ArgumentsFit(rec):
		h.tell(ctx, a, "A Teams card cannot show every argument of this call in full, so it is approved in the console, where every argument is shown: "+link)
		return false
	}
	return true
}

// showOnCard redraws the card the action came from (activity.replyToId).
func (h *Activities) showOnCard(ctx context.Context, a action, rec *airlockv1.ApprovalRecord) {
	if a.act.ReplyToID == "" || rec == nil {
		return
	}
	if err := h.bot.update(ctx, a.act.ServiceURL, a.act.Conversation.ID, a.act.ReplyToID, cardActivity(rec, h.publicURL, "")); err != nil {
		h.log.Warn("could not update the Teams card", "call", a.data.Call, "err", err)
	}
}

// tell answers the reviewer in the card's thread.
func (h *Activities) tell(ctx context.Context, a action, text string) {
	if a.act.ReplyToID == "" {
		return
	}
	if err := h.bot.reply(ctx, a.act.ServiceURL, a.act.Conversation.ID, a.act.ReplyToID, textActivity(text)); err != nil {
		h.log.Warn("could not answer the Teams user", "user", teamsUser(a.act), "err", err)
	}
}
