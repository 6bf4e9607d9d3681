// Package calls holds the small facts about a tool call that every
// front-end shows the same way: its qualified tool name and its risk words.
package calls

import (
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// ToolName is "server__tool", the name policies, registries and people use;
// just the tool when there is no server.
func ToolName(server, tool string) string {
	if server == "" {
		return tool
	}
	return server + "__" + tool
}

// QualifiedTool is ToolName of a call.
func QualifiedTool(c *airlockv1.ToolCall) string { return ToolName(c.GetServer(), c.GetTool()) }

// RiskName is the lower-case word for a risk level ("low" … "critical"),
// "unrated" when the policy gave none.
func RiskName(r airlockv1.Risk) string {
	switch r {
	case airlockv1.Risk_RISK_LOW:
		return "low"
	case airlockv1.Risk_RISK_MEDIUM:
		return "medium"
	case airlockv1.Risk_RISK_HIGH:
		return "high"
	case airlockv1.Risk_RISK_CRITICAL:
		return "critical"
	}
	return "unrated"
}

// ParseRisk reads a risk word (any case, with or without the RISK_ prefix);
// anything else is RISK_UNSPECIFIED.
func ParseRisk(s string) airlockv1.Risk {
	s = strings.ToLower(strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "RISK_"))
	for r := airlockv1.Risk_RISK_LOW; r <= airlockv1.Risk_RISK_CRITICAL; r++ {
		if RiskName(r) == s {
			return r
		}
	}
	return airlockv1.Risk_RISK_UNSPECIFIED
}
