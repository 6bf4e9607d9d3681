package teams_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// outcomeWords is what a redrawn card must say for each final state.
var outcomeWords = map[airlockv1.ApprovalState]string{
	airlockv1.ApprovalState_APPROVAL_STATE_APPROVED:          "Approved by alice (console): because",
	airlockv1.ApprovalState_APPROVAL_STATE_REJECTED:          "Rejected by alice (console): because",
	airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED: "Changes requested by alice (console): because",
	airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:           "Expired: nobody decided before",
	airlockv1.ApprovalState_APPROVAL_STATE_CANCELED:          "Canceled by alice (console): because",
	airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED:         "The tool ran and completed.",
	airlockv1.ApprovalState_APPROVAL_STATE_FAILED:            "The tool ran and failed",
}

func TestNotifierContract(t *testing.T) {
	t.Parallel()
	fakes := map[*testing.T]*fakeConnector{}
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			// Each subtest gets its own bus and connector fake: the suite
			// reuses call ids, and the bucket remembers posted cards.
			n := testenv.StartNATS(t)
			f := startFakeConnector(t)
			fakes[t] = f
			notifier, err := airlockteams.NewNotifier(context.Background(), config(t, n.URL(), f, nil), fastRetry)
			if err != nil {
				t.Fatal(err)
			}
			return notifier
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			f := fakes[t]
			c, a, _ := strings.Cut(ref, "/")
			conv, _ := url.QueryUnescape(c)
			id, _ := url.QueryUnescape(a)
			if conv != conversation { // the record says "teams": the configured conversation
				t.Fatalf("ref %q is not a card in %s", ref, conversation)
			}
			switch kind {
			case "announce":
				return f.saw("post", func(c connectorCall) bool {
					return c.Conversation == conv && c.ID == id && strings.Contains(c.Card(t), "call "+rec.GetCall().GetCallId()+" ")
				})
			case "remind":
				return f.saw("reply", func(c connectorCall) bool {
					return c.Conversation == conv && c.Activity == id && strings.Contains(c.Body["text"].(string), "Reminder")
				})
			case "update":
				return f.saw("update", func(c connectorCall) bool {
					return c.Conversation == conv && c.Activity == id && strings.Contains(c.Card(t), outcomeWords[rec.GetState()])
				})
			}
			t.Fatalf("unknown delivery kind %q", kind)
			return false
		},
	})
}
