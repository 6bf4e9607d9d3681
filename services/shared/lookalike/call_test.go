package lookalike

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
	for _, l := range InCall(c, nil) {
		got = append(got, l.Text)
	}
	// The identity's and arguments' names (argument names, then values,
	// depth first in name order) by kind: addresses and hosts, paths,
	// other names; the reason's last.
	want := []string{"https://pаypal.com/login", "/etc/раsswd", "bοt", "gіthub__push", "nеsted", "pаypal.com"}
	if !slices.Equal(got, want) {
		t.Fatalf("LookAlikes = %q, want %q", got, want)
	}
	// A value the policy redacts is not quoted where the arguments are shown redacted.
	got = nil
	for _, l := range InCall(c, []string{"/url", "/nеsted/list/1"}) {
		got = append(got, l.Text)
	}
	if want := []string{"bοt", "gіthub__push", "nеsted", "pаypal.com"}; !slices.Equal(got, want) {
		t.Fatalf("LookAlikes, /url and /nеsted/list/1 redacted = %q, want %q", got, want)
	}
}

func TestLookAlikeWarningsAreBounded(t *testing.T) {
	var words []string
	for i := range MaxWarnings + 3 {
		words = append(words, fmt.Sprintf("pаypal%d", i))
	}
	lines := Warnings(&airlockv1.ToolCall{Reason: strings.Join(words, " ")}, nil, func(s string) string { return s })
	if len(lines) != MaxWarnings+1 {
		t.Fatalf("%d lines, want %d: %q", len(lines), MaxWarnings+1, lines)
	}
	if want := "Look-alike letters: the name pаypal0 mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "3 more names") {
		t.Errorf("last line %q does not say 3 more names", last)
	}
	if lines := Warnings(&airlockv1.ToolCall{Tool: "write_file", Reason: "Удалить отчёт"}, nil, func(s string) string { return s }); lines != nil {
		t.Errorf("a call with no look-alike letters has warnings %q", lines)
	}
}

// TestDecoysInTheReasonCannotCrowdOutASpoofInTheArguments: the warnings
// are bounded (MaxWarnings), so look-alike decoys an agent writes
// in its reason (R6), its working directory or paths beside the host it
// spoofs (R8) must not push the warning about where the call goes out of
// the lines shown.
func TestDecoysInTheReasonCannotCrowdOutASpoofInTheArguments(t *testing.T) {
	decoys := func(format string) []any {
		var out []any
		for i := range 7 {
			out = append(out, fmt.Sprintf(format, i))
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		args   map[string]any
		cwd    string
		reason string
	}{
		{"in_the_reason", map[string]any{"url": "https://pаypal.com/login"}, "", "checking аa1 аa2 аa3 аa4 аa5 аa6 аa7"},
		{"in_the_working_directory", map[string]any{"url": "https://pаypal.com/login"}, "/srv/аa1 /srv/аa2 /srv/аa3 /srv/аa4 /srv/аa5 /srv/аa6", ""},
		{"paths_in_earlier_arguments", map[string]any{"a_files": decoys("/tmp/rеport%d"), "url": "https://pаypal.com/login"}, "", ""},
		{"hosting_names_in_a_log_before_it", map[string]any{"a_log": decoys("GET https://www%d.example.com.edgekey.net/ 200"), "url": "https://pаypal.com/login"}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args, err := structpb.NewStruct(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			c := &airlockv1.ToolCall{AgentId: "bot", Server: "web", Tool: "fetch", Arguments: args, Cwd: tt.cwd, Reason: tt.reason}
			lines := Warnings(c, nil, func(s string) string { return s })
			if len(lines) == 0 || !strings.Contains(lines[0], "https://pаypal.com/login") {
				t.Fatalf("warnings %q: want the first about the argument's address, before the decoys", lines)
			}
		})
	}
}

// An ASCII name that leads elsewhere holds no look-alike letter: its
// warning says where it leads under a heading of its own (R10 F4), and so
// does the line for the names past MaxWarnings.
func TestAWarningOfWhereANameLeadsHasItsOwnHeading(t *testing.T) {
	var spoofs []string
	for i := range MaxWarnings + 2 {
		spoofs = append(spoofs, fmt.Sprintf("https://paypal.com@evil%d.example/", i))
	}
	lines := Warnings(&airlockv1.ToolCall{Reason: "see pаypal.com " + strings.Join(spoofs, " ")}, nil, func(s string) string { return s })
	want := []string{
		"Look-alike letters: the host pаypal.com mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is xn--pypal-4ve.com",
		"Leads elsewhere: the address https://paypal.com@evil0.example/ leads to the host evil0.example: paypal.com before the @ is a user name",
	}
	if len(lines) != MaxWarnings+1 || lines[0] != want[0] || lines[1] != want[1] {
		t.Fatalf("lines %q, want %d starting %q", lines, MaxWarnings+1, want)
	}
	if want := "Leads elsewhere: 3 more names lead to hosts or domains other than they read as."; lines[MaxWarnings] != want {
		t.Errorf("last line %q, want %q", lines[MaxWarnings], want)
	}
}
