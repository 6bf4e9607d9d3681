package teams

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/lookalike"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// Verbs an action's data carries in its "airlock" field. Only the data of
// the action (verb, agent, call, revision) and the reason input are read
// back from an activity; nothing is ever parsed from a card's text.
const (
	VerbApprove        = "approve"
	VerbReject         = "reject"
	VerbRequestChanges = "request_changes"
	// InputReason is the id of the reason input of Reject and Request
	// changes; Teams sends its value beside the action's data.
	InputReason = "reason"
)

// ContentType is an Adaptive Card attachment's.
const ContentType = "application/vnd.microsoft.card.adaptive"

// Limits that keep a card readable (and inside Teams' 28 KB activity
// limit) whatever an agent sends; arguments are bounded by
// notify.ArgumentLines.
const (
	maxReasonChars = 600
	maxTitleChars  = 140
)

// ActionData is what every decision action of a card carries: the verb,
// and the call and revision the card shows, with its agent. Teams returns
// it (with the reason input) in the activity's value, inside a message the
// Bot Framework signed.
type ActionData struct {
	Verb     string `json:"airlock"`
	Agent    string `json:"agent"`
	Call     string `json:"call"`
	Revision uint32 `json:"rev"`
	Reason   string `json:"reason,omitempty"`
}

// Card is an Adaptive Card, as JSON objects.
type Card = map[string]any

// Render draws the Adaptive Card for rec in its current state: the actions
// while it is pending, the outcome once it is decided. publicURL is the
// console's base URL (config http.public_url).
//
// Every string the card did not write itself (tool, arguments, reasons,
// names) is in a TextRun, which Adaptive Cards draw without markdown, and
// escaped (escape.Teams): it shows as the characters it is.
func Render(rec *airlockv1.ApprovalRecord, publicURL string) Card {
	call, d := rec.GetCall(), rec.GetDecision()
	link := notify.ConsoleURL(publicURL, call.GetAgentId(), call.GetCallId())
	agent := escape.TeamsLine(call.GetAgentId())
	if call.GetOnBehalfOf() != "" {
		agent += " on behalf of " + calls.OnBehalfOfText(call, escape.TeamsLine)
	}
	why := escape.Teams(calls.Shorten(orDash(d.GetReason()), maxReasonChars))
	if d.GetRuleId() != "" {
		why += " (rule " + escape.TeamsLine(d.GetRuleId()) + ")"
	}
	if slices.Contains(d.GetApprovers(), calls.Requester) {
		why += "\nOnly the person this call acts for may confirm it."
	}
	args, whole := notify.ArgumentLines(rec)
	body := []any{
		rich(run(escape.TeamsLine(calls.Shorten(statusWord(rec)+": "+calls.QualifiedTool(call), maxTitleChars)), "size", "Large", "weight", "Bolder")),
		field("Tool", escape.TeamsLine(calls.QualifiedTool(call))),
		field("Risk", calls.RiskName(d.GetRisk())),
		field("Agent", agent),
	}
	if warnings := lookalike.Warnings(call, d.GetRedact(), escape.TeamsLine); len(warnings) > 0 {
		body = append(body, map[string]any{"type": "RichTextBlock", "id": "lookalikes",
			"inlines": []any{run("⚠ "+strings.Join(warnings, "\n⚠ "), "color", "Warning")}})
	}
	body = append(body,
		field("Deadline", deadlineText(rec)),
		field("Why a person must decide", why),
	)
	if call.GetReason() != "" {
		// One line: the agent's line breaks must not draw lines that pass
		// for the card's own fields below its label.
		body = append(body, field("Agent's stated reason", escape.TeamsLine(calls.Shorten(call.GetReason(), maxReasonChars))))
	}
	body = append(body,
		rich(run("Arguments", "weight", "Bolder")),
		map[string]any{"type": "RichTextBlock", "separator": true, "inlines": []any{run(escape.Teams(args), "fontType", "Monospace")}},
	)
	// What the call would do (preview.Notified), escaped like the arguments.
	summary, excerpt := preview.Notified(rec)
	body = append(body, field("Preview", escape.TeamsLine(summary)))
	if excerpt != "" {
		body = append(body, map[string]any{"type": "RichTextBlock", "id": "preview", "inlines": []any{run(escape.Teams(excerpt), "fontType", "Monospace")}})
	}
	body = append(body,
		rich(run(fmt.Sprintf("call %s · revision %d", escape.TeamsLine(call.GetCallId()), call.GetRevision()), "isSubtle", true, "size", "Small")),
	)
	actions := []any{openURL("Open in console", link)}
	if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		if q := quorumText(rec); q != "" {
			body = append(body, rich(run(q, "isSubtle", true)))
		}
		actions = decisionActions(rec, whole, publicURL)
	} else {
		body = append(body, map[string]any{"type": "RichTextBlock", "separator": true, "id": "outcome",
			"inlines": []any{run(OutcomeText(rec), "weight", "Bolder")}})
	}
	return Card{
		"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "version": "1.4",
		"msteams": map[string]any{"width": "Full"},
		"body":    body, "actions": actions,
	}
}

// WithClient adds line, which says whether the agent's MCP client still
// waits for the outcome (clientwait.CardLine), to a pending call's card,
// below its details; "" adds nothing.
func WithClient(c Card, line string) Card {
	body, ok := c["body"].([]any)
	if line == "" || !ok {
		return c
	}
	out := maps.Clone(c)
	out["body"] = append(slices.Clone(body), map[string]any{"type": "RichTextBlock", "id": "client",
		"inlines": []any{run(escape.Teams(line), "isSubtle", true)}})
	return out
}

// decisionActions are Approve (only when the card shows every argument
// whole: what the reviewer never saw is approved in the console), Reject
// and Request changes (each opens a form with a required reason), and the
// console's pages. whole is whether the card shows every argument in
// full (notify.ArgumentLines).
func decisionActions(rec *airlockv1.ApprovalRecord, whole bool, publicURL string) []any {
	call := rec.GetCall()
	data := func(verb string) ActionData {
		return ActionData{Verb: verb, Agent: call.GetAgentId(), Call: call.GetCallId(), Revision: call.GetRevision()}
	}
	withReason := func(title, label, submit, verb string) map[string]any {
		return map[string]any{"type": "Action.ShowCard", "title": title, "card": map[string]any{
			"type": "AdaptiveCard",
			"body": []any{map[string]any{"type": "Input.Text", "id": InputReason, "label": label, "isMultiline": true,
				"isRequired": true, "maxLength": 2000, "errorMessage": "Write a few words: the agent receives them."}},
			"actions": []any{map[string]any{"type": "Action.Submit", "title": submit, "data": data(verb)}},
		}}
	}
	link := notify.ConsoleURL(publicURL, call.GetAgentId(), call.GetCallId())
	var out []any
	if whole {
		out = append(out, map[string]any{"type": "Action.Submit", "title": "Approve", "style": "positive", "data": data(VerbApprove)})
	}
	out = append(out,
		withReason("Reject", "Reason (the agent receives it; the call will not run)", "Reject", VerbReject),
		withReason("Request changes", "What should change? (the agent may submit a revised call)", "Send feedback", VerbRequestChanges),
		openURL("Open in console", link),
	)
	if whole {
		out = append(out, openURL("Always allow…", notify.RememberURL(publicURL, call.GetAgentId(), call.GetCallId(), call.GetRevision())))
	}
	return out
}

// OutcomeText is the sentence that replaces the actions once a call is
// decided: who decided, where (or "agent": an agent cancels its own
// calls), and what they said, on one line (escape.TeamsLine), so that no
// reason can draw lines that pass for the outcome's own ("Approved by …",
// "The tool ran …").
func OutcomeText(rec *airlockv1.ApprovalRecord) string {
	by := actorText(rec.GetDecidedBy())
	reason := ""
	if r := rec.GetReason(); r != "" {
		reason = ": " + escape.TeamsLine(calls.Shorten(r, maxReasonChars))
	}
	ran := "The tool ran"
	if rec.GetCall().GetAgentRuns() {
		ran = "The agent ran the tool itself"
	}
	switch rec.GetState() {
	case airlockv1.ApprovalState_APPROVAL_STATE_APPROVED:
		return "Approved by " + by + reason
	case airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING:
		return "Approved by " + by + reason + "\nRunning now."
	case airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED:
		return "Approved by " + by + reason + "\n" + ran + " and completed."
	case airlockv1.ApprovalState_APPROVAL_STATE_FAILED:
		return "Approved by " + by + reason + "\n" + ran + " and failed; see the console."
	case airlockv1.ApprovalState_APPROVAL_STATE_REJECTED:
		return "Rejected by " + by + reason + "\nThe call will not run."
	case airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED:
		return "Changes requested by " + by + reason + "\nThe agent may submit a revised call."
	case airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:
		return "Expired: nobody decided before " + deadlineText(rec) + ". The call will not run."
	case airlockv1.ApprovalState_APPROVAL_STATE_CANCELED:
		return "Canceled by " + by + reason + "\nThe call will not run."
	}
	return "State: " + calls.StateText(rec.GetState())
}

func statusWord(rec *airlockv1.ApprovalRecord) string {
	if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		return "Approval needed"
	}
	s := calls.StateText(rec.GetState())
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func quorumText(rec *airlockv1.ApprovalRecord) string {
	q := rec.GetDecision().GetQuorum()
	if q <= 1 && len(rec.GetVotes()) == 0 {
		return ""
	}
	names := make([]string, 0, len(rec.GetVotes()))
	for _, v := range rec.GetVotes() {
		names = append(names, actorText(v.GetBy()))
	}
	s := fmt.Sprintf("Approvals: %d of %d", len(rec.GetVotes()), max(q, 1))
	if len(names) > 0 {
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}

func actorText(a *airlockv1.Actor) string {
	if a.GetId() == "" {
		return "airlock"
	}
	s := escape.TeamsLine(a.GetId())
	if note := calls.ActorNote(a); note != "" {
		s += " (" + escape.TeamsLine(note) + ")"
	}
	return s
}

func deadlineText(rec *airlockv1.ApprovalRecord) string {
	if rec.GetDeadline() == nil {
		return "none"
	}
	return rec.GetDeadline().AsTime().UTC().Format(time.DateOnly + " 15:04 UTC")
}

// run is a TextRun: text drawn as it is, with no markdown.
func run(text string, props ...any) map[string]any {
	r := map[string]any{"type": "TextRun", "text": text}
	for i := 0; i+1 < len(props); i += 2 {
		r[props[i].(string)] = props[i+1]
	}
	return r
}

func rich(runs ...any) map[string]any {
	return map[string]any{"type": "RichTextBlock", "inlines": runs}
}

// field is a label the card writes and a value in its own run.
func field(label, value string) map[string]any {
	return rich(run(label+": ", "weight", "Bolder"), run(value))
}

func openURL(title, u string) map[string]any {
	return map[string]any{"type": "Action.OpenUrl", "title": title, "url": u}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
