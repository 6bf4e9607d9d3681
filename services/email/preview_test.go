package email_test

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/email"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// TestTheMailShowsAHostilePreviewInertly: the request mail quotes the
// preview's start, with nothing an agent wrote reaching it raw.
func TestTheMailShowsAHostilePreviewInertly(t *testing.T) {
	for _, h := range escapetest.Corpus {
		t.Run(h.Name, func(t *testing.T) {
			diff, _ := preview.Diff("notes.txt", "", h.Text+"\n", false, 0)
			rec := &airlockv1.ApprovalRecord{
				Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "demo", Tool: "write_file"},
				Decision: &airlockv1.Decision{},
				Preview:  preview.Finish(&airlockv1.Preview{Kind: preview.KindDiff, Text: diff}, 0),
			}
			body := email.RequestBody(rec, "http://airlock.test")
			if r := escapetest.Raw(body); len(r) > 0 || !strings.Contains(body, "Preview: diff +") || !strings.Contains(body, "> +++ b/notes[.]txt") {
				t.Fatalf("body carries %v raw, or lacks the preview:\n%s", r, body)
			}
		})
	}
}
