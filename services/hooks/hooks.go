// Package hooks translates between coding agents' tool hooks and airlock:
// a hook payload (what Claude Code, Cursor, Gemini CLI, GitHub Copilot CLI
// or Codex CLI writes on the hook's stdin) becomes an Event naming the tool
// call airlock decides, and airlock's Verdict becomes the answer in that
// agent's own format, with the exit status the agent treats as blocking.
//
// It is pure: no bus, no files, no clock. `airlock hook` (services/airlock)
// wires it to the SDK; the tests here replay recorded payloads per agent.
//
// Fail closed: every path that cannot reach a verdict (a payload that does
// not parse, an unknown event) is a deny with a reason, because several
// agents let a call through when their hook crashes or times out.
package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Agent names a coding agent airlock gates through its hooks.
type Agent string

// The agents airlock speaks to.
const (
	Claude  Agent = "claude"
	Cursor  Agent = "cursor"
	Gemini  Agent = "gemini"
	Copilot Agent = "copilot"
	Codex   Agent = "codex"
)

// Agents lists them in the order they are shown.
var Agents = []Agent{Claude, Cursor, Gemini, Copilot, Codex}

// ParseAgent reads an agent name; an unknown one is an error that lists the
// known ones.
func ParseAgent(s string) (Agent, error) {
	for _, a := range Agents {
		if string(a) == strings.ToLower(strings.TrimSpace(s)) {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown coding agent %q: use one of claude, cursor, gemini, copilot, codex", s)
}

// Kind is what a hook event asks of airlock.
type Kind int

const (
	// Other: nothing to decide or record (an event airlock does not handle);
	// the answer lets the agent carry on.
	Other Kind = iota
	// Pre: the agent is about to run a tool: decide it.
	Pre
	// Permission: the agent is about to ask its user about a tool (Claude
	// Code and Codex PermissionRequest): decide it, or let the user be asked.
	Permission
	// Post: the agent ran a tool: report the result.
	Post
)

func (k Kind) String() string {
	switch k {
	case Pre:
		return "pre-tool"
	case Permission:
		return "permission"
	case Post:
		return "post-tool"
	}
	return "other"
}

// Event is one hook invocation, read from the agent's payload.
type Event struct {
	Agent Agent
	// Name is the agent's own name of the event ("PreToolUse", "BeforeTool",
	// "beforeShellExecution", "preToolUse", ...).
	Name string
	Kind Kind
	// Session is the agent's session (conversation) id, as it gave it.
	Session string
	// ToolUseID is the agent's id of this tool use, when it gives one.
	ToolUseID string
	// AgentTool is the tool's name as the agent gave it.
	AgentTool string
	// Server and Tool are airlock's names for the tool: the agent's
	// built-in tools are <agent>__<Tool> ("claude__Bash"), an MCP tool is
	// <server>__<tool> of its own server ("github__create_issue").
	Server, Tool string
	// Args are the tool's arguments.
	Args map[string]any
	// Reason is what the model said the call is for, when the agent passes
	// it (Claude Code's Bash description); reviewers see it, airlock never
	// trusts it.
	Reason string
	// Cwd is the working directory the agent gave (the payload's cwd): it
	// travels with the call so a reviewer sees where a command runs.
	Cwd string
	// Result is the tool's result (Post), as JSON.
	Result json.RawMessage
	// Failed: the tool failed (Post); Error says how.
	Failed bool
	Error  string
}

// QualifiedTool is the name policies match: "server__tool".
func (e Event) QualifiedTool() string { return e.Server + "__" + e.Tool }

// ResultDigest is how a post-tool hook records a tool's result unless the
// operator keeps results (`airlock hook --record-results`): its size and
// the SHA-256 of its JSON text as the agent sent it, never the text. The
// agent already has the result; the shared audit trail would otherwise
// hold every file a Read returned and every command's output, secrets
// included (R9 F4). nil for no result.
func ResultDigest(result json.RawMessage) json.RawMessage {
	if len(result) == 0 {
		return nil
	}
	sum := sha256.Sum256(result)
	return mustRaw(map[string]any{
		"withheld":      "the agent's hook records a result's size and digest only (airlock hook --record-results keeps the text)",
		"result_bytes":  len(result),
		"result_sha256": hex.EncodeToString(sum[:]),
	})
}

// ErrorDigest is how a post-tool hook records a failed tool's error text
// unless the operator keeps results: its size and SHA-256, never the text,
// as ResultDigest does for a result. A failed command's error text holds
// what it printed (a failing `cat .env | grep`, a stack trace with a
// connection string), which the shared audit trail would otherwise keep.
// "" for no text.
func ErrorDigest(text string) string {
	if text == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(text))
	return fmt.Sprintf("the tool failed; its error text (%d bytes, SHA-256 %s) is withheld: the agent's hook records an error's size and digest only (airlock hook --record-results keeps the text)",
		len(text), hex.EncodeToString(sum[:]))
}

// Thread is the airlock thread of the event's session: the session id when
// it is already made of [A-Za-z0-9_-] (and short enough), else a digest of
// it, so that every session is its own thread. Empty without a session.
func (e Event) Thread() string { return MapID(e.Session, 128) }

// CallID is the airlock call id of the tool use when the agent gives the
// tool use an id of its own (Claude Code, Codex): the pre-tool and post-tool
// hooks then name the same call without keeping any state. ok is false for
// agents that give none; the caller must then remember the id it chose
// between the two hooks.
func (e Event) CallID() (string, bool) {
	if e.ToolUseID == "" {
		return "", false
	}
	return MapID(e.ToolUseID, 64), true
}

// StateKey names the tool use for an agent that gives it no id: the same
// session, tool and arguments in the pre-tool and the post-tool hook.
func (e Event) StateKey() string {
	args, _ := json.Marshal(e.Args) // encoding/json sorts map keys
	sum := sha256.Sum256([]byte(string(e.Agent) + "\x00" + e.Session + "\x00" + e.AgentTool + "\x00" + string(args)))
	return hex.EncodeToString(sum[:16])
}

var idChars = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// MapID maps an agent's id (a session, a tool use) to an airlock id of at
// most n characters from [A-Za-z0-9_-]: itself when it already is one,
// otherwise "h" and a digest of it, so that two different ids never map to
// the same one by accident. Empty stays empty.
func MapID(s string, n int) string {
	if s == "" {
		return ""
	}
	if len(s) <= n && idChars.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(sum[:])[:min(n-1, 40)]
}

// Action is airlock's answer about a tool call.
type Action int

const (
	Deny Action = iota // the zero value: fail closed
	Allow
	// Ask lets the agent ask its own user (where it can).
	Ask
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	}
	return "deny"
}

// Verdict is what `airlock hook` tells the agent about a tool call.
type Verdict struct {
	Action Action
	// Reason is what the model (deny) or the person (ask, allow) reads.
	// There are no edited arguments: a gate-only call runs with the
	// arguments the agent asked for (airlock refuses an edited approval).
	Reason string
}

// Output is the hook process's answer: what it writes to stdout and stderr,
// and its exit status.
type Output struct {
	Stdout []byte
	Stderr string
	Exit   int
}

// spec is how one agent's hooks speak.
type spec struct {
	// parse reads a payload; event is the caller's override of the event
	// name ("" to read it from the payload).
	parse func(payload map[string]any, event string) (Event, error)
	// respond renders a verdict about a Pre or Permission event.
	respond func(ev Event, v Verdict) Output
	// ack is the answer to a Post or Other event (nothing to decide).
	ack []byte
	// preEvent is the event name a failed payload is answered as.
	preEvent string
	// others are the agent's documented events that decide no tool call
	// (session, prompt and report-only events): they are acknowledged. Any
	// other event airlock does not handle is denied, because a new event
	// may be one that runs something (Cursor's beforeTabFileRead).
	others []string
}

var specs = map[Agent]spec{
	Claude: {parse: parseClaude(Claude), respond: respondClaude, preEvent: "PreToolUse", others: claudeOthers},
	Codex:  {parse: parseClaude(Codex), respond: respondCodex, preEvent: "PreToolUse", others: claudeOthers},
	Gemini: {parse: parseGemini, respond: respondGemini, ack: []byte("{}\n"), preEvent: "BeforeTool",
		others: []string{"SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel", "BeforeToolSelection", "PreCompress", "Notification"}},
	Cursor: {parse: parseCursor, respond: respondCursor, ack: []byte("{}\n"), preEvent: "beforeShellExecution",
		others: []string{"beforeSubmitPrompt", "afterFileEdit", "afterTabFileEdit", "afterAgentResponse", "afterAgentThought", "stop", "sessionStart", "sessionEnd"}},
	Copilot: {parse: parseCopilot, respond: respondCopilot, ack: []byte("{}\n"), preEvent: "preToolUse",
		others: []string{"sessionStart", "sessionEnd", "userPromptSubmitted", "errorOccurred"}},
}

// claudeOthers are Claude Code's (and Codex CLI's) events that decide no
// tool call.
var claudeOthers = []string{"SessionStart", "SessionEnd", "UserPromptSubmit", "Notification", "Stop", "SubagentStop", "PreCompact"}

// Parse reads agent's hook payload. event, when not empty, is the event
// name to assume (for agents whose payload does not name it, such as
// GitHub Copilot CLI; `airlock hook install` passes it). A payload that is
// not a JSON object, names no tool for a tool event, or names an unknown
// event is an error: answer it with Fail.
func Parse(agent Agent, event string, payload []byte) (Event, error) {
	sp, ok := specs[agent]
	if !ok {
		return Event{}, fmt.Errorf("unknown coding agent %q", agent)
	}
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return Event{}, fmt.Errorf("the %s hook payload is not a JSON object: %v", agent, errOr(err, "it is null"))
	}
	ev, err := sp.parse(m, event)
	if err != nil {
		return Event{}, err
	}
	ev.Agent = agent
	if ev.AgentTool == "" {
		ev.AgentTool = ev.Tool
	}
	if (ev.Kind == Pre || ev.Kind == Permission || ev.Kind == Post) && ev.Tool == "" {
		return Event{}, fmt.Errorf("the %s %s payload names no tool", agent, ev.Name)
	}
	if ev.Kind == Other && !slices.Contains(sp.others, ev.Name) {
		return Event{}, fmt.Errorf("airlock does not know the %s hook event %q; an event it does not know may run something, so it is denied (fail closed): remove it from the agent's hook settings or upgrade airlock", agent, ev.Name)
	}
	return ev, nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// Respond renders v as the answer to ev (a Pre or Permission event) in the
// agent's format. A deny always uses the exit status the agent treats as
// blocking and carries the reason on stderr too. Ask where the agent cannot
// ask is a deny.
func Respond(ev Event, v Verdict) Output {
	sp := specs[ev.Agent]
	if sp.respond == nil {
		return Output{Stderr: v.Reason + "\n", Exit: 2}
	}
	return sp.respond(ev, v)
}

// Fail is the fail-closed answer when there is no verdict: a deny with
// reason in the agent's pre-tool format (event names the event when it is
// known) and the blocking exit status.
func Fail(agent Agent, event, reason string) Output {
	sp, ok := specs[agent]
	if !ok {
		return Output{Stderr: reason + "\n", Exit: 2}
	}
	if event == "" {
		event = sp.preEvent
	}
	kind := Pre
	if isPermissionEvent(event) {
		kind = Permission
	}
	return sp.respond(Event{Agent: agent, Name: event, Kind: kind}, Verdict{Action: Deny, Reason: reason})
}

// Acknowledge answers a Post or Other event: nothing to decide, so the
// agent carries on. problem, when not empty, is shown to the user as a
// warning (exit status 1, which no agent treats as blocking: the tool has
// already run).
func Acknowledge(ev Event, problem string) Output {
	out := Output{Stdout: specs[ev.Agent].ack}
	if problem != "" {
		out.Stderr, out.Exit = problem+"\n", 1
	}
	return out
}

func isPermissionEvent(name string) bool { return name == "PermissionRequest" }

// denyOutput is the common shape of a deny: the agent's JSON on stdout, the
// reason on stderr (where agents that block on exit 2 read it) and exit 2.
func denyOutput(stdout any, reason string) Output {
	return Output{Stdout: mustJSON(stdout), Stderr: reason + "\n", Exit: 2}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings and of the tool's own (already decoded)
		// arguments reach here; this cannot fail.
		panic(err)
	}
	return append(b, '\n')
}
