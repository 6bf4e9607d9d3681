package executorapi

import (
	"slices"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/calls"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Lacks says whether list, the registry's tools (List), lacks tool of
// server: nil when it has it, or when that server could not be listed just
// now (it may have it). A call of a tool the registry lacks waits for a
// person like any call no rule matches, but even approved it cannot run: it
// would end failed (unknown_tool). The answer has no message: Sentence says
// it where it is shown.
func Lacks(list *airlockv1.ToolsListResponse, server, tool string) *airlockv1.UnknownTool {
	for _, p := range list.GetProblems() {
		if p.GetServer() == server {
			return nil
		}
	}
	u := &airlockv1.UnknownTool{Tool: calls.ToolName(server, tool), Server: server}
	var servers []string
	for _, t := range list.GetTools() {
		if t.GetServer() == server {
			if t.GetTool() == tool {
				return nil
			}
			u.ServerTools = append(u.ServerTools, t.GetTool())
		}
		if !slices.Contains(servers, t.GetServer()) {
			servers = append(servers, t.GetServer())
		}
	}
	if len(u.ServerTools) == 0 {
		u.Servers = servers
	}
	return u
}

// Bare is u without what the registry has instead, for those who may not
// read the registry (agents: they may not list airlock.api.executor.tools).
func Bare(u *airlockv1.UnknownTool) *airlockv1.UnknownTool {
	if u == nil {
		return nil
	}
	return &airlockv1.UnknownTool{Tool: u.GetTool(), Server: u.GetServer()}
}

// Sentence is the one way airlock says that the registry lacks u's tool
// (what it has instead, when u says) and that the call cannot run. Every
// name goes through quote: a terminal escapes it, a page marks it as code,
// an API answer takes it as it is (Said).
func Sentence(u *airlockv1.UnknownTool, quote func(name string) string) string {
	var b strings.Builder
	b.WriteString("the tool registry has no tool ")
	b.WriteString(quote(u.GetTool()))
	list := func(names []string) {
		for i, n := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(n))
		}
	}
	switch {
	case len(u.GetServerTools()) > 0:
		b.WriteString(" (server " + quote(u.GetServer()) + " has ")
		list(u.GetServerTools())
		b.WriteString(")")
	case len(u.GetServers()) > 0:
		b.WriteString(" (its servers are ")
		list(u.GetServers())
		b.WriteString(")")
	}
	b.WriteString(": even approved, this call cannot run, it would end failed (unknown_tool)")
	return b.String()
}

// Warning is Sentence for a person who decides the call, with what they
// can do about it.
func Warning(u *airlockv1.UnknownTool, quote func(name string) string) string {
	return Sentence(u, quote) + "; reject or cancel it, or add the tool to " + quote("executor.tools_file") + " first"
}

// Said is u with its message set (Sentence), for an API answer; nil for nil.
func Said(u *airlockv1.UnknownTool) *airlockv1.UnknownTool {
	if u == nil {
		return nil
	}
	u.Message = Sentence(u, func(name string) string { return name })
	return u
}
