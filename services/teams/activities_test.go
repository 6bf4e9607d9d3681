package teams_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi/approvaltest"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// activitiesEnv is a notifier and the messaging endpoint (over real HTTP)
// against the Bot Connector fake, the local token issuer, a fake approval
// responder and real NATS.
type activitiesEnv struct {
	deps      svc.Deps
	f         *fakeConnector
	is        *issuer
	approvals *approvaltest.Fake
	notifier  *airlockteams.Notifier
	endpoint  string
}

func setup(t *testing.T, endorsements []string, recs ...*airlockv1.ApprovalRecord) *activitiesEnv {
	t.Helper()
	n := testenv.StartNATS(t)
	e := &activitiesEnv{f: startFakeConnector(t), is: startIssuer(t, endorsements...)}
	e.deps = config(t, n.URL(), e.f, e.is)
	e.approvals = approvaltest.Start(t, e.deps, recs...)
	h, err := airlockteams.NewActivities(context.Background(), e.deps, fastRetry)
	must(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.endpoint = srv.URL + airlockteams.MessagesPath
	e.notifier, err = airlockteams.NewNotifier(context.Background(), e.deps, fastRetry)
	must(t, err)
	return e
}

// serviceURL is the Bot Connector the activities come from (the fake).
func (e *activitiesEnv) serviceURL() string { return e.f.URL + "/" }

// announce posts rec's card and returns what the connector received.
func (e *activitiesEnv) announce(t *testing.T, rec *airlockv1.ApprovalRecord) connectorCall {
	t.Helper()
	if _, err := e.notifier.Announce(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return e.f.next(t, "post")
}

// send posts an activity with a genuine token and expects 200.
func (e *activitiesEnv) send(t *testing.T, activity map[string]any) {
	t.Helper()
	tok := e.is.token(t, claims{ServiceURL: e.serviceURL()})
	if code, body := postActivity(t, e.endpoint, tok, activity); code != http.StatusOK {
		t.Fatalf("a genuine activity answered %d %q", code, body)
	}
}

func TestSignedApproveActionApprovesAndUpdatesTheCard(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_approve")
	e := setup(t, []string{"msteams", "skype"}, rec)
	posted := e.announce(t, rec)

	e.send(t, submit(t, e.serviceURL(), posted, alice, airlockteams.VerbApprove, ""))

	got := e.approvals.NextDecide(t)
	if got.Principal.GetId() != "alice" || got.Principal.GetChannel() != "teams" || got.Kind != airlockv1.DecisionKind_DECISION_KIND_APPROVE ||
		got.CallId != "call_approve" || got.AgentId != "bot-1" || got.Revision != 1 {
		t.Fatalf("decision sent: %v", got)
	}
	up := e.f.next(t, "update")
	if up.Conversation != conversation || up.Activity != posted.ID || !strings.Contains(up.Card(t), "Approved by alice (teams)") {
		t.Fatalf("card updated to %s", up.Card(t))
	}
	if strings.Contains(up.Card(t), `"Action.Submit"`) {
		t.Fatal("the decided card still offers decisions")
	}
}

func TestUserMappedByTeamsIDDecides(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_bob")
	e := setup(t, nil, rec) // keys without endorsements are accepted
	posted := e.announce(t, rec)

	e.send(t, submit(t, e.serviceURL(), posted, bob, airlockteams.VerbRequestChanges, "use /srv/app/config.d instead"))

	got := e.approvals.NextDecide(t)
	if got.Principal.GetId() != "bob" || got.Kind != airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES || got.Reason != "use /srv/app/config.d instead" {
		t.Fatalf("decision sent: %v", got)
	}
	if up := e.f.next(t, "update"); !strings.Contains(up.Card(t), "Changes requested by bob (teams): use /srv/app/config.d instead") {
		t.Fatalf("card updated to %s", up.Card(t))
	}
}

func TestForgedExpiredMisaddressedAndReplayedActivitiesAreRefused(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_refused")
	e := setup(t, []string{"msteams"}, rec)
	posted := e.announce(t, rec)
	activity := submit(t, e.serviceURL(), posted, alice, airlockteams.VerbApprove, "")
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	now := time.Now()

	for _, tc := range []struct {
		name  string
		token string
	}{
		{"no_token", ""},
		{"forged_with_another_key_under_the_same_key_id", e.is.token(t, claims{ServiceURL: e.serviceURL(), Key: otherKey})},
		{"expired", e.is.token(t, claims{ServiceURL: e.serviceURL(), Expiry: now.Add(-10 * time.Minute), NotBefore: now.Add(-time.Hour)})},
		{"not_yet_valid", e.is.token(t, claims{ServiceURL: e.serviceURL(), NotBefore: now.Add(time.Hour), Expiry: now.Add(2 * time.Hour)})},
		{"for_another_bot", e.is.token(t, claims{ServiceURL: e.serviceURL(), Audience: "another-app-id"})},
		{"from_another_issuer", e.is.token(t, claims{ServiceURL: e.serviceURL(), Issuer: "https://sts.windows.net/evil/"})},
		{"issued_for_another_service_url", e.is.token(t, claims{ServiceURL: "https://smba.evil.example/"})},
		{"not_a_token", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := postActivity(t, e.endpoint, tc.token, activity)
			if code != http.StatusUnauthorized || !strings.Contains(body, "refused") && !strings.Contains(body, "token") {
				t.Fatalf("answered %d %q, want 401 with the reason", code, body)
			}
		})
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("%d refused activities reached the approval service", n)
	}

	// The genuine activity decides once; the same activity again (a fresh,
	// valid token: the replay of a captured request) decides nothing and is
	// answered with the call's state.
	e.send(t, activity)
	if got := e.approvals.NextDecide(t); got.Principal.GetId() != "alice" {
		t.Fatalf("decision from %v", got.Principal)
	}
	e.f.next(t, "update")
	code, body := postActivity(t, e.endpoint, e.is.token(t, claims{ServiceURL: e.serviceURL()}), activity)
	if code != http.StatusConflict || !strings.Contains(body, "already received") || !strings.Contains(body, "approved") {
		t.Fatalf("replay answered %d %q, want 409 with the current state", code, body)
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("a replayed activity reached the approval service %d times", n)
	}
}

func TestKeyNotEndorsedForTeamsIsRefused(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_endorse")
	e := setup(t, []string{"skype", "webchat"}, rec)
	posted := e.announce(t, rec)
	code, body := postActivity(t, e.endpoint, e.is.token(t, claims{ServiceURL: e.serviceURL()}),
		submit(t, e.serviceURL(), posted, alice, airlockteams.VerbApprove, ""))
	if code != http.StatusUnauthorized {
		t.Fatalf("a token signed by a key endorsed only for other channels answered %d %q", code, body)
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("the activity reached the approval service %d times", n)
	}
}

func TestUnmappedTeamsUserIsRefusedAndRecorded(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_unmapped")
	e := setup(t, []string{"msteams"}, rec)
	posted := e.announce(t, rec)

	e.send(t, submit(t, e.serviceURL(), posted, carol, airlockteams.VerbApprove, ""))

	ev := testenv.WaitForEvent(t, e.deps.JS, subject.OfCall("bot-1", "call_unmapped"), subject.UnauthorizedAttempt, 10*time.Second)
	if ev.GetActor().GetId() != "teams:aad-carol" || ev.GetActor().GetChannel() != "teams" || ev.GetActor().GetType() != airlockv1.ActorType_ACTOR_TYPE_HUMAN {
		t.Fatalf("recorded actor %v", ev.GetActor())
	}
	if a := ev.GetUnauthorizedAttempt(); a.GetAction() != "approve" || !strings.Contains(a.GetWhy(), "not mapped") {
		t.Fatalf("recorded %v", a)
	}
	if ev.GetThreadId() != "thread-9" || ev.GetRevision() != 1 {
		t.Fatalf("event lacks the call's thread or revision: %v", ev)
	}
	reply := e.f.next(t, "reply")
	if reply.Activity != posted.ID || !strings.Contains(reply.Body["text"].(string), "teams.users") {
		t.Fatalf("the user was told %v", reply.Body)
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("an unmapped user's action reached the approval service %d times", n)
	}
	e.f.none(t, "update")
}

func TestRejectWithoutAReasonDecidesNothing(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_reject")
	e := setup(t, []string{"msteams"}, rec)
	posted := e.announce(t, rec)

	e.send(t, submit(t, e.serviceURL(), posted, alice, airlockteams.VerbReject, "  "))
	if reply := e.f.next(t, "reply"); !strings.Contains(reply.Body["text"].(string), "Write a reason") {
		t.Fatalf("the user was told %v", reply.Body)
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("a rejection without a reason reached the approval service %d times", n)
	}

	e.send(t, submit(t, e.serviceURL(), posted, alice, airlockteams.VerbReject, "wrong file"))
	if got := e.approvals.NextDecide(t); got.Kind != airlockv1.DecisionKind_DECISION_KIND_REJECT || got.Reason != "wrong file" {
		t.Fatalf("decision sent: %v", got)
	}
	if up := e.f.next(t, "update"); !strings.Contains(up.Card(t), "Rejected by alice (teams): wrong file") {
		t.Fatalf("card updated to %s", up.Card(t))
	}
}

func TestActivitiesRefuseToStartWithoutTheBotsSecret(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	f := startFakeConnector(t)
	deps := config(t, n.URL(), f, startIssuer(t))
	deps.Config.Teams.AppPassword = ""
	_, err := airlockteams.NewActivities(context.Background(), deps)
	if err == nil || !strings.Contains(err.Error(), "teams.app_password") {
		t.Fatalf("started without a secret: %v", err)
	}
}
