package slack_test

import (
	"encoding/json"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
	"github.com/airlock-gate/airlock/services/shared/preview"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// TestTheCardShowsAHostilePreviewInertly: a preview made of every hostile
// string (terminal escapes, bidi, markup, mentions, a very long line) shows
// on the card escaped and within Slack's section limit.
func TestTheCardShowsAHostilePreviewInertly(t *testing.T) {
	for _, h := range escapetest.Corpus {
		t.Run(h.Name, func(t *testing.T) {
			diff, _ := preview.Diff("notes.txt", "", h.Text+"\n<!channel> <https://evil|click>\n", false, 0)
			rec := &airlockv1.ApprovalRecord{
				Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "write_file"},
				Decision: &airlockv1.Decision{}, State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
				Preview: preview.Finish(&airlockv1.Preview{Kind: preview.KindDiff, Text: diff}, 0),
			}
			for _, b := range airlockslack.Render(rec, "https://airlock.example").Blocks {
				raw, _ := json.Marshal(b)
				if !strings.Contains(string(raw), "airlock_preview") {
					continue
				}
				var sec struct {
					Text struct{ Text string } `json:"text"`
				}
				if err := json.Unmarshal(raw, &sec); err != nil {
					t.Fatal(err)
				}
				text := sec.Text.Text
				if r := escapetest.Raw(text); len(r) > 0 || strings.Contains(text, "<!channel>") || strings.Contains(text, "<https://evil") || len([]rune(text)) > 3000 {
					t.Fatalf("preview section (%d runes) carries %v raw or a live mention or link:\n%s", len([]rune(text)), r, text)
				}
				if !strings.Contains(text, "*Preview:* diff +") {
					t.Fatalf("preview section %q", text)
				}
				return
			}
			t.Fatal("the card has no preview section")
		})
	}
}
