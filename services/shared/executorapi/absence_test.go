package executorapi_test

import (
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
)

// TestTheRegistryLacksATool: Lacks finds what the registry lacks and what
// it has instead, Bare keeps only the tool, and Sentence and Warning say it
// with every name quoted, the message set only by Said.
func TestTheRegistryLacksATool(t *testing.T) {
	list := &airlockv1.ToolsListResponse{
		Tools:    []*airlockv1.UpstreamTool{{Server: "demo", Tool: "echo"}, {Server: "demo", Tool: "write_file"}, {Server: "fs", Tool: "read_file"}},
		Problems: []*airlockv1.ServerProblem{{Server: "slow", Message: "timed out"}},
	}
	code := func(name string) string { return "`" + name + "`" }
	for _, tc := range []struct {
		name, server, tool     string
		sentence, bare, warned string
	}{
		{"a_tool_of_the_registry_is_not_lacked", "demo", "echo", "", "", ""},
		{"a_server_that_could_not_be_listed_may_have_it", "slow", "thing", "", "", ""},
		{"a_tool_its_server_lacks_names_the_servers_tools", "demo", "nope",
			"the tool registry has no tool `demo__nope` (server `demo` has `echo`, `write_file`): even approved, this call cannot run, it would end failed (unknown_tool)",
			"the tool registry has no tool `demo__nope`: even approved, this call cannot run, it would end failed (unknown_tool)",
			"the tool registry has no tool `demo__nope` (server `demo` has `echo`, `write_file`): even approved, this call cannot run, it would end failed (unknown_tool); reject or cancel it, or add the tool to `executor.tools_file` first"},
		{"a_server_the_registry_lacks_names_its_servers", "zzz", "x",
			"the tool registry has no tool `zzz__x` (its servers are `demo`, `fs`): even approved, this call cannot run, it would end failed (unknown_tool)",
			"the tool registry has no tool `zzz__x`: even approved, this call cannot run, it would end failed (unknown_tool)", ""},
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
