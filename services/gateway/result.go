package gateway

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
)

// result turns a call's outcome into the tools/call answer: the tool's own
// result exactly as the executor recorded it, or an isError result whose
// text tells the model what happened and what to do.
func (ep *endpoint) result(f *flight, out airlock.Outcome) *mcp.CallToolResult {
	name := f.tool.def.Name
	switch out.Status {
	case airlock.StatusCompleted:
		return ep.toolResult(f, out, false)
	case airlock.StatusFailed:
		if len(out.Result) > 0 && !out.Truncated && f.tool.up.GetKind() == executorapi.KindMCP {
			return ep.toolResult(f, out, true)
		}
		msg := fmt.Sprintf("%s failed: %s.", name, out.Reason)
		if out.FailureOutcome == calls.FailureIndeterminate {
			msg += " It may or may not have taken effect: check before calling it again."
		}
		return errorResult(string(out.Status), f.call.ID, msg)
	case airlock.StatusDenied:
		return errorResult(string(out.Status), f.call.ID, fmt.Sprintf(
			"airlock's policy denied this call to %s: %s. It will be denied again if called the same way; do something else or ask the user.", name, out.Reason))
	case airlock.StatusRejected:
		return errorResult(string(out.Status), f.call.ID, fmt.Sprintf(
			"%s rejected this call to %s: %s. Do not call it again the same way; ask the user how to proceed.", decider(out), name, reasonOr(out.Reason, "no reason given")))
	case airlock.StatusChangesRequested:
		return errorResult(string(out.Status), f.call.ID, fmt.Sprintf(
			"%s asked for changes before this call to %s can run: %s. Call the tool again with the arguments changed accordingly.", decider(out), name, reasonOr(out.Feedback, out.Reason)))
	case airlock.StatusExpired:
		return errorResult(string(out.Status), f.call.ID, fmt.Sprintf(
			"expired: nobody approved this call to %s before its deadline, so it did not run. Ask the user before calling it again.", name))
	case airlock.StatusCanceled:
		return errorResult(string(out.Status), f.call.ID, fmt.Sprintf("this call to %s was canceled and did not run: %s.", name, reasonOr(out.Reason, "no reason given")))
	case airlock.StatusInvalid:
		return errorResult(string(out.Status), f.call.ID, fmt.Sprintf("airlock refused this call to %s as malformed: %s. Fix the arguments and call it again.", name, out.Reason))
	}
	return errorResult(string(out.Status), f.call.ID, fmt.Sprintf("this call to %s ended %s: %s", name, out.Status, out.Reason))
}

// toolResult is the tool's result: an MCP server's CallToolResult as it
// sent it; another tool's JSON as text (and as structured content when it is
// an object).
func (ep *endpoint) toolResult(f *flight, out airlock.Outcome, isError bool) *mcp.CallToolResult {
	if out.Truncated {
		var t struct {
			OriginalBytes int    `json:"original_bytes"`
			Prefix        string `json:"prefix"`
		}
		_ = json.Unmarshal(out.Result, &t)
		return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"The result of %s was %d bytes, over airlock's size limit (executor.max_result_bytes); its first part:\n%s", f.tool.def.Name, t.OriginalBytes, t.Prefix)}}}
	}
	if f.tool.up.GetKind() == executorapi.KindMCP {
		if res, ok := plainTextResult(out.Result); ok {
			res.IsError = res.IsError || isError
			return res
		}
		res := &mcp.CallToolResult{}
		if err := json.Unmarshal(out.Result, res); err == nil {
			if res.Content == nil {
				res.Content = []mcp.Content{}
			}
			res.IsError = res.IsError || isError
			return res
		}
		ep.log.Warn("an MCP result did not decode; passing it on as text", "call", f.call.ID)
	}
	res := &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: string(out.Result)}}}
	var obj map[string]any
	if json.Unmarshal(out.Result, &obj) == nil && obj != nil {
		res.StructuredContent = obj
	}
	return res
}

// plainTextResult decodes the commonest result, text content only, without
// the SDK's decoder (which allocates tens of kilobytes per result); ok is
// false for anything else, which the SDK then decodes.
func plainTextResult(raw []byte) (*mcp.CallToolResult, bool) {
	var r struct {
		Meta              map[string]any    `json:"_meta"`
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return nil, false
	}
	res := &mcp.CallToolResult{Meta: r.Meta, IsError: r.IsError, Content: make([]mcp.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		var t map[string]json.RawMessage
		if json.Unmarshal(c, &t) != nil || len(t) != 2 || string(t["type"]) != `"text"` {
			return nil, false
		}
		var s string
		if json.Unmarshal(t["text"], &s) != nil {
			return nil, false
		}
		res.Content = append(res.Content, &mcp.TextContent{Text: s})
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		var v any
		if json.Unmarshal(r.StructuredContent, &v) != nil {
			return nil, false
		}
		res.StructuredContent = v
	}
	return res, true
}

// errorResult is an isError result for a call that did not give a tool
// result; _meta says how it ended and which call it was.
func errorResult(status, callID, text string) *mcp.CallToolResult {
	meta := mcp.Meta{"airlock/status": status}
	if callID != "" {
		meta["airlock/call_id"] = callID
	}
	return &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func decider(out airlock.Outcome) string {
	if out.DecidedBy == "" {
		return "A reviewer"
	}
	return out.DecidedBy
}

func reasonOr(s, alt string) string {
	if strings.TrimSpace(s) == "" {
		return alt
	}
	return strings.TrimSuffix(strings.TrimSpace(s), ".")
}
