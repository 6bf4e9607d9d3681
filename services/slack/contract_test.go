package slack_test

import (
	"context"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

// outcomeWords is what a redrawn card must say for each final state.
var outcomeWords = map[airlockv1.ApprovalState]string{
	airlockv1.ApprovalState_APPROVAL_STATE_APPROVED:          "*Approved* by *alice* (console)",
	airlockv1.ApprovalState_APPROVAL_STATE_REJECTED:          "*Rejected* by *alice* (console): `because`",
	airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED: "*Changes requested* by *alice* (console): `because`",
	airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:           "*Expired*",
	airlockv1.ApprovalState_APPROVAL_STATE_CANCELED:          "*Canceled* by *alice* (console): `because`",
	airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED:         "The tool ran and completed.",
	airlockv1.ApprovalState_APPROVAL_STATE_FAILED:            "The tool ran and failed",
}

func TestNotifierContract(t *testing.T) {
	t.Parallel()
	fakes := map[*testing.T]*fakeSlack{}
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			// Each subtest gets its own bus and Slack fake: the suite reuses
			// call ids, and the bucket remembers posted cards.
			n := testenv.StartNATS(t)
			f := startFakeSlack(t)
			fakes[t] = f
			notifier, err := airlockslack.NewNotifier(context.Background(), config(t, n.URL(), f), fastRetry)
			if err != nil {
				t.Fatal(err)
			}
			return notifier
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			f := fakes[t]
			ch, ts, ok := strings.Cut(ref, "/")
			if !ok || ch != "CAIRLOCK" { // the record says "slack": the configured #airlock
				t.Fatalf("ref %q is not a message in #airlock", ref)
			}
			switch kind {
			case "announce":
				return f.Saw("chat.postMessage", func(c apiCall) bool {
					return slackfake.ChannelID(c.Form.Get("channel")) == ch && strings.Contains(cardStrings(t, c.Blocks()), "call `"+rec.GetCall().GetCallId()+"`")
				})
			case "remind":
				return f.Saw("chat.postMessage", func(c apiCall) bool { return c.Form.Get("thread_ts") == ts })
			case "update":
				return f.Saw("chat.update", func(c apiCall) bool {
					return c.Form.Get("channel") == ch && c.Form.Get("ts") == ts &&
						strings.Contains(cardStrings(t, c.Blocks()), outcomeWords[rec.GetState()])
				})
			}
			t.Fatalf("unknown delivery kind %q", kind)
			return false
		},
	})
}
