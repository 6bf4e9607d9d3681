package teams_test

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
	"github.com/airlock-gate/airlock/services/shared/preview"
	"github.com/airlock-gate/airlock/services/teams"
)

// TestTheCardShowsAHostilePreviewInertly: the card's preview (summary and
// excerpt) holds nothing an agent wrote raw.
func TestTheCardShowsAHostilePreviewInertly(t *testing.T) {
	for _, h := range escapetest.Corpus {
		t.Run(h.Name, func(t *testing.T) {
			diff, _ := preview.Diff("notes.txt", "", h.Text+"\n", false, 0)
			rec := &airlockv1.ApprovalRecord{
				Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "write_file"},
				Decision: &airlockv1.Decision{}, State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
				Preview: preview.Finish(&airlockv1.Preview{Kind: preview.KindDiff, Text: diff}, 0),
			}
			var all []string
			for _, ts := range texts(t, teams.Render(rec, "https://airlock.example")) {
				all = append(all, ts...)
			}
			shown := false
			for _, s := range all {
				if r := escapetest.Raw(s); len(r) > 0 {
					t.Fatalf("a text carries %v raw: %q", r, s)
				}
				shown = shown || strings.Contains(s, "+++ b/notes.txt")
			}
			if !shown {
				t.Fatalf("the card does not show the preview: %q", all)
			}
		})
	}
}
