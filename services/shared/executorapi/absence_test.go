package executorapi_test

import (
	"fmt"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
)

// TestTheRegistryLacksATool: Lacks finds what the registry lacks and what
// it has instead, Bare keeps only the tool, and Sentence, Warning and
// Failure (the executor's, of Bare) say it with every name quoted, the
// message set only by Said.
func TestTheRegistryLacksATool(t *testing.T) {
	list := &airlockv1.ToolsListResponse{
		Tools:    []*airlockv1.UpstreamTool{{Server: "demo", Tool: "echo"}, {Server: "demo", Tool: "write_file"}, {Server: "fs", Tool: "read_file"}},
		Problems: []*airlockv1.ServerProblem{{Server: "slow", Message: "timed out"}},
	}
	code := func(name string) string { return "`" + name + "`" }
	for _, tc := range []struct {
		name, server, tool             string
		sentence, bare, warned, failed string
	}{
		{"a_tool_of_the_registry_is_not_lacked", "demo", "echo", "", "", "", ""},
		{"a_server_that_could_not_be_listed_may_have_it", "slow", "thing", "", "", "", ""},
		{"a_tool_its_server_lacks_names_the_servers_tools", "demo", "nope",
			"the tool registry has no tool `demo__nope` (server `demo` has `echo`, `write_file`): even approved, this call cannot run, it would end failed (unknown_tool)",
			"the tool registry has no tool `demo__nope`: even approved, this call cannot run, it would end failed (unknown_tool)",
			"the tool registry has no tool `demo__nope` (server `demo` has `echo`, `write_file`): even approved, this call cannot run, it would end failed (unknown_tool); reject or cancel it, or add the tool to `executor.tools_file` first",
			"the tool registry has no tool `demo__nope`: the call was not run (unknown_tool); call a tool the registry has, or add this one to the tools file (`executor.tools_file`) and call it again"},
		{"a_server_the_registry_lacks_names_its_servers", "zzz", "x",
			"the tool registry has no tool `zzz__x` (its servers are `demo`, `fs`): even approved, this call cannot run, it would end failed (unknown_tool)",
			"the tool registry has no tool `zzz__x`: even approved, this call cannot run, it would end failed (unknown_tool)", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := executorapi.Lacks(list, tc.server, tc.tool)
			if (u == nil) != (tc.sentence == "") {
				t.Fatalf("Lacks = %v, want lacking: %v", u, tc.sentence != "")
			}
			if u == nil {
				return
			}
			if u.GetMessage() != "" {
				t.Errorf("Lacks built a message no one asked for: %q", u.GetMessage())
			}
			if got := executorapi.Sentence(u, code); got != tc.sentence {
				t.Errorf("Sentence = %q, want %q", got, tc.sentence)
			}
			if got := executorapi.Sentence(executorapi.Bare(u), code); got != tc.bare {
				t.Errorf("Sentence of Bare = %q, want %q", got, tc.bare)
			}
			if got := executorapi.Warning(u, code); tc.warned != "" && got != tc.warned {
				t.Errorf("Warning = %q, want %q", got, tc.warned)
			}
			if got := executorapi.Failure(executorapi.Bare(u), code); tc.failed != "" && got != tc.failed {
				t.Errorf("Failure of Bare = %q, want %q", got, tc.failed)
			}
			plain := executorapi.Sentence(u, func(name string) string { return name })
			if got := executorapi.Said(u).GetMessage(); got != plain {
				t.Errorf("Said's message = %q, want %q", got, plain)
			}
		})
	}
	if executorapi.Said(nil) != nil || executorapi.Bare(nil) != nil {
		t.Error("Said or Bare of nil is not nil")
	}
}

// TestASentenceNamesAtMostTenOfWhatTheRegistryHas: an upstream with
// hundreds of tools makes no sentence of hundreds of names: it names
// MaxNamesSaid, those sharing the longest prefix with the missing name
// first, and says how many more there are.
func TestASentenceNamesAtMostTenOfWhatTheRegistryHas(t *testing.T) {
	names := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%03d", prefix, i))
		}
		return out
	}
	plain := func(name string) string { return name }
	for _, tc := range []struct {
		name string
		u    *airlockv1.UnknownTool
		want string
	}{
		{"ten_tools_are_all_named",
			&airlockv1.UnknownTool{Tool: "big__nope", Server: "big", ServerTools: names("t", 10)},
			"the tool registry has no tool big__nope (server big has t000, t001, t002, t003, t004, t005, t006, t007, t008, t009): even approved"},
		{"eleven_tools_name_ten_and_one_more",
			&airlockv1.UnknownTool{Tool: "big__nope", Server: "big", ServerTools: names("t", 11)},
			"(server big has t000, t001, t002, t003, t004, t005, t006, t007, t008, t009 and 1 more): even approved"},
		{"hundreds_of_tools_name_those_closest_to_the_missing_one_first",
			&airlockv1.UnknownTool{Tool: "gh__issue_lst", Server: "gh", ServerTools: append(names("aaa", 300), "issue_list", "issue_get", "pr_list")},
			"(server gh has issue_list, issue_get, aaa000, aaa001, aaa002, aaa003, aaa004, aaa005, aaa006, aaa007 and 293 more): even approved"},
		{"hundreds_of_servers_are_bounded_too",
			&airlockv1.UnknownTool{Tool: "srv250x__run", Server: "srv250x", Servers: names("srv", 400)},
			"(its servers are srv250, srv251, srv252, srv253, srv254, srv255, srv256, srv257, srv258, srv259 and 390 more): even approved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := executorapi.Sentence(tc.u, plain)
			if !strings.Contains(got, tc.want) {
				t.Errorf("Sentence = %q\nwant it to say %q", got, tc.want)
			}
			listed := got[strings.Index(got, "(")+1 : strings.Index(got, ")")]
			if n := strings.Count(listed, ", ") + 1; n > executorapi.MaxNamesSaid {
				t.Errorf("Sentence names %d names, want at most %d: %q", n, executorapi.MaxNamesSaid, got)
			}
		})
	}
}
