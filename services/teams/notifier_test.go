package teams_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

func TestTargetsFollowThePolicysNotifyList(t *testing.T) {
	n := testenv.StartNATS(t)
	notifier, err := airlockteams.NewNotifier(context.Background(), config(t, n.URL(), startFakeConnector(t), nil))
	must(t, err)
	rec := pendingRecord(t, "call_targets")
	rec.Decision.Notify = []string{"console", "teams", " teams:19:sec@thread.tacv2 ", "teams:" + conversation, "slack:#ops", "escalate:teams:19:oncall@thread.tacv2"}
	for _, tc := range []struct {
		name      string
		escalated bool
		want      []string
	}{
		{"a_bare_entry_is_the_configured_conversation_and_escalation_waits", false, []string{conversation, "19:sec@thread.tacv2"}},
		{"an_escalated_call_also_reaches_the_escalation_conversation", true, []string{conversation, "19:sec@thread.tacv2", "19:oncall@thread.tacv2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.Escalated = tc.escalated
			if got := notifier.Targets(rec); !slices.Equal(got, tc.want) {
				t.Fatalf("Targets = %q, want %q", got, tc.want)
			}
		})
	}
}

// The digest of an agent's calls not announced one by one is one plain
// message in each conversation the calls were routed to, with no card.
func TestDigestIsOnePlainMessagePerConversation(t *testing.T) {
	n := testenv.StartNATS(t)
	f := startFakeConnector(t)
	notifier, err := airlockteams.NewNotifier(context.Background(), config(t, n.URL(), f, nil))
	must(t, err)
	rec := pendingRecord(t, "call_digest")
	must(t, notifier.Digest(context.Background(), notify.Digest{Agent: "bot", Calls: 4, Latest: rec}))
	c := f.next(t, "post")
	if text, _ := c.Body["text"].(string); c.Conversation != conversation || !strings.Contains(text, "agent bot has 4 more calls waiting") || c.Body["attachments"] != nil {
		t.Fatalf("digest activity in %s: %v", c.Conversation, c.Body)
	}
}
