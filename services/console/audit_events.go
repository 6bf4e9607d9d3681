package console

import (
	"context"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// The console records what it alone witnesses — sign-ins, API tokens
// created and revoked, requests refused for the signed-in person's role —
// as system-wide events on airlock.evt._system.<id>.<type>. A failure to
// record is logged; the request it records is answered either way.

// maxActorLen bounds a name someone typed into the sign-in form.
const maxActorLen = 200

func (con *Console) recordSystem(id string, actor *airlockv1.Actor, ev *airlockv1.Event) {
	ev.AgentId, ev.CallId, ev.Actor = subject.SystemAgent, id, actor
	con.publish(ev)
}

// publish records ev, logging a failure.
func (con *Console) publish(ev *airlockv1.Event) {
	// Not the request's context: a browser that goes away still gets recorded.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := con.pub.Publish(ctx, ev, ""); err != nil {
		con.log.Error("console: recording an event failed", "agent", ev.GetAgentId(), "id", ev.GetCallId(), "actor", ev.GetActor().GetId(), "err", err)
	}
}

// humanActor is whoever typed name, as an event can carry it: valid UTF-8
// (protobuf refuses anything else, and the event would be lost) cut on a
// character boundary.
func humanActor(name, channel string) *airlockv1.Actor {
	name = calls.Cut(strings.ToValidUTF8(name, "\uFFFD"), maxActorLen)
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: name, Channel: channel}
}

// recordSignIn records a sign-in attempt by name, accepted or not, from
// the client's address (X-Forwarded-For only from console.trusted_proxies).
func (con *Console) recordSignIn(c echo.Context, name string, ok bool, why string) {
	con.recordSignInBy(c, "password", name, ok, why)
}

// recordSignInBy is recordSignIn for a method ("password", "oidc").
func (con *Console) recordSignInBy(c echo.Context, method, name string, ok bool, why string) {
	con.recordSystem(subject.ConsoleCall, humanActor(name, "console"), &airlockv1.Event{Body: &airlockv1.Event_SignIn{SignIn: &airlockv1.SignIn{
		Ok: ok, Method: method, Why: why, RemoteAddr: con.clientAddr(c)}}})
}

// recordToken records a token created (secret never included) or revoked.
func (con *Console) recordToken(p Principal, channel string, rec tokenRecord, created bool) {
	tok := callref.System{Kind: callref.SystemToken, ID: rec.ID}
	ev := &airlockv1.Event{EventId: tok.EventID(subject.TokenRevoked), Body: &airlockv1.Event_TokenRevoked{TokenRevoked: &airlockv1.TokenRevoked{TokenId: rec.ID, Owner: rec.Owner}}}
	if created {
		tc := &airlockv1.TokenCreated{TokenId: rec.ID, Name: rec.Name, Kind: rec.Kind, Owner: rec.Owner, AgentId: rec.AgentID}
		if !rec.ExpiresAt.IsZero() {
			tc.ExpiresAt = timestamppb.New(rec.ExpiresAt)
		}
		ev = &airlockv1.Event{EventId: tok.EventID(subject.TokenCreated), Body: &airlockv1.Event_TokenCreated{TokenCreated: tc}}
	}
	con.recordSystem(rec.ID, humanActor(p.Name, channel), ev)
}

// refusedIf records err when it refuses the signed-in person (not_authorized), and returns it.
func (con *Console) refusedIf(c echo.Context, err error) error {
	if apierr.CodeOf(err) == apierr.NotAuthorized {
		con.recordRefused(c, principal(c), err.Error())
	}
	return err
}

// recordRefused records a request refused for the principal's role.
func (con *Console) recordRefused(c echo.Context, p Principal, why string) {
	con.recordSystem(subject.ConsoleCall, humanActor(p.Name, channel(c)), &airlockv1.Event{Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
		Action: c.Request().Method + " " + c.Path(), Why: why + " (" + strings.ToValidUTF8(c.Request().URL.Path, "\uFFFD") + ")"}}})
}
