package executorapi

import (
	"fmt"
	"slices"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Absence is a tool the registry lacks, and what it has instead. A call of
// it waits for a person like any call no rule matches, but even approved it
// cannot run: it would end failed (unknown_tool).
type Absence struct {
	// Tool is the tool the call names, as server__tool.
	Tool string `json:"tool"`
	// Server is its server; ServerTools are that server's tools when the
	// registry has the server, Servers the registry's servers when it lacks
	// the server too.
	Server      string   `json:"server"`
	ServerTools []string `json:"server_tools,omitempty"`
	Servers     []string `json:"servers,omitempty"`
	// Message says it in a sentence: what the registry has, and that the
	// call cannot run.
	Message string `json:"message"`
}

// Lacks says whether list, the registry's tools (List), lacks tool of
// server: nil when it has it, or when that server could not be listed just
// now (it may have it).
func Lacks(list *airlockv1.ToolsListResponse, server, tool string) *Absence {
	for _, p := range list.GetProblems() {
		if p.GetServer() == server {
			return nil
		}
	}
	a := &Absence{Tool: server + "__" + tool, Server: server}
	var servers []string
	for _, t := range list.GetTools() {
		if t.GetServer() == server {
			if t.GetTool() == tool {
				return nil
			}
			a.ServerTools = append(a.ServerTools, t.GetTool())
		}
		if !slices.Contains(servers, t.GetServer()) {
			servers = append(servers, t.GetServer())
		}
	}
	has := "its servers are " + strings.Join(servers, ", ")
	if len(a.ServerTools) > 0 {
		has = fmt.Sprintf("server %s has %s", server, strings.Join(a.ServerTools, ", "))
	} else {
		a.Servers = servers
	}
	a.Message = absenceText(a.Tool, " ("+has+")")
	return a
}

// Bare is a without what the registry has instead, for those who may not
// read the registry (agents: they may not list airlock.api.executor.tools).
func (a *Absence) Bare() *Absence {
	if a == nil {
		return nil
	}
	return &Absence{Tool: a.Tool, Server: a.Server, Message: absenceText(a.Tool, "")}
}

func absenceText(tool, has string) string {
	return fmt.Sprintf("the tool registry has no tool %s%s: even approved, this call cannot run, it would end failed (unknown_tool)", tool, has)
}
