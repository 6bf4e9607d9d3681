package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlock-gate/airlock/services/shared/calls"
)

// Request is one tool invocation handed to an adapter.
type Request struct {
	// Server and Tool name the tool; the registry's name for it is Server + "__" + Tool.
	Server, Tool string
	// Arguments are the approved arguments, a JSON object.
	Arguments map[string]any
	// IdempotencyKey is the same for every attempt of one call revision, so
	// a tool that deduplicates on it recognises a retry after a crash.
	IdempotencyKey string
	CallID         string
	Revision       uint32
	Attempt        uint32
}

// Adapter runs the tools of one registry entry (an MCP server, a webhook
// endpoint, the built-in demo tools).
//
// Contract, checked for every adapter by the shared contract test suite:
//   - Call returns the tool's result as a JSON value, or an error;
//   - a failure the tool itself reports is a *ToolError (the call ran and said no);
//   - a tool the adapter does not have gives an error wrapping ErrUnknownTool;
//   - Call honours ctx: when ctx ends it returns promptly with an error
//     wrapping ctx's error;
//   - Call is safe for concurrent use;
//   - Tools lists the tool names (without the server prefix) Call accepts;
//   - no operation waits on a remote server without a deadline: a server
//     that cannot serve (unreachable, hung, gone mid-call) fails the calls
//     that need it with an *UpstreamError, and never those of other servers;
//   - Close releases processes and connections within a bounded time; it
//     may be called once.
type Adapter interface {
	Call(ctx context.Context, req Request) (json.RawMessage, error)
	Tools(ctx context.Context) ([]string, error)
	Close() error
}

// ErrUnknownTool: the adapter has no tool of that name.
var ErrUnknownTool = errors.New("unknown tool")

// ToolError is a failure reported by the tool (an MCP result with isError,
// a webhook answering with an error status). The call reached the tool.
type ToolError struct {
	Message string
	// Indeterminate is set when the tool may have applied its side effect
	// despite the error (a connection lost mid-request, a 5xx after the body
	// was sent), so a non-idempotent call must not be assumed not to have run.
	Indeterminate bool
	// Result is the tool's own error result, when it gave one (an MCP
	// CallToolResult with isError, as JSON): recorded in the `failed` event
	// so a front-end can return it exactly as the tool did.
	Result json.RawMessage
}

func (e *ToolError) Error() string { return e.Message }

// ReasonUpstream is the reason of a call that failed because its upstream
// server could not serve it (see UpstreamError).
const ReasonUpstream = "upstream_unavailable"

// UpstreamError: the upstream server of a tool (an MCP server) could not
// serve the call — it could not be started or reached, did not answer within
// its deadline, or went away mid-call. The adapter has already retired a
// session that hung or died, so a later call starts the server afresh.
//
// It is also a *ToolError (errors.As finds both), whose Indeterminate is
// Started: code that knows only ToolError still reports the right outcome.
type UpstreamError struct {
	// Server is the registry name of the upstream.
	Server string
	// Op is what failed: "open" (start, initialize, list tools), "list
	// tools", or "call <tool>".
	Op string
	// Started: the call reached the server, which may have applied it.
	Started bool
	Err     error
}

func (e *UpstreamError) Error() string {
	what := "the tool was not run; check that the server starts and answers (its command or URL in the tools file), then submit the call again"
	if e.Started {
		what = "the tool may or may not have run; check before submitting the call again"
	}
	return fmt.Sprintf("MCP server %s could not serve the call (%s): %v — %s", e.Server, e.Op, e.Err, what)
}

// Unwrap gives the cause and the equivalent *ToolError.
func (e *UpstreamError) Unwrap() []error {
	return []error{e.Err, &ToolError{Message: e.Error(), Indeterminate: e.Started}}
}

// Outcome is the failed event's outcome: indeterminate when the call may
// have reached the tool, error when it cannot have.
func (e *UpstreamError) Outcome() string {
	if e.Started {
		return calls.FailureIndeterminate
	}
	return calls.FailureError
}

// toolErrorf builds a determinate ToolError.
func toolErrorf(format string, args ...any) error {
	return &ToolError{Message: fmt.Sprintf(format, args...)}
}
