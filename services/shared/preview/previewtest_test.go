package preview_test

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

func TestNotifiedWithholdsTheTextOfACallThePolicyRedacts(t *testing.T) {
	diff, _ := preview.Diff("f", "", "password=hunter2\n", false, 0)
	p := preview.Finish(&airlockv1.Preview{Kind: preview.KindDiff, Text: diff}, 0)
	for _, tc := range []struct {
		name        string
		redact      []string
		wantExcerpt bool
	}{
		{"without_redaction_the_excerpt_is_shown", nil, true},
		{"with_redaction_only_the_summary_is_shown", []string{"/content"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			summary, excerpt := preview.Notified(&airlockv1.ApprovalRecord{Preview: p, Decision: &airlockv1.Decision{Redact: tc.redact}})
			if strings.Contains(excerpt, "hunter2") != tc.wantExcerpt || !strings.HasPrefix(summary, "diff +1 −0 lines") {
				t.Fatalf("summary %q excerpt %q", summary, excerpt)
			}
		})
	}
}

func TestExcerptIsBoundedInLinesAndBytes(t *testing.T) {
	p := preview.Finish(&airlockv1.Preview{Kind: preview.KindText, Text: strings.Repeat("a line of text\n", 1000)}, 0)
	got := preview.Excerpt(p, preview.ExcerptLines, preview.ExcerptBytes)
	if strings.Count(got, "\n") > preview.ExcerptLines || len(got) > preview.ExcerptBytes+8 || !strings.HasSuffix(got, "…") {
		t.Fatalf("excerpt of %d bytes, %d lines: %q", len(got), strings.Count(got, "\n"), got)
	}
}
