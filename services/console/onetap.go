package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/onetap"
)

// One-tap links of approval mails (email.one_tap, package onetap).
//
// The decision is made signed in: the link's token only pre-binds what may
// be decided (call, revision, arguments digest, approver, approve or deny,
// until the call's deadline); the decision itself needs the named
// approver's console session (single sign-on or a local user) and a POST
// carrying that session's anti-forgery token, the same checks as every
// console form. Threats this answers:
//   - a mail scanner or link prefetcher that GETs every link: GET only
//     shows the call (and, signed out, the sign-in page);
//   - a forwarded mail or a leaked link: whoever opens it is not signed in
//     as the approver it names, and is refused (recorded as an
//     unauthorized_attempt);
//   - a link used after the call was revised or its arguments changed: it
//     names the old revision and digest, and is refused (the approval
//     service refuses a stale revision and another digest too);
//   - a replay (back button, a second replica): the first POST records the
//     use with a KV create in the console bucket (onetap.<call key>.<hash
//     of the approver>), so the approver's approve and deny links for that
//     revision work once on every replica.

// oneTapRoute is the console route of every link.
const oneTapRoute = onetap.PathPrefix + ":token"

// oneTapUse is the record of a link used, under Token.UseKey.
type oneTapUse struct {
	Action   string    `json:"action"`
	Approver string    `json:"approver"`
	UsedAt   time.Time `json:"used_at"`
	// Expires is the link's expiry: the record may be swept after it.
	Expires time.Time `json:"expires"`
}

// oneTapView is the page a link opens: the call and one button, or why the
// link cannot be used and where to go instead.
type oneTapView struct {
	layout
	Call  callView
	Found bool
	// Action is "approve" or "deny"; PostPath the link's own path, where
	// the button posts.
	Action, PostPath string
	// Refused says why the link cannot be used; CallPath is where to decide instead.
	Refused, CallPath string
}

func (con *Console) oneTapPage(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	v, err := con.oneTapCheck(c)
	if err != nil {
		return con.oneTapRefused(c, v, err)
	}
	return con.render(c, http.StatusOK, "onetap", v.oneTapView)
}

// oneTapDecide decides with a link: the checks of the page, then the use
// recorded (once, on any replica), then the decision through the approval
// service as the signed-in approver, as the console's own forms decide.
func (con *Console) oneTapDecide(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	v, err := con.oneTapCheck(c)
	if err != nil {
		return con.oneTapRefused(c, v, err)
	}
	tok, p := v.token, principal(c)
	ctx := c.Request().Context()
	use, _ := json.Marshal(oneTapUse{Action: tok.Action, Approver: tok.Approver, UsedAt: con.opts.Now().UTC(), Expires: tok.Expires})
	if _, err := con.store.kv.Create(ctx, tok.UseKey(), use); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return con.oneTapRefused(c, v, con.oneTapUsed(ctx, tok))
		}
		return apierr.Wrap(apierr.Unavailable, err, "record the use of the link")
	}
	d := decision{Agent: tok.Agent, Call: tok.Call, Revision: tok.Revision, SawDigest: tok.Digest,
		Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Reason: strings.TrimSpace(c.FormValue("reason"))}
	if tok.Action == onetap.Deny {
		d.Kind = airlockv1.DecisionKind_DECISION_KIND_REJECT
		if d.Reason == "" {
			d.Reason = "rejected from the approval mail (no reason given)"
		}
	}
	// oneTapCheck read this revision and refused it unless p may decide it
	// (YouMayDecide, which implies decidable's mayDecide).
	resp, err := con.use.decideRead(ctx, p, oneTapChannel, d)
	if err != nil {
		code := apierr.CodeOf(err)
		if code == apierr.Internal {
			con.log.Error("one-tap decision failed", "call", tok.Call, "err", err)
		}
		return con.oneTapRefused(c, v, apierr.New(code, "The decision could not be made (%s). The link is now used: open the call's page to decide there.", apierr.MessageOf(err)))
	}
	return con.flashAndRedirect(c, callRevPath(tok.Agent, tok.Call, tok.Revision), decideMessage(resp, "done"))
}

// oneTapChannel names decisions made with a link in the trail.
const oneTapChannel = "email"

// oneTapChecked is a link that may be used now, with its page.
type oneTapChecked struct {
	*oneTapView
	token onetap.Token
}

// oneTapCheck reads the link of the request and says whether the
// signed-in person may decide with it now; it decides nothing and uses
// nothing. The view names the call's page whenever the link names a call.
func (con *Console) oneTapCheck(c echo.Context) (oneTapChecked, error) {
	v := oneTapChecked{oneTapView: &oneTapView{layout: layout{Title: "Decide from the mail", Nav: "inbox"}}}
	if con.oneTap == nil {
		return v, apierr.New(apierr.NotFound, "one-tap links are turned off here (email.one_tap): open the call's page from the mail to decide")
	}
	tok, err := con.oneTap.Parse(c.Param("token"), con.opts.Now())
	if tok.Agent != "" {
		v.CallPath = callRevPath(tok.Agent, tok.Call, tok.Revision)
	}
	switch {
	case errors.Is(err, onetap.ErrExpired):
		return v, apierr.New(apierr.Conflict, "This link has expired (a link lasts until the call's deadline at the latest): open the call's page to see what became of it.")
	case err != nil:
		return v, apierr.New(apierr.InvalidRequest, "This link is not one airlock made (it was altered or cut short): open the call's page from the mail, or find the call in your inbox.")
	}
	v.token, v.Action, v.PostPath = tok, tok.Action, onetap.PathPrefix+url.PathEscape(c.Param("token"))
	ctx := c.Request().Context()
	p := principal(c)
	if p.Via != ViaSession {
		// A link is for a person at the console, not for automation
		// holding their API token (which decides over the REST API).
		err := apierr.New(apierr.NotAuthorized, "A link from an approval mail decides only in its approver's signed-in console session, not with an API token: open it in your browser, or decide over the REST API.")
		con.recordOneTapRefused(c, p, tok, err)
		return v, err
	}
	if p.Name != tok.Approver {
		err := apierr.New(apierr.NotAuthorized, "This link was mailed to %s, and you are signed in as %s: a link decides only for the approver it was mailed to. Open the call's page to decide as yourself.", tok.Approver, p.Name)
		con.recordOneTapRefused(c, p, tok, err)
		return v, err
	}
	if used := con.oneTapUsed(ctx, tok); used != nil {
		return v, used
	}
	rec, err := con.use.record(ctx, tok.Agent, tok.Call, 0)
	if err != nil {
		return v, err
	}
	cur := max(rec.GetCall().GetRevision(), 1)
	switch {
	case cur != tok.Revision:
		return v, apierr.New(apierr.Conflict, "This link is for revision %d of the call, which the agent has since revised (now revision %d): open the call's page to review the new revision there.", tok.Revision, cur)
	case rec.GetArgumentsDigest() != tok.Digest:
		return v, apierr.New(apierr.Conflict, "The call's arguments are no longer those the mail showed: open the call's page to review them there.")
	case rec.GetEditedArguments() != nil || rec.GetEditedArgumentsPreview() != "":
		// What would run is a reviewer's edit, not what the mail showed.
		return v, apierr.New(apierr.Conflict, "A reviewer edited the arguments since the mail was sent: open the call's page to review the edited ones there.")
	case rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
		return v, apierr.New(apierr.AlreadyDecided, "The call is already %s: there is nothing left to decide. Open the call's page to see who decided it.", calls.StateText(rec.GetState()))
	}
	v.Call, v.Found = newCallView(rec), true
	v.Title = "Decide " + v.Call.FullTool + " · " + v.Call.ID
	con.asPerson(p, rec)(&v.Call)
	v.Call.UnknownTool = con.unknownTool(ctx, p, rec.GetCall())
	if !v.Call.YouMayDecide {
		err := apierr.New(apierr.NotAuthorized, "%s. Open the call's page to see who can decide it.", con.whyNot(p, rec))
		con.recordOneTapRefused(c, p, tok, err)
		return v, err
	}
	if tok.Action == onetap.Approve && v.Call.ArgsCut {
		return v, apierr.New(apierr.Conflict, "These arguments are too large to show whole on a page, so they cannot be approved from a link: open the call's page.")
	}
	return v, nil
}

// oneTapUsed is the refusal of a link already used (nil while unused, or
// when the record cannot be read: the POST's create is what counts).
func (con *Console) oneTapUsed(ctx context.Context, tok onetap.Token) error {
	e, err := con.store.kv.Get(ctx, tok.UseKey())
	if err != nil {
		return nil
	}
	var u oneTapUse
	_ = json.Unmarshal(e.Value(), &u)
	verb := u.Action // onetap.Approve or onetap.Deny, as a verb
	if verb == "" {
		verb = "decide"
	}
	return apierr.New(apierr.Conflict, "This link was already used (%s's links for this revision work once: %s at %s): open the call's page to see where it stands.",
		tok.Approver, verb, u.UsedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// oneTapRefused renders why a link cannot be used, with the call's page
// to go to instead, with the error's status.
func (con *Console) oneTapRefused(c echo.Context, v oneTapChecked, err error) error {
	code := apierr.CodeOf(err)
	if code == apierr.Internal {
		return err // the error handler logs it and says so
	}
	v.Refused, v.Found = apierr.MessageOf(err), false
	return con.render(c, apierr.HTTPStatus(code), "onetap", v.oneTapView)
}

// recordOneTapRefused records a link refused to the signed-in person as an
// unauthorized_attempt on the link's call and revision (its MAC is
// checked: the reference is airlock's), without the token (it is the
// approver's, not theirs).
func (con *Console) recordOneTapRefused(c echo.Context, p Principal, tok onetap.Token, err error) {
	ev := &airlockv1.Event{AgentId: tok.Agent, CallId: tok.Call, Revision: tok.Revision, Actor: humanActor(p.Name, oneTapChannel),
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
			Action: c.Request().Method + " " + onetap.PathPrefix + "…", Why: err.Error()}}}
	con.publish(ev)
}

// sweepOneTap deletes the use records of links that have expired: an
// expired link is refused for its expiry alone.
func (s *store) sweepOneTap(ctx context.Context) error {
	return s.purgeStale(ctx, "onetap.>", "used one-tap links", func(value []byte) bool {
		var u oneTapUse
		return json.Unmarshal(value, &u) != nil || s.now().After(u.Expires)
	})
}
