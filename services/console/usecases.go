package console

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// useCases are what reviewers do, in one place that the HTML pages, the
// REST API (and through it the CLI) all call: read calls, decide, approve a
// thread, create and revoke standing grants, manage tokens. Handlers only
// translate forms and JSON into these and their results into pages and
// JSON; the approval service authorizes every decision.
type useCases struct {
	approvals *approvalapi.Client
	store     *store
	cfg       config.Config
	now       func() time.Time
	// recordToken records a token created or revoked (audit_events.go).
	recordToken func(p Principal, via string, rec tokenRecord, created bool)
}

// record reads the approval record of an agent's call: the given
// revision, or the newest when rev is 0.
func (u *useCases) record(ctx context.Context, agent, id string, rev uint32) (*airlockv1.ApprovalRecord, error) {
	if _, err := callref.New(agent, id, rev); err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	rec, err := u.approvals.Get(ctx, agent, id, rev)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.GetCall() == nil {
		return nil, apierr.New(apierr.NotFound, "no call %s of agent %s is waiting or was decided by a person", id, agent)
	}
	return rec, nil
}

// readable is record for p: a call p may not read (mayRead) is answered
// exactly as one that does not exist.
func (u *useCases) readable(ctx context.Context, p Principal, agent, id string, rev uint32) (*airlockv1.ApprovalRecord, error) {
	rec, err := u.record(ctx, agent, id, rev)
	if err == nil && !mayRead(p, rec) {
		return nil, apierr.New(apierr.NotFound, "no call %s of agent %s is waiting or was decided by a person", id, agent)
	}
	return rec, err
}

// grants lists the standing grants p may read: every grant for someone who
// reads every call, otherwise the ones p made or that allow only p's calls.
func (u *useCases) grants(ctx context.Context, p Principal, all bool) ([]*airlockv1.StandingGrant, error) {
	gs, err := u.approvals.ListGrants(ctx, all)
	if err != nil || p.CanRead() {
		return gs, err
	}
	mine := gs[:0:0]
	for _, g := range gs {
		if g.GetCreatedBy().GetId() == p.Name || g.GetOnBehalfOf() == p.Name {
			mine = append(mine, g)
		}
	}
	return mine, nil
}

// list asks the approval service for up to limit records, page after page
// (a page is what one reply carries), and keeps those f matches (the
// service filters too; filtering again keeps the inbox and the live feed
// consistent whatever the service does with a filter). Records are
// abridged: record reads one whole.
func (u *useCases) list(ctx context.Context, states []airlockv1.ApprovalState, f inboxFilter, limit uint32) ([]*airlockv1.ApprovalRecord, error) {
	req := &airlockv1.ListRequest{States: states, AgentId: f.Agent, Tool: f.Tool, MinRisk: calls.ParseRisk(f.Risk), ThreadId: f.Thread}
	var out []*airlockv1.ApprovalRecord
	for got := uint32(0); got < limit; {
		req.Limit = limit - got
		resp, err := u.approvals.List(ctx, req)
		if err != nil {
			return nil, err
		}
		got += uint32(len(resp.GetRecords()))
		for _, rec := range resp.GetRecords() {
			if f.matches(rec) {
				out = append(out, rec)
			}
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" || len(resp.GetRecords()) == 0 {
			break
		}
	}
	return out, nil
}

// inboxPage is how many calls the inbox shows at first, newest first: what
// it costs to open stays the same however many calls wait (airlock bench
// pending); its filters reach the others.
const inboxPage = 100

// pending lists the newest inboxPage calls waiting for a decision, newest
// first; more reports that others wait too.
func (u *useCases) pending(ctx context.Context, f inboxFilter) (recs []*airlockv1.ApprovalRecord, more bool, err error) {
	recs, err = u.list(ctx, []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}, f, inboxPage+1)
	if err != nil {
		return nil, false, err
	}
	sort.SliceStable(recs, func(i, j int) bool { return createdAt(recs[i]).After(createdAt(recs[j])) })
	if len(recs) > inboxPage {
		recs, more = recs[:inboxPage], true
	}
	return recs, more, nil
}

func createdAt(rec *airlockv1.ApprovalRecord) time.Time {
	if rec.GetCreatedAt() != nil {
		return rec.GetCreatedAt().AsTime()
	}
	return rec.GetCall().GetCreatedAt().AsTime()
}

// decision is one person's decision as a front-end received it.
type decision struct {
	Agent, Call string
	Revision    uint32
	Kind        airlockv1.DecisionKind
	// Reason is the rejection reason, the feedback, or an approval's comment.
	Reason string
	// SawDigest is the digest of the arguments the person was shown.
	SawDigest string
	// Edited arguments to approve instead (approve only).
	Edited *structpb.Struct
}

// decide sends one decision as p through channel ch and returns the
// service's answer. Rejections and requests for changes need a text, since
// the agent receives it.
func (u *useCases) decide(ctx context.Context, p Principal, ch string, d decision) (*airlockv1.DecideResponse, error) {
	if _, err := u.decidable(ctx, p, d.Agent, d.Call, d.Revision); err != nil {
		return nil, err
	}
	return u.decideRead(ctx, p, ch, d)
}

// decideRead is decide for a caller that has already read d's call
// revision and refused it unless mayDecide(p, rec), as decidable does (a
// one-tap link's check): the call is not read again. The approval service
// checks the revision, digest, state and approvers when it decides.
func (u *useCases) decideRead(ctx context.Context, p Principal, ch string, d decision) (*airlockv1.DecideResponse, error) {
	reason := strings.TrimSpace(d.Reason)
	switch d.Kind {
	case airlockv1.DecisionKind_DECISION_KIND_REJECT:
		if reason == "" {
			return nil, apierr.New(apierr.InvalidRequest, "say why you reject the call: the agent receives the reason")
		}
	case airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES:
		if reason == "" {
			return nil, apierr.New(apierr.InvalidRequest, "say what should change: the agent receives the feedback")
		}
	}
	if d.Edited != nil && d.Kind != airlockv1.DecisionKind_DECISION_KIND_APPROVE {
		return nil, apierr.New(apierr.InvalidRequest, "arguments can only be edited when approving")
	}
	return u.approvals.Decide(ctx, &airlockv1.DecideRequest{
		AgentId: d.Agent, CallId: d.Call, Revision: d.Revision, Principal: p.Actor(ch), Kind: d.Kind, Reason: reason,
		EditedArguments: d.Edited, ArgumentsDigest: d.SawDigest,
	})
}

// decidable reads the call p would decide (or make a grant from), and
// refuses it to someone who may not: someone who is not a reviewer, about a
// call that is not theirs to confirm (and they learn nothing about it, not
// even whether it exists). A reviewer's decision is checked against the
// call's approvers by the approval service.
func (u *useCases) decidable(ctx context.Context, p Principal, agent, id string, rev uint32) (*airlockv1.ApprovalRecord, error) {
	rec, err := u.record(ctx, agent, id, rev)
	switch {
	case p.CanDecide():
		return rec, err
	case err != nil || !mayDecide(p, rec):
		return nil, notYours(p)
	}
	return rec, nil
}

// notYours refuses a decision from someone who is neither a reviewer nor
// the requester of a self-confirmed call.
func notYours(p Principal) error {
	return apierr.New(apierr.NotAuthorized, "%s cannot decide this call: deciding takes the reviewer role, or being the person a call acts for when its rule asks them to confirm it themselves", p.Name)
}

// cancel withdraws agent's pending call id as p through channel ch, with
// the reason the agent receives. The approval service decides whether p
// may (calls.Directory.MayCancel: an approver of the call or the person it
// acts for; or an operator, which the console vouches for) and records a refusal; someone who may not read the call is
// refused here, as for a decision, and learns nothing about it.
func (u *useCases) cancel(ctx context.Context, p Principal, ch, agent, id, reason string) (*airlockv1.CancelResponse, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, apierr.New(apierr.InvalidRequest, "say why you cancel the call: the agent receives the reason")
	}
	rec, err := u.record(ctx, agent, id, 0)
	switch {
	case !p.CanRead() && (err != nil || !mayRead(p, rec)):
		return nil, apierr.New(apierr.NotAuthorized, "%s cannot cancel this call: canceling takes being among its approvers, the person it acts for or an admin", p.Name)
	case err != nil:
		return nil, err
	}
	by := p.Actor(ch)
	by.Operator = p.Operator()
	return u.approvals.Cancel(ctx, &airlockv1.CancelRequest{AgentId: agent, CallId: id, By: by, Reason: reason})
}

// threadPreview lists the pending calls of an agent's thread, oldest
// first, with their risks summed up: what "approve all of this thread"
// shows before it is confirmed.
func (u *useCases) threadPreview(ctx context.Context, agent, thread string) (*threadPreview, error) {
	recs, err := u.list(ctx, []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}, inboxFilter{Agent: agent, Thread: thread}, 500)
	if err != nil {
		return nil, err
	}
	tp := &threadPreview{Agent: agent, Thread: thread}
	counts := map[airlockv1.Risk]int{}
	var highest airlockv1.Risk
	for _, rec := range recs {
		if rec.GetCall().GetAgentId() != agent || rec.GetCall().GetThreadId() != thread {
			continue
		}
		v := newCallView(rec)
		if v.Abridged || v.ArgsCut {
			tp.Skipped = append(tp.Skipped, v) // nobody approves arguments they were not shown
			continue
		}
		tp.Calls = append(tp.Calls, v)
		r := rec.GetDecision().GetRisk()
		counts[r]++
		highest = max(highest, r)
	}
	sort.SliceStable(tp.Calls, func(i, j int) bool { return tp.Calls[i].Created.Before(tp.Calls[j].Created) })
	sort.SliceStable(tp.Skipped, func(i, j int) bool { return tp.Skipped[i].Created.Before(tp.Skipped[j].Created) })
	var parts []string
	for r := airlockv1.Risk_RISK_CRITICAL; r >= airlockv1.Risk_RISK_UNSPECIFIED; r-- {
		if n := counts[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, calls.RiskName(r)))
		}
	}
	tp.ByRisk, tp.Highest, tp.HighRisk = strings.Join(parts, ", "), calls.RiskName(highest), highest >= airlockv1.Risk_RISK_HIGH
	return tp, nil
}

// shownCall is one call revision a reviewer was shown in a thread
// preview, with the digest of the arguments they saw.
type shownCall struct {
	Call     string
	Revision uint32
	Digest   string
}

// parseShownCall reads a thread form's call value, "<call>.<revision>.<digest>".
func parseShownCall(v string) (shownCall, error) {
	id, rest, _ := strings.Cut(v, ".")
	revText, digest, _ := strings.Cut(rest, ".")
	rev, err := revisionParam(revText)
	if err != nil {
		return shownCall{}, err
	}
	return shownCall{Call: id, Revision: rev, Digest: digest}, nil
}

// approveThread approves exactly the listed revisions of an agent's thread
// that are still pending, each only with the arguments the reviewer was
// shown (their digest): what the preview listed.
func (u *useCases) approveThread(ctx context.Context, p Principal, ch, agent, thread string, shown []shownCall, reason string) (*airlockv1.ApproveThreadResponse, error) {
	if err := validAgent(agent); err != nil {
		return nil, err
	}
	if strings.TrimSpace(thread) == "" {
		return nil, apierr.New(apierr.InvalidRequest, "no thread given")
	}
	req := &airlockv1.ApproveThreadRequest{AgentId: agent, ThreadId: thread, Principal: p.Actor(ch), Reason: strings.TrimSpace(reason)}
	for _, c := range shown {
		ref, err := callref.New(agent, c.Call, c.Revision)
		if err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "%v", err)
		}
		if c.Digest == "" {
			return nil, apierr.New(apierr.InvalidRequest, "call %s names no arguments digest: approve a thread with each call's arguments_digest as you were shown it", c.Call)
		}
		cr := ref.Proto()
		cr.ArgumentsDigest = c.Digest
		req.Calls = append(req.Calls, cr)
	}
	if len(req.Calls) == 0 {
		return nil, apierr.New(apierr.InvalidRequest, "no calls listed: open the call and confirm the calls of its thread you were shown")
	}
	return u.approvals.ApproveThread(ctx, req)
}

// threadSummary says what approving a thread did.
func threadSummary(resp *airlockv1.ApproveThreadResponse) string {
	approved := 0
	for _, r := range resp.GetResults() {
		if r.GetChanged() {
			approved++
		}
	}
	msg := fmt.Sprintf("approved %d call(s) of the thread", approved)
	if n := len(resp.GetRefused()); n > 0 {
		var parts []string
		for id, why := range resp.GetRefused() {
			parts = append(parts, id+": "+why)
		}
		sort.Strings(parts)
		msg += fmt.Sprintf("; %d refused (%s)", n, strings.Join(parts, "; "))
	}
	return msg
}

// grantInput is an "always allow" as a front-end received it.
type grantInput struct {
	FromAgent, FromCall string
	FromRevision        uint32
	// Values pins arguments exactly (JSON pointer → value); Globs matches
	// string arguments; OnlyListed refuses arguments neither names.
	Values     map[string]*structpb.Value
	Globs      map[string]string
	Any        []string
	OnlyListed bool
	// Ranges hold number arguments within closed ranges.
	Ranges map[string]*airlockv1.NumberRange
	// Prefixes remember a shell command by the words it starts with (JSON
	// pointer → prefix); Digest pins the exact arguments reviewed.
	Prefixes map[string]string
	Digest   string
	Uses     int
	TTL      time.Duration
}

// grant is the standing grant in would create (the approval service takes
// the agent, server and tool from the call).
func (u *useCases) grant(rec *airlockv1.ApprovalRecord, in grantInput) *airlockv1.StandingGrant {
	c := rec.GetCall()
	g := &airlockv1.StandingGrant{AgentId: c.GetAgentId(), Server: c.GetServer(), Tool: c.GetTool(), FromCallId: c.GetCallId(),
		ArgumentValues: in.Values, ArgumentGlobs: in.Globs, ArgumentRanges: in.Ranges, AnyArguments: in.Any, OnlyListedArguments: in.OnlyListed,
		CommandPrefixes: in.Prefixes, ArgumentsDigest: in.Digest}
	if in.Uses > 0 {
		g.LimitedUses, g.UsesLeft = true, uint32(in.Uses)
	}
	if in.TTL > 0 {
		g.ExpiresAt = timestamppb.New(u.now().Add(in.TTL))
	}
	return g
}

// createGrant creates a standing grant from a call as p.
func (u *useCases) createGrant(ctx context.Context, p Principal, ch string, in grantInput) (*airlockv1.StandingGrant, error) {
	if in.FromCall == "" {
		return nil, apierr.New(apierr.InvalidRequest, "a grant is created from a call: give its agent and call id")
	}
	if in.Uses < 0 {
		return nil, apierr.New(apierr.InvalidRequest, "uses must be 0 (unlimited) or more")
	}
	for ptr, r := range in.Ranges {
		if why := grant.CheckRange(r); why != "" {
			return nil, apierr.New(apierr.InvalidRequest, "the range on %s cannot be used: %s", ptr, why)
		}
	}
	rec, err := u.decidable(ctx, p, in.FromAgent, in.FromCall, in.FromRevision)
	if err != nil {
		return nil, err
	}
	g := u.grant(rec, in)
	return u.approvals.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: in.FromAgent, FromCallId: in.FromCall, FromRevision: in.FromRevision,
		Grant: g, By: p.Actor(ch), RequestId: randomSecret(12)})
}

func (u *useCases) revokeGrant(ctx context.Context, p Principal, ch, id string) (*airlockv1.StandingGrant, error) {
	return u.approvals.RevokeGrant(ctx, &airlockv1.RevokeGrantRequest{GrantId: id, By: p.Actor(ch)})
}

// tokens lists the tokens p may see: their own, or everyone's for an admin.
func (u *useCases) tokens(ctx context.Context, p Principal) ([]tokenRecord, error) {
	owner := p.Name
	if p.Has(config.RoleAdmin) {
		owner = ""
	}
	recs, err := u.store.tokens(ctx, owner)
	if err != nil {
		return nil, err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].CreatedAt.After(recs[j].CreatedAt) })
	return recs, nil
}

// maxTokenDays bounds a token's life: a leaked token must run out.
const maxTokenDays = 366

// createToken makes a personal token for p, or an agent token (admins only),
// and returns its secret, shown once. The token is recorded as created by p
// through channel via (never its secret).
func (u *useCases) createToken(ctx context.Context, p Principal, via, name, kind, agent, onBehalfOf string, days int) (string, tokenRecord, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "name the token after what will use it, e.g. \"ci\" or \"laptop\"")
	}
	if len(name) > 100 {
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "the token name is longer than 100 characters")
	}
	ttl := u.cfg.Console.TokenTTL
	if days > maxTokenDays {
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "a token lives at most %d days: create a new one when it runs out", maxTokenDays)
	}
	if days > 0 {
		ttl = time.Duration(days) * 24 * time.Hour
	}
	rec := tokenRecord{Name: name, Kind: TokenPersonal, Owner: p.Name, OwnerSSO: p.sso}
	switch kind {
	case "", TokenPersonal:
	case TokenAgent:
		if !p.Has(config.RoleAdmin) {
			return "", tokenRecord{}, apierr.New(apierr.NotAuthorized, "only admins create agent tokens")
		}
		if err := validAgent(strings.TrimSpace(agent)); err != nil {
			return "", tokenRecord{}, err
		}
		rec.Kind, rec.AgentID, rec.OnBehalfOf = TokenAgent, strings.TrimSpace(agent), strings.TrimSpace(onBehalfOf)
	default:
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "token kind %q: use personal or agent", kind)
	}
	secret, rec, err := u.store.newToken(ctx, rec, ttl)
	if err == nil {
		u.recordToken(p, via, rec, true)
	}
	return secret, rec, err
}

// revokeToken revokes token id for p and records that p revoked it
// through channel via.
func (u *useCases) revokeToken(ctx context.Context, p Principal, via, id string) error {
	rec, err := u.store.revokeToken(ctx, id, p)
	if err == nil {
		u.recordToken(p, via, rec, false)
	}
	return err
}
