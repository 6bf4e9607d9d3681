package lognotify_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/lognotify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestLogNotifierPassesTheNotifierContract(t *testing.T) {
	var buf *testenv.SyncBuffer
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			buf = &testenv.SyncBuffer{}
			return lognotify.New(slog.New(slog.NewTextHandler(buf, nil)))
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			msg := map[string]string{"announce": `msg="approval needed"`, "remind": `msg="approval still needed"`, "update": `msg="approval outcome"`}[kind]
			for _, line := range strings.Split(buf.String(), "\n") {
				if strings.Contains(line, msg) && strings.Contains(line, "ref="+ref) {
					if kind == "update" && !strings.Contains(line, "state="+strings.ToLower(strings.TrimPrefix(rec.GetState().String(), "APPROVAL_STATE_"))) {
						continue
					}
					return true
				}
			}
			return false
		},
	})
}

// TestTheLogSaysWhatAirlockVerified: an operator reading the log can tell
// an agent's claim of whom it acts for from a verified person, and an
// agent's own cancel (its reason is its words) from a reviewer's decision.
func TestTheLogSaysWhatAirlockVerified(t *testing.T) {
	for _, tt := range []struct {
		name     string
		verified bool
		by       *airlockv1.Actor
		want     []string
	}{
		{"an_agents_claim_canceled_by_the_agent", false, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"},
			[]string{"on_behalf_of=zoe on_behalf_of_verified=false", "by=bot by_type=agent"}},
		{"a_verified_person_rejected_by_a_reviewer", true, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"},
			[]string{"on_behalf_of=zoe on_behalf_of_verified=true", "by=alice by_type=human"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			buf := &testenv.SyncBuffer{}
			n := lognotify.New(slog.New(slog.NewTextHandler(buf, nil)))
			rec := notifytest.Record("c")
			rec.Call.OnBehalfOfVerified = tt.verified
			ref, err := n.Announce(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			rec.State, rec.DecidedBy, rec.Reason = airlockv1.ApprovalState_APPROVAL_STATE_CANCELED, tt.by, "superseded"
			if err := n.Update(context.Background(), rec, ref); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.want {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("the log lacks %q:\n%s", want, buf.String())
				}
			}
		})
	}
}
