package calls

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestLookAlikesReadsEverythingAReviewerReads(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{
		"url":    "https://pаypal.com/login",
		"nеsted": map[string]any{"list": []any{"ok", "/etc/раsswd", 3.0}},
		"note":   "Привет, мир",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &airlockv1.ToolCall{AgentId: "bοt", Server: "gіthub", Tool: "push", Reason: "see pаypal.com", Arguments: args}
	var got []string
	for _, l := range LookAlikes(c, nil) {
		got = append(got, l.Text)
	}
	want := []string{"bοt", "gіthub__push", "nеsted", "/etc/раsswd", "https://pаypal.com/login", "pаypal.com"} // argument names, then values, depth first in name order; the reason last
	if !slices.Equal(got, want) {
		t.Fatalf("LookAlikes = %q, want %q", got, want)
	}
	// A value the policy redacts is not quoted where the arguments are shown redacted.
	got = nil
	for _, l := range LookAlikes(c, []string{"/url", "/nеsted/list/1"}) {
		got = append(got, l.Text)
	}
	if want := []string{"bοt", "gіthub__push", "nеsted", "pаypal.com"}; !slices.Equal(got, want) {
		t.Fatalf("LookAlikes, /url and /nеsted/list/1 redacted = %q, want %q", got, want)
	}
}

func TestLookAlikeWarningsAreBounded(t *testing.T) {
	var words []string
	for i := range MaxLookAlikeWarnings + 3 {
		words = append(words, fmt.Sprintf("pаypal%d", i))
	}
	lines := LookAlikeWarnings(&airlockv1.ToolCall{Reason: strings.Join(words, " ")}, nil, func(s string) string { return s })
	if len(lines) != MaxLookAlikeWarnings+1 {
		t.Fatalf("%d lines, want %d: %q", len(lines), MaxLookAlikeWarnings+1, lines)
	}
	if want := "Look-alike letters: the name pаypal0 mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "3 more names") {
		t.Errorf("last line %q does not say 3 more names", last)
	}
	if lines := LookAlikeWarnings(&airlockv1.ToolCall{Tool: "write_file", Reason: "Удалить отчёт"}, nil, func(s string) string { return s }); lines != nil {
		t.Errorf("a call with no look-alike letters has warnings %q", lines)
	}
}

// TestDecoysInTheReasonCannotCrowdOutASpoofInTheArguments: the warnings
// are bounded (MaxLookAlikeWarnings), so an agent filling its reason with
// look-alike decoys must not push the warning about what the call does —
// its arguments — out of the lines shown (R6).
func TestDecoysInTheReasonCannotCrowdOutASpoofInTheArguments(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"url": "https://pаypal.com/login"})
	if err != nil {
		t.Fatal(err)
	}
	c := &airlockv1.ToolCall{AgentId: "bot", Server: "web", Tool: "fetch", Arguments: args,
		Reason: "checking аa1 аa2 аa3 аa4 аa5 аa6 аa7"}
	lines := LookAlikeWarnings(c, nil, func(s string) string { return s })
	if len(lines) == 0 || !strings.Contains(lines[0], "https://pаypal.com/login") {
		t.Fatalf("warnings %q: want the first about the argument's address, before the reason's decoys", lines)
	}
}
