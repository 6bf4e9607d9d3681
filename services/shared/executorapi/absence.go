package executorapi

import (
	"fmt"
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
	return absence(u, quote) + ": even approved, this call cannot run, it would end failed (unknown_tool)"
}

// Failure is Sentence for a call that has ended failed (unknown_tool): the
// executor's message of it, which its agent reads, so it says only what
// Bare keeps of u for those who may not read the registry.
func Failure(u *airlockv1.UnknownTool, quote func(name string) string) string {
	return absence(u, quote) + ": the call was not run (unknown_tool); call a tool the registry has, or add this one to the tools file (" + quote("executor.tools_file") + ") and call it again"
}

// MaxNamesSaid bounds the names a sentence lists of what the registry has
// instead: an upstream may have hundreds of tools, and the sentence goes
// into chat cards, pages and agents' answers.
const MaxNamesSaid = 10

// absence says that the registry has no tool u.Tool and, when u says, what
// it has instead: at most MaxNamesSaid names, the closest to the missing
// one first, and how many more.
func absence(u *airlockv1.UnknownTool, quote func(name string) string) string {
	var b strings.Builder
	b.WriteString("the tool registry has no tool ")
	b.WriteString(quote(u.GetTool()))
	list := func(names []string, missing string) {
		shown, more := closest(names, missing, MaxNamesSaid)
		for i, n := range shown {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(n))
		}
		if more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	switch {
	case len(u.GetServerTools()) > 0:
		b.WriteString(" (server " + quote(u.GetServer()) + " has ")
		list(u.GetServerTools(), strings.TrimPrefix(u.GetTool(), calls.ToolName(u.GetServer(), "")))
		b.WriteString(")")
	case len(u.GetServers()) > 0:
		b.WriteString(" (its servers are ")
		list(u.GetServers(), u.GetServer())
		b.WriteString(")")
	}
	return b.String()
}

// closest is names unchanged when they are no more than most; else the
// most of them that share the longest prefix with missing (a mistyped or
// renamed tool is likely among them), longest first, ties in the order
// given, and how many are left out.
func closest(names []string, missing string, most int) ([]string, int) {
	if len(names) <= most {
		return names, 0
	}
	ranked := slices.Clone(names)
	slices.SortStableFunc(ranked, func(a, b string) int {
		return commonPrefix(b, missing) - commonPrefix(a, missing)
	})
	return ranked[:most], len(names) - most
}

// commonPrefix is how many leading bytes a and b share.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
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
