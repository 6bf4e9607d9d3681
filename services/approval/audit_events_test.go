package approval_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestEveryVoteIsRecordedWithTheQuorumsProgress(t *testing.T) {
	w := newWorld(t)
	w.start()
	cases := []struct {
		name  string
		call  string
		steps func(call string)
		// want is the call's decision events in order, as "type by actor (progress)".
		want []string
	}{
		{"an approval then a rejection leaves the approval on record", "v1", func(call string) {
			if _, err := w.approve(call, "alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := w.decide(call, "bob", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
				t.Fatal(err)
			}
		}, []string{"vote_cast by alice (1 of 2)", "rejected by bob"}},
		{"two approvals are two votes, then the approval", "v2", func(call string) {
			for _, who := range []string{"alice", "bob"} {
				if _, err := w.approve(call, who); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"vote_cast by alice (1 of 2)", "vote_cast by bob (2 of 2)", "approved by bob"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.pending(&airlockv1.ToolCall{CallId: c.call}, &airlockv1.Decision{Quorum: 2})
			c.steps(c.call)
			var got []string
			testenv.Eventually(t, 10*time.Second, "the decision events", func() bool {
				got = nil
				for _, ev := range testenv.Events(t, w.js, "airlock.evt.bot."+c.call+".>") {
					s := ""
					switch {
					case ev.GetVoteCast() != nil:
						v := ev.GetVoteCast()
						s = fmt.Sprintf("vote_cast by %s (%d of %d)", ev.GetActor().GetId(), v.GetVotes(), v.GetQuorum())
					case ev.GetApproved() != nil:
						s = "approved by " + ev.GetActor().GetId()
					case ev.GetRejected() != nil:
						s = "rejected by " + ev.GetActor().GetId()
					default:
						continue
					}
					got = append(got, s)
				}
				return len(got) == len(c.want)
			})
			if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
				t.Fatalf("events %v, want %v", got, c.want)
			}
		})
	}
}

func TestEveryRefusedDecisionIsRecordedWithWhoAndWhy(t *testing.T) {
	w := newWorld(t)
	w.start()
	edited, _ := structpb.NewStruct(map[string]any{"path": "/tmp/y"})
	cases := []struct {
		name   string
		call   string
		quorum uint32
		// act makes the refused decision (after any setup) and returns its error.
		act      func(call string) error
		wantType string
		wantBy   string
		wantWord string // in the action or code and why
	}{
		{"an approver outside the list", "r1", 1, func(call string) error { _, err := w.approve(call, "zoe"); return err },
			"unauthorized_attempt", "zoe", "not among the approvers"},
		{"the person the call acts for", "r2", 1, func(call string) error { _, err := w.approve(call, "carol"); return err },
			"unauthorized_attempt", "carol", "on their behalf"},
		{"a decision about a superseded revision", "r3", 1, func(call string) error {
			w.pending(&airlockv1.ToolCall{CallId: "r3", OnBehalfOf: "carol", Revision: 2}, nil)
			_, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: call, Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE,
				Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob", Channel: "console"}})
			return err
		}, "decision_refused", "bob", "stale_revision"},
		{"an approval of arguments edited since the voter looked", "r4", 2, func(call string) error {
			if _, err := w.api.Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: call, Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, EditedArguments: edited,
				Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}}); err != nil {
				t.Fatal(err)
			}
			_, err := w.approve(call, "bob")
			return err
		}, "decision_refused", "bob", "digest_mismatch"},
		{"a decision after someone else decided", "r5", 1, func(call string) error {
			if _, err := w.decide(call, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
				t.Fatal(err)
			}
			_, err := w.approve(call, "bob")
			return err
		}, "decision_refused", "bob", "already_decided"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.pending(&airlockv1.ToolCall{CallId: c.call, OnBehalfOf: "carol"}, &airlockv1.Decision{Quorum: c.quorum})
			err := c.act(c.call)
			if c.wantType == "unauthorized_attempt" {
				mustCode(t, err, apierr.NotAuthorized)
			}
			ev := testenv.WaitForEvent(t, w.js, "airlock.evt.bot."+c.call+".>", c.wantType, 10*time.Second)
			text := ev.GetUnauthorizedAttempt().GetAction() + " " + ev.GetUnauthorizedAttempt().GetWhy() +
				ev.GetDecisionRefused().GetCode() + " " + ev.GetDecisionRefused().GetWhy()
			if ev.GetActor().GetId() != c.wantBy || !strings.Contains(text, c.wantWord) {
				t.Fatalf("%s by %q: %q; want by %q saying %q", c.wantType, ev.GetActor().GetId(), text, c.wantBy, c.wantWord)
			}
		})
	}
	t.Run("a repeated approval of one's own is not a refusal", func(t *testing.T) {
		w.pending(&airlockv1.ToolCall{CallId: "r6", OnBehalfOf: "carol"}, nil)
		for range 2 {
			if _, err := w.approve("r6", "alice"); err != nil {
				t.Fatal(err)
			}
		}
		w.waitState("r6", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
		if evs := w.events("bot", "r6", "decision_refused"); len(evs) != 0 {
			t.Fatalf("a double click was recorded as refused: %v", evs)
		}
	})
}

func TestAStandingGrantsLifeIsRecorded(t *testing.T) {
	w := newWorld(t)
	w.start()
	ctx := context.Background()
	w.pending(&airlockv1.ToolCall{CallId: "gl1", OnBehalfOf: "zoe"}, nil)
	g, err := w.api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: "bot", FromCallId: "gl1", By: human("alice"),
		Grant: &airlockv1.StandingGrant{UsesLeft: 2, ArgumentGlobs: map[string]string{"/path": "/tmp/*"}}})
	if err != nil {
		t.Fatal(err)
	}
	short := createExpiringGrant(t, w, "gl1", "bob", 300*time.Millisecond)
	if _, err := w.api.RevokeGrant(ctx, &airlockv1.RevokeGrantRequest{GrantId: g.GetId(), By: human("bob")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, grant, typ, by string
		check                func(*airlockv1.Event) bool
	}{
		{"creation names its creator and scope", g.GetId(), "grant_created", "alice", func(ev *airlockv1.Event) bool {
			s := ev.GetGrantCreated().GetGrant()
			return s.GetAgentId() == "bot" && s.GetTool() == "write_file" && s.GetUsesLeft() == 2 && s.GetArgumentGlobs()["/path"] == "/tmp/*" && s.GetFromCallId() == "gl1"
		}},
		{"revocation names who revoked it", g.GetId(), "grant_revoked", "bob", func(ev *airlockv1.Event) bool { return ev.GetGrantRevoked().GetGrantId() == g.GetId() }},
		{"expiry is recorded by the service once its time ran out", short.GetId(), "grant_expired", "approval", func(ev *airlockv1.Event) bool { return ev.GetGrantExpired().GetWhy() == "expired" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := testenv.WaitForEvent(t, w.js, "airlock.evt._system."+c.grant+".>", c.typ, 10*time.Second)
			if ev.GetActor().GetId() != c.by || !c.check(ev) {
				t.Fatalf("%s by %q: %v", c.typ, ev.GetActor().GetId(), ev)
			}
		})
	}
	t.Run("an expiry is recorded once although a restarted replica sweeps it again", func(t *testing.T) {
		// A core subscriber sees every publish, even one the stream then
		// drops as a duplicate of the expiry it holds. One subscription for
		// both grants gets the replica's publishes in the order it made them.
		nc, _ := testenv.Connect(t, w.nats.URL())
		sub, err := nc.SubscribeSync(subject.OfAgent(subject.SystemAgent))
		if err != nil {
			t.Fatal(err)
		}
		testenv.Subscribed(t, nc)
		w.stopAll()
		w.start() // it must find the expiry in the stream, not record it again
		later := createExpiringGrant(t, w, "gl1", "bob", 100*time.Millisecond)
		// The restarted replica's first sweep looks at every grant, and a
		// sweep goes through them in the order they were last written: the
		// earlier grant's expiry, published again, would come before the
		// later one's.
		for {
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no grant_expired of the later grant published within 10s: %v", err)
			}
			_, grant, typ, _ := subject.Tokens(m.Subject)
			if grant == short.GetId() {
				t.Fatalf("the restarted replica published %s of the earlier grant again", typ)
			}
			if grant == later.GetId() && typ == subject.GrantExpired {
				break
			}
		}
	})
}

// createExpiringGrant creates a grant from call that expires lead after
// it is asked for. The service refuses an expiry already past when the
// request reaches it, which a loaded machine can make take longer than
// lead: it is asked again with twice the lead, up to 10 s.
func createExpiringGrant(t *testing.T, w *world, call, by string, lead time.Duration) *airlockv1.StandingGrant {
	t.Helper()
	for {
		g, err := w.api.CreateGrant(context.Background(), &airlockv1.CreateGrantRequest{FromAgentId: "bot", FromCallId: call, By: human(by),
			Grant: &airlockv1.StandingGrant{ExpiresAt: timestamppb.New(time.Now().Add(lead))}})
		if err == nil {
			return g
		}
		if !strings.Contains(err.Error(), "is in the past") || lead >= 10*time.Second {
			t.Fatalf("creating a grant that expires %s after it is asked for: %v", lead, err)
		}
		t.Logf("the grant's expiry %s after it was asked for had passed when the service read it: asking with twice the lead", lead)
		lead *= 2
	}
}
