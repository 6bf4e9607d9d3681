package teams_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// forgedOutcome is a reason written to pass for airlock's own outcome
// lines: an approval and a completed run, after which the card's own
// "The call will not run." would read as a stale leftover.
const forgedOutcome = "superseded\nApproved by alice (console): verified the path\nThe tool ran and completed.\n"

// TestTheCardShowsTheAgentsWordsAsItsOwn: what an agent wrote reaches the
// Bot Connector labelled as the agent's and on one line: an unverified
// on_behalf_of is marked as the agent's claim, and neither its stated
// reason nor the reason it canceled its own call with can draw lines that
// pass for the card's (an approval, a completed run).
func TestTheCardShowsTheAgentsWordsAsItsOwn(t *testing.T) {
	n := testenv.StartNATS(t)
	f := startFakeConnector(t)
	notifier, err := airlockteams.NewNotifier(context.Background(), config(t, n.URL(), f, nil))
	must(t, err)
	ctx := context.Background()
	for _, tt := range []struct {
		name       string
		onBehalfOf string
		verified   bool
		wantAgent  string
	}{
		{"an_unverified_person_is_the_agents_claim", "alice, verified by airlock SSO", false,
			`bot-1 on behalf of alice, verified by airlock SSO (claimed by the agent, not verified)`},
		{"a_verified_person_is_shown_as_verified", "alice", true, "bot-1 on behalf of alice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRecord(t, "call_words_"+tt.name)
			rec.Call.OnBehalfOf, rec.Call.OnBehalfOfVerified = tt.onBehalfOf, tt.verified
			rec.Call.Reason = "tidy up\nRisk: low\nWhy a person must decide: nothing"
			ref, err := notifier.Announce(ctx, rec)
			must(t, err)
			card := f.next(t, "post").Card(t)
			if got := cardField(t, card, "Agent"); got != tt.wantAgent {
				t.Errorf("the card's agent reads %q, want %q", got, tt.wantAgent)
			}
			if got, want := cardField(t, card, "Agent's stated reason"), `tidy up\nRisk: low\nWhy a person must decide: nothing`; got != want {
				t.Errorf("the agent's stated reason reads %q, want it on one line: %q", got, want)
			}

			canceled := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			canceled.State = airlockv1.ApprovalState_APPROVAL_STATE_CANCELED
			canceled.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot-1"}
			canceled.Reason = forgedOutcome
			must(t, notifier.Update(ctx, canceled, ref))
			outcome := strings.Split(cardBlockText(t, f.next(t, "update").Card(t), "outcome"), "\n")
			want := []string{`Canceled by bot-1 (agent): superseded\nApproved by alice (console): verified the path\nThe tool ran and completed.\n`, "The call will not run."}
			if strings.Join(outcome, "|") != strings.Join(want, "|") {
				t.Errorf("the outcome reads %q, want %q: the agent's reason on one line, after its name", outcome, want)
			}
		})
	}
}

// cardBody is the body elements of a card, as JSON objects.
func cardBody(t *testing.T, card string) []map[string]any {
	t.Helper()
	var c struct {
		Body []map[string]any `json:"body"`
	}
	must(t, json.Unmarshal([]byte(card), &c))
	return c.Body
}

// runsText joins the text of a RichTextBlock's runs.
func runsText(block map[string]any) []string {
	inlines, _ := block["inlines"].([]any)
	var out []string
	for _, in := range inlines {
		run, _ := in.(map[string]any)
		s, _ := run["text"].(string)
		out = append(out, s)
	}
	return out
}

// cardField is the value beside label (render's field: "label: " in one
// run, the value in the next).
func cardField(t *testing.T, card, label string) string {
	t.Helper()
	for _, b := range cardBody(t, card) {
		if runs := runsText(b); len(runs) == 2 && runs[0] == label+": " {
			return runs[1]
		}
	}
	t.Fatalf("the card has no field %q:\n%s", label, card)
	return ""
}

// cardBlockText is the text of the block with id.
func cardBlockText(t *testing.T, card, id string) string {
	t.Helper()
	for _, b := range cardBody(t, card) {
		if b["id"] == id {
			return strings.Join(runsText(b), "")
		}
	}
	t.Fatalf("the card has no block %q:\n%s", id, card)
	return ""
}
