// Package calls holds the small facts about a tool call that every
// front-end shows the same way: its qualified tool name and its risk words.
package calls

import (
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

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

// Requester, among a decision's approvers, names the person the call acts
// for: the rule asks them to confirm their own call (self-confirmation,
// seeds 002 and 004). It counts only when airlock verified who that person
// is (ToolCall.on_behalf_of_verified); separation of duties stays the rule
// everywhere else.
const Requester = "requester"

// Unverified is what every surface adds to an on_behalf_of airlock did not
// verify: the agent named the person, and the agent may be lying.
const Unverified = "claimed by the agent, not verified"

// OnBehalfOfText is how a call's on_behalf_of is shown: the person as esc
// escapes an agent's words for the medium, with "(claimed by the agent,
// not verified)" after it unless airlock verified it
// (ToolCall.on_behalf_of_verified); "" when the call names nobody. The
// label is airlock's own words, written outside esc (a Slack code span
// holds only the agent's).
func OnBehalfOfText(c *airlockv1.ToolCall, esc func(string) string) string {
	p := c.GetOnBehalfOf()
	if p == "" {
		return ""
	}
	if c.GetOnBehalfOfVerified() {
		return esc(p)
	}
	return esc(p) + " (" + Unverified + ")"
}

// ActorNote is what every surface writes in brackets after the name of
// whoever decided or canceled a call: "agent" when an agent did (an
// agent cancels its own calls, and its reason is its own words, not a
// reviewer's), else the channel a person or service acted through; ""
// for neither.
func ActorNote(a *airlockv1.Actor) string {
	if a.GetType() == airlockv1.ActorType_ACTOR_TYPE_AGENT {
		return "agent"
	}
	return a.GetChannel()
}

// ActorTypeName is the lower-case word for who an actor is ("human",
// "agent", "service", "unspecified"), as the audit's actor_type column and
// the webhook's decided_by_type write it.
func ActorTypeName(a *airlockv1.Actor) string {
	return strings.ToLower(strings.TrimPrefix(a.GetType().String(), "ACTOR_TYPE_"))
}

// RequesterMayDecide reports whether person is the verified requester of a
// call whose decision names the requester among its approvers. "requester"
// is a role in rules, never a person: nobody of that name qualifies.
func RequesterMayDecide(c *airlockv1.ToolCall, d *airlockv1.Decision, person string) bool {
	if person == "" || person == Requester || person != c.GetOnBehalfOf() || !c.GetOnBehalfOfVerified() {
		return false
	}
	for _, a := range d.GetApprovers() {
		if a == Requester {
			return true
		}
	}
	return false
}

// PlainCommand reports whether a shell command is one simple command: no
// ; & | or new line chaining another, no backtick and no $ at all (the
// shell expands $(…), ${…}, $'…' and $((…)) into commands it runs) and no
// redirection (< >). Only a plain command can be matched by a prefix
// without letting something else ride along.
func PlainCommand(cmd string) bool {
	return strings.TrimSpace(cmd) != "" && !strings.ContainsAny(cmd, ";&|\n\r`<>()$")
}

// ShellWords returns the words bash passes to a plain command, quotes and
// escapes removed, or false when it cannot say them for certain: the
// command is not plain, a quote is left open, or an unquoted { (brace
// expansion) or glob character (* ? [, which file names could turn into
// options) is in it. `git diff "--output=F"` is the words git, diff,
// --output=F.
func ShellWords(cmd string) ([]string, bool) {
	if !PlainCommand(cmd) {
		return nil, false
	}
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			w.WriteString(cmd[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case c == '"':
			i++
			for ; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) && strings.IndexByte(`"\`, cmd[i+1]) >= 0 {
					i++ // $ and ` cannot occur: the command is plain
				}
				w.WriteByte(cmd[i])
			}
			if i == len(cmd) {
				return nil, false
			}
			inWord = true
		case c == '\\':
			if i+1 == len(cmd) {
				return nil, false
			}
			i++
			w.WriteByte(cmd[i])
			inWord = true
		case strings.IndexByte("{}*?[", c) >= 0:
			return nil, false
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, len(words) > 0
}

// RunsMore matches an option that makes a reading command run another
// command or write a file (rg --pre and --hostname-bin, git diff --output,
// --ext-diff, --textconv, git difftool --extcmd and --tool, …) where it
// starts a word. The policy's coding profile (airlock.rego) refuses the
// same options, in the same text, where they start a blank-separated part
// of a command.
const RunsMore = `--?(pre|output|ext-diff|textconv|exec|extcmd|tool|gui|hostname-bin|upload-pack|receive-pack|open-files-in-pager)\b`

var runsMore = regexp.MustCompile(`^` + RunsMore)

// runsMoreOptions are RunsMore's option names ("pre", "output", ...).
var runsMoreOptions = strings.Split(strings.TrimSuffix(strings.TrimPrefix(RunsMore, `--?(`), `)\b`), "|")

// abbreviatesRunsMore reports whether w is a long option whose name (before
// any "=") is a prefix of three or more characters of a RunsMore option:
// git and GNU tools accept unambiguous abbreviations, so --upload-pac=sh
// is --upload-pack=sh to git fetch.
func abbreviatesRunsMore(w string) bool {
	name, ok := strings.CutPrefix(w, "--")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, "=")
	if len(name) < 3 {
		return false
	}
	for _, o := range runsMoreOptions {
		if strings.HasPrefix(o, name) {
			return true
		}
	}
	return false
}

// CommandHasPrefix reports whether cmd is a plain command whose words (as
// bash passes them, ShellWords) start with the words of prefix: "git
// commit" matches "git commit -m 'fix it'" but not "git commit-tree" nor
// "git commit; rm -rf ~". The words after the prefix may hold no option
// that makes the command run or write something else (RunsMore): a
// remembered "git diff" never covers git diff "--output=~/.bashrc".
func CommandHasPrefix(cmd, prefix string) bool {
	c, ok := ShellWords(cmd)
	p := strings.Fields(prefix)
	if !ok || len(p) == 0 || len(c) < len(p) {
		return false
	}
	for i := range p {
		if c[i] != p[i] {
			return false
		}
	}
	for _, w := range c[len(p):] {
		if runsMore.MatchString(w) || abbreviatesRunsMore(w) {
			return false
		}
	}
	return true
}

// CommandPrefix is the first n words of a plain command as bash passes
// them (ShellWords; "" for any other command), what a person is offered to
// remember ("git commit" of "git commit -m x").
func CommandPrefix(cmd string, n int) string {
	f, ok := ShellWords(cmd)
	if !ok {
		return ""
	}
	return strings.Join(f[:min(n, len(f))], " ")
}

// Arg is the argument at a JSON pointer ("/path", "/opts/mode"; ~1 is "/"
// and ~0 is "~" inside a token), nil when there is none.
func Arg(args *structpb.Struct, ptr string) *structpb.Value {
	cur := structpb.NewStructValue(args)
	for _, tok := range PointerTokens(ptr) {
		st := cur.GetStructValue()
		if st == nil {
			return nil
		}
		if cur = st.GetFields()[tok]; cur == nil {
			return nil
		}
	}
	return cur
}

// StringArg is the string argument at a JSON pointer ("" and false when
// there is none or it is not a string).
func StringArg(args *structpb.Struct, ptr string) (string, bool) {
	s, ok := Arg(args, ptr).GetKind().(*structpb.Value_StringValue)
	if !ok {
		return "", false
	}
	return s.StringValue, true
}

// AgentRan says who ran a call, for the end of a call: "" for airlock's
// executor; for a gate-only call (ToolCall.agent_runs) that the agent ran
// itself and reported, that it did, and whether it says it ran other
// arguments than the ones airlock decided on.
func AgentRan(agentRan, argumentsDiffer bool) string {
	switch {
	case agentRan && argumentsDiffer:
		return "run by the agent itself and reported by it, with arguments other than the ones decided"
	case agentRan:
		return "run by the agent itself and reported by it"
	}
	return ""
}

// SnapshotText says, in one line, what a coding agent's hook reports it
// saved before a call (Completed/Failed.snapshot), "" when nothing. The
// hook runs on the agent's machine, so the line says whose word it is; its
// paths and note are agent text: escape the line for the medium that shows it.
func SnapshotText(s *airlockv1.Snapshot) string {
	if s == nil {
		return ""
	}
	what := fmt.Sprintf("%d file(s)", len(s.GetPaths())+int(s.GetMore()))
	if s.GetWholeTree() {
		what = "the whole work tree"
	}
	t := fmt.Sprintf("the agent's hook reports a snapshot (%s) of %s in %s: %s", s.GetKind(), what, s.GetRoot(), s.GetRef())
	if len(s.GetPaths()) > 0 && !s.GetWholeTree() {
		t += " [" + strings.Join(s.GetPaths(), ", ")
		if s.GetMore() > 0 {
			t += fmt.Sprintf(", and %d more", s.GetMore())
		}
		t += "]"
	}
	if s.GetAfter() == "" && s.GetKind() == "git" {
		t += "; state after the call not recorded"
	}
	if s.GetNote() != "" {
		t += "; " + s.GetNote()
	}
	return t
}

// Happened is a person's answer to "did it happen?" about a call that ended
// in doubt (failed, outcome indeterminate), as every surface words it.
func Happened(happened bool) string {
	if happened {
		return "it happened"
	}
	return "it did not happen"
}

// The outcomes of a failed call (Failed.outcome).
const (
	// FailureError: the tool did not apply the call.
	FailureError = "error"
	// FailureIndeterminate: the tool may or may not have applied the call;
	// it gets a "did it happen?" task.
	FailureIndeterminate = "indeterminate"
)
