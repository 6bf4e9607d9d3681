package slack_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi/approvaltest"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// interactionsEnv is a notifier and an interactions endpoint (served over
// real HTTP) against the Slack fake, a fake approval responder and real NATS.
type interactionsEnv struct {
	deps      svc.Deps
	f         *fakeSlack
	approvals *approvaltest.Fake
	notifier  *airlockslack.Notifier
	endpoint  string
}

func setup(t *testing.T, recs ...*airlockv1.ApprovalRecord) *interactionsEnv {
	t.Helper()
	n := testenv.StartNATS(t)
	f := startFakeSlack(t)
	deps := config(t, n.URL(), f)
	e := &interactionsEnv{deps: deps, f: f, approvals: approvaltest.Start(t, deps, recs...)}
	e.endpoint = e.serve(t)
	var err error
	if e.notifier, err = airlockslack.NewNotifier(context.Background(), deps, fastRetry); err != nil {
		t.Fatal(err)
	}
	return e
}

// serve starts one more replica of the endpoint and returns its URL.
func (e *interactionsEnv) serve(t *testing.T) string {
	t.Helper()
	h, err := airlockslack.NewInteractions(context.Background(), e.deps, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return srv.URL + "/slack/interactions"
}

// announce posts rec's card and returns it with its channel id and ts.
func (e *interactionsEnv) announce(t *testing.T, rec *airlockv1.ApprovalRecord) (apiCall, string, string) {
	t.Helper()
	ref, err := e.notifier.Announce(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	posted := e.f.next(t, "chat.postMessage")
	ch, ts, _ := strings.Cut(ref, "/")
	return posted, ch, ts
}

// click posts a correctly signed interaction and checks it is acknowledged
// with 200 before the work it asks for is done (ackWhileHeld).
func (e *interactionsEnv) click(t *testing.T, payload map[string]any) string {
	t.Helper()
	code, resp := ackWhileHeld(t, e.f, e.endpoint, payload)
	if code != http.StatusOK {
		t.Fatalf("signed interaction answered %d %q", code, resp)
	}
	return resp
}

func TestSignedApproveClickApprovesAndUpdatesTheCard(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_approve")
	e := setup(t, rec)
	posted, ch, ts := e.announce(t, rec)

	e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionApprove))

	req := e.approvals.NextDecide(t)
	want := &airlockv1.DecideRequest{
		AgentId: "bot-1", CallId: "call_approve", Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "slack"},
	}
	if !proto.Equal(req, want) {
		t.Fatalf("decision sent: %v\nwant %v", req, want)
	}
	upd := e.f.next(t, "chat.update")
	if upd.Form.Get("channel") != ch || upd.Form.Get("ts") != ts {
		t.Fatalf("updated %s/%s, want the clicked card %s/%s", upd.Form.Get("channel"), upd.Form.Get("ts"), ch, ts)
	}
	if text := cardStrings(t, upd.Blocks()); !strings.Contains(text, "*Approved* by *alice* (slack)") {
		t.Fatalf("card after approval:\n%s", text)
	}
	if len(buttonValues(t, upd.Blocks())) != 0 {
		t.Fatal("the approved card still has buttons")
	}
}

func TestForgedStaleAndReplayedInteractionsAreRefused(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_refuse")
	e := setup(t, rec)
	posted, ch, ts := e.announce(t, rec)
	body := formBody(buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionApprove))
	other := formBody(buttonClick(t, "U_BOB", posted, ch, ts, airlockslack.ActionApprove))

	for _, tt := range []struct {
		name   string
		header http.Header
		body   string
	}{
		{"signature_made_with_another_secret", sign("not-the-secret", time.Now(), body), body},
		{"body_changed_after_signing", sign(signingSecret, time.Now(), other), body},
		{"timestamp_six_minutes_old", sign(signingSecret, time.Now().Add(-6*time.Minute), body), body},
		{"timestamp_six_minutes_ahead", sign(signingSecret, time.Now().Add(6*time.Minute), body), body},
		{"no_signature_headers", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, body},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := post(t, e.endpoint, tt.header, tt.body)
			if code != http.StatusUnauthorized {
				t.Fatalf("answered %d %q, want 401", code, msg)
			}
		})
	}

	t.Run("replay_inside_the_window_even_to_another_replica", func(t *testing.T) {
		h := sign(signingSecret, time.Now(), body)
		if code, msg := post(t, e.endpoint, h, body); code != http.StatusOK {
			t.Fatalf("first delivery answered %d %q", code, msg)
		}
		for _, endpoint := range []string{e.endpoint, e.serve(t)} {
			if code, msg := post(t, endpoint, h, body); code != http.StatusConflict {
				t.Fatalf("replay answered %d %q, want 409", code, msg)
			}
		}
	})

	// Only the one genuine delivery reached the approval service.
	if got := e.approvals.NextDecide(t); got.Principal.GetId() != "alice" {
		t.Fatalf("decision from %v", got.Principal)
	}
	e.f.next(t, "chat.update")
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("%d refused interactions reached the approval service", n)
	}
}

func TestUnmappedSlackUserIsRefusedAndRecorded(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_unmapped")
	e := setup(t, rec)
	posted, ch, ts := e.announce(t, rec)

	e.click(t, buttonClick(t, "U_CAROL", posted, ch, ts, airlockslack.ActionApprove))

	ev := testenv.WaitForEvent(t, e.deps.JS, subject.OfCall("bot-1", "call_unmapped"), subject.UnauthorizedAttempt, 10*time.Second)
	if ev.GetActor().GetId() != "slack:U_CAROL" || ev.GetActor().GetChannel() != "slack" || ev.GetActor().GetType() != airlockv1.ActorType_ACTOR_TYPE_HUMAN {
		t.Fatalf("recorded actor %v", ev.GetActor())
	}
	if a := ev.GetUnauthorizedAttempt(); a.GetAction() != "approve" || !strings.Contains(a.GetWhy(), "not mapped") {
		t.Fatalf("recorded %v", a)
	}
	if ev.GetThreadId() != "thread-9" || ev.GetRevision() != 1 {
		t.Fatalf("event lacks the call's thread or revision: %v", ev)
	}
	eph := e.f.next(t, "chat.postEphemeral")
	if eph.Form.Get("user") != "U_CAROL" || !strings.Contains(eph.Form.Get("text"), "slack.users") {
		t.Fatalf("the user was told %v", eph.Form)
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatalf("an unmapped user's click reached the approval service %d times", n)
	}
	e.f.none(t, "chat.update")
}

func TestApproverRefusedByTheApprovalServiceIsTold(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_notapprover")
	e := setup(t, rec)
	posted, ch, ts := e.announce(t, rec)

	e.click(t, buttonClick(t, "U_BOB", posted, ch, ts, airlockslack.ActionApprove))

	if got := e.approvals.NextDecide(t); got.GetPrincipal().GetId() != "bob" {
		t.Fatalf("decision sent for %v; the service, not Slack, must judge bob", got.GetPrincipal())
	}
	eph := e.f.next(t, "chat.postEphemeral")
	if text := eph.Form.Get("text"); !strings.Contains(text, "refused") || !strings.Contains(text, "bob is not among the approvers") {
		t.Fatalf("bob was told %q", text)
	}
	e.f.none(t, "chat.update")
	if r, _ := e.approvals.Get("call_notapprover"); r.State != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		t.Fatalf("state became %v", r.State)
	}
}

func TestRejectAndRequestChangesAskForTheTextInAModal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, action, text string
		kind               airlockv1.DecisionKind
		shown              string
	}{
		{"reject_sends_the_reason", airlockslack.ActionReject, "not during the release freeze",
			airlockv1.DecisionKind_DECISION_KIND_REJECT, "*Rejected* by *alice* (slack): `not during the release freeze`"},
		{"request_changes_sends_the_feedback", airlockslack.ActionRequestChanges, "write to /srv/staging instead",
			airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "*Changes requested* by *alice* (slack): `write to /srv/staging instead`"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRecord(t, "call_modal")
			e := setup(t, rec)
			posted, ch, ts := e.announce(t, rec)

			e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, tt.action))
			opened := e.f.next(t, "views.open")
			if !strings.Contains(string(opened.Body), `"callback_id":"`+airlockslack.CallbackReason+`"`) || !strings.Contains(string(opened.Body), `"trigger_id":"1337.42.`) {
				t.Fatalf("views.open got %s", opened.Body)
			}
			if n := len(e.approvals.Decides); n != 0 {
				t.Fatal("opening the modal already decided")
			}

			if resp := e.click(t, viewSubmission(t, "U_ALICE", opened, "  "+tt.text+"\n")); resp != "" {
				t.Fatalf("submission answered %q; an empty answer closes the modal", resp)
			}
			req := e.approvals.NextDecide(t)
			if req.Kind != tt.kind || req.Reason != tt.text || req.CallId != "call_modal" || req.Revision != 1 || req.Principal.GetId() != "alice" {
				t.Fatalf("decision sent: %v", req)
			}
			upd := e.f.next(t, "chat.update")
			if upd.Form.Get("channel") != ch || upd.Form.Get("ts") != ts {
				t.Fatalf("updated %v, want the clicked card", upd.Form)
			}
			if text := cardStrings(t, upd.Blocks()); !strings.Contains(text, tt.shown) {
				t.Fatalf("card after the decision:\n%s", text)
			}
		})
	}
}

func TestEmptyReasonKeepsTheModalOpen(t *testing.T) {
	t.Parallel()
	rec := pendingRecord(t, "call_empty")
	e := setup(t, rec)
	posted, ch, ts := e.announce(t, rec)
	e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionReject))
	opened := e.f.next(t, "views.open")

	resp := e.click(t, viewSubmission(t, "U_ALICE", opened, "   "))
	if !strings.Contains(resp, `"response_action":"errors"`) || !strings.Contains(resp, airlockslack.BlockReason) {
		t.Fatalf("answered %q; want the modal's field error", resp)
	}
	if n := len(e.approvals.Decides); n != 0 {
		t.Fatal("an empty reason was sent as a decision")
	}
}

func TestClickOnAStaleCardAnswersWithTheCurrentState(t *testing.T) {
	t.Parallel()
	rejected := func(r *airlockv1.ApprovalRecord) {
		r.State = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
		r.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "carol", Channel: "console"}
		r.Reason = "duplicate request"
	}
	revised := func(r *airlockv1.ApprovalRecord) { r.Call.Revision = 2 }
	for _, tt := range []struct {
		name, action string
		change       func(*airlockv1.ApprovalRecord)
		shown, told  string
	}{
		{"approve_after_a_rejection_in_the_console", airlockslack.ActionApprove, rejected,
			"*Rejected* by *carol* (console): `duplicate request`", "Nothing changed"},
		{"reject_after_a_rejection_opens_no_modal", airlockslack.ActionReject, rejected,
			"*Rejected* by *carol* (console): `duplicate request`", "out of date: the call is rejected"},
		{"request_changes_on_a_superseded_revision_opens_no_modal", airlockslack.ActionRequestChanges, revised,
			"This card is for revision 1; the agent has since submitted revision 2 (pending)", "out of date"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRecord(t, "call_stale")
			e := setup(t, rec)
			posted, ch, ts := e.announce(t, rec)
			now := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			tt.change(now)
			e.approvals.Put(now)

			e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, tt.action))
			upd := e.f.next(t, "chat.update")
			if text := cardStrings(t, upd.Blocks()); !strings.Contains(text, tt.shown) {
				t.Fatalf("stale card redrawn as:\n%s", text)
			}
			if len(buttonValues(t, upd.Blocks())) != 0 {
				t.Fatal("the stale card still has buttons")
			}
			if eph := e.f.next(t, "chat.postEphemeral"); !strings.Contains(eph.Form.Get("text"), tt.told) {
				t.Fatalf("the user was told %q", eph.Form.Get("text"))
			}
			e.f.none(t, "views.open")
		})
	}
}

func TestApprovalServiceDownTellsTheUserTheDecisionWasNotRecorded(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	f := startFakeSlack(t)
	deps := config(t, n.URL(), f)
	e := &interactionsEnv{deps: deps, f: f} // no approval responder at all
	e.endpoint = e.serve(t)
	notifier, err := airlockslack.NewNotifier(context.Background(), deps, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	e.notifier = notifier
	posted, ch, ts := e.announce(t, pendingRecord(t, "call_down"))

	e.click(t, buttonClick(t, "U_ALICE", posted, ch, ts, airlockslack.ActionApprove))
	eph := e.f.next(t, "chat.postEphemeral")
	if text := eph.Form.Get("text"); !strings.Contains(text, "was not recorded") || !strings.Contains(text, publicURL+"/calls/bot-1/call_down") {
		t.Fatalf("the user was told %q", text)
	}
	e.f.none(t, "chat.update")
}

func TestInteractionsRefuseToStartWithoutASigningSecret(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	f := startFakeSlack(t)
	deps := config(t, n.URL(), f)
	deps.Config.Slack.SigningSecret = ""
	_, err := airlockslack.NewInteractions(context.Background(), deps)
	if err == nil || !strings.Contains(err.Error(), "slack.signing_secret") {
		t.Fatalf("error = %v, want it to name slack.signing_secret", err)
	}
}

// The seen-set lives in KV with a TTL, so it is shared and bounded.
func TestSeenSetBucketExpiresEntries(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	kv, err := deps.JS.KeyValue(context.Background(), deps.Config.Buckets.SlackSeen)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ttl := st.TTL(); ttl < 10*time.Minute {
		t.Fatalf("seen-set TTL %s is shorter than the 10 minutes a signed payload stays acceptable", ttl)
	}
}
