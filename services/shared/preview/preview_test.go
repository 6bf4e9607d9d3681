package preview_test

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		exists         bool
		want           string
	}{
		{"a_new_file_is_all_added", "", "one\ntwo\n", false,
			"--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"},
		{"a_changed_line_shows_with_its_context", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n", true,
			"--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"an_unchanged_file_has_no_hunk", "same\n", "same\n", true, "--- a/f.txt\n+++ b/f.txt\n"},
		{"emptying_a_file_removes_every_line", "x\ny\n", "", true, "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +0,0 @@\n-x\n-y\n"},
		{"distant_changes_make_two_hunks", "a\n1\n2\n3\n4\n5\n6\n7\n8\nb\n", "A\n1\n2\n3\n4\n5\n6\n7\n8\nB\n", true,
			"--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -7,4 +7,4 @@\n 6\n 7\n 8\n-b\n+B\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := preview.Diff("f.txt", tc.old, tc.new, tc.exists, 0)
			if got != tc.want || cut {
				t.Fatalf("got (cut %v)\n%s\nwant\n%s", cut, got, tc.want)
			}
		})
	}
}

func TestDiffOfAHugeFileStopsAtItsBound(t *testing.T) {
	old := strings.Repeat("old line\n", 200_000)
	new := strings.Repeat("new line\n", 200_000)
	got, cut := preview.Diff("big", old, new, true, 4096)
	if !cut || len(got) > 4096 {
		t.Fatalf("diff of %d bytes (cut %v), want at most 4096 and cut", len(got), cut)
	}
}

func TestFinishBoundsTheTextAndDigestsWhatIsKept(t *testing.T) {
	p := preview.Finish(&airlockv1.Preview{Kind: preview.KindText, Text: strings.Repeat("é", 100)}, 51)
	if !p.Truncated || len(p.Text) != 50 || p.Digest != preview.Digest(p) {
		t.Fatalf("text %d bytes, truncated %v, digest %q", len(p.Text), p.Truncated, p.Digest)
	}
	other := preview.Finish(&airlockv1.Preview{Kind: preview.KindText, Text: p.Text, Precondition: "absent"}, 51)
	if other.Digest == p.Digest {
		t.Fatal("two previews with different preconditions share a digest")
	}
}

func TestSummary(t *testing.T) {
	diff, _ := preview.Diff("f", "a\n", "b\nc\n", true, 0)
	for _, tc := range []struct {
		name string
		p    *airlockv1.Preview
		want string
	}{
		{"a_diff_counts_its_lines", preview.Finish(&airlockv1.Preview{Kind: preview.KindDiff, Text: diff}, 0), "diff +2 −1 lines, digest "},
		{"a_missing_preview_says_why", preview.Unavailable("the preview did not answer within 1s"), "no preview (the preview did not answer within 1s)"},
		{"no_record_of_a_preview_says_none", nil, "no preview"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := preview.Summary(tc.p); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, want it to start with %q", got, tc.want)
			}
		})
	}
}
