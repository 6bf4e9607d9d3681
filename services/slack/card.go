package slack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/lookalike"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// Action ids of the card's buttons, and the block and callback ids the
// interactions endpoint recognises. Only these ids (and the JSON value of
// the button) are read back from Slack; nothing is ever parsed from text.
const (
	ActionApprove        = "airlock_approve"
	ActionReject         = "airlock_reject"
	ActionRequestChanges = "airlock_request_changes"
	ActionOpenConsole    = "airlock_open_console"
	// ActionRemember links to the console's "always allow" form for the
	// call (a remembered decision: a command prefix or exact arguments).
	ActionRemember = "airlock_remember"
	BlockActions   = "airlock_actions"
	CallbackReason = "airlock_reason"
	BlockReason    = "airlock_reason_block"
	InputReason    = "airlock_reason_input"
)

// Limits that keep a card inside Slack's block limits (section text 3000
// characters, header 150, button value 2000) whatever an agent sends; the
// argument summary's own limits are notify.ArgumentLines'.
const (
	maxReasonChars = 600 // policy reason, agent reason, reviewer reason
	maxHeaderChars = 140
	maxCwdChars    = 300 // a field's text holds 2,000 characters, entities included
)

// ButtonValue is what every card button carries: the call and the revision
// the card shows, and the agent (needed for the event subject when a
// refusal is recorded). Slack returns it verbatim in the signed interaction
// payload, so the endpoint never reads ids from message text.
type ButtonValue struct {
	Call     string `json:"call"`
	Revision uint32 `json:"rev"`
	Agent    string `json:"agent"`
}

// Encode returns the value string for a button.
func (v ButtonValue) Encode() string {
	b, _ := json.Marshal(v) // three plain fields: cannot fail
	return string(b)
}

// ParseButtonValue reads a value written by Encode.
func ParseButtonValue(s string) (ButtonValue, error) {
	var v ButtonValue
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return v, fmt.Errorf("button value %.60q is not an airlock value: %w", s, err)
	}
	if v.Call == "" || v.Agent == "" {
		return v, fmt.Errorf("button value %.60q lacks the call or agent id", s)
	}
	return v, nil
}

// Message is a rendered card: the notification text (what Slack shows in
// notifications and to screen readers) and the blocks.
type Message struct {
	Text   string
	Blocks []slackgo.Block
}

// Options returns the chat.postMessage / chat.update options for m.
func (m Message) Options() []slackgo.MsgOption {
	return []slackgo.MsgOption{slackgo.MsgOptionText(m.Text, false), slackgo.MsgOptionBlocks(m.Blocks...)}
}

// ConsoleLink is the console page of a call.
func ConsoleLink(publicURL, agent, callID string) string {
	return notify.ConsoleURL(publicURL, agent, callID)
}

// Render draws the card for rec in its current state: the buttons while it
// is pending, the outcome once it is decided. publicURL is the console's
// base URL (config http.public_url).
func Render(rec *airlockv1.ApprovalRecord, publicURL string) Message {
	call := rec.GetCall()
	blocks := []slackgo.Block{
		slackgo.NewHeaderBlock(plain(escape.SlackPlain(calls.Shorten(headerText(rec), maxHeaderChars)))),
	}
	args, whole := notify.ArgumentLines(rec)
	blocks = append(blocks, detailBlocks(rec, args, publicURL)...)
	if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		if q := quorumText(rec); q != "" {
			blocks = append(blocks, slackgo.NewContextBlock("airlock_quorum", mrkdwn(q)))
		}
		blocks = append(blocks, actionsBlock(rec, whole, publicURL))
	} else {
		blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn(OutcomeText(rec)), nil, nil, slackgo.SectionBlockOptionBlockID("airlock_outcome")))
	}
	return Message{Text: escape.SlackText(fmt.Sprintf("%s: %s (risk %s, call %s)", statusWord(rec), calls.QualifiedTool(call), calls.RiskName(rec.GetDecision().GetRisk()), call.GetCallId())), Blocks: blocks}
}

// WithClient adds line, which says whether the agent's MCP client still
// waits for the outcome (clientwait.CardLine), to a pending call's card,
// above its buttons; "" adds nothing.
func WithClient(m Message, line string) Message {
	if line == "" || len(m.Blocks) == 0 {
		return m
	}
	last := len(m.Blocks) - 1
	blocks := append(slices.Clone(m.Blocks[:last]), slackgo.NewContextBlock("airlock_client", mrkdwn(":hourglass_flowing_sand: "+escape.SlackText(line))), m.Blocks[last])
	return Message{Text: m.Text, Blocks: blocks}
}

// RenderSuperseded draws a card for a revision the agent has since
// replaced: it keeps the details of what the card showed and says where
// the call stands now, without buttons.
func RenderSuperseded(rec *airlockv1.ApprovalRecord, cardRevision uint32, publicURL string) Message {
	m := Render(rec, publicURL)
	m.Blocks = append(m.Blocks[:len(m.Blocks)-1], slackgo.NewSectionBlock(mrkdwn(fmt.Sprintf(
		":arrows_counterclockwise: This card is for revision %d; the agent has since submitted revision %d (%s), which has its own message.",
		cardRevision, rec.GetCall().GetRevision(), calls.StateText(rec.GetState()))), nil, nil, slackgo.SectionBlockOptionBlockID("airlock_outcome")))
	m.Text = fmt.Sprintf("Superseded: %s (call %s)", calls.QualifiedTool(rec.GetCall()), rec.GetCall().GetCallId())
	return m
}

func headerText(rec *airlockv1.ApprovalRecord) string {
	return statusWord(rec) + ": " + calls.QualifiedTool(rec.GetCall())
}

func statusWord(rec *airlockv1.ApprovalRecord) string {
	if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		return "Approval needed"
	}
	return capitalize(calls.StateText(rec.GetState()))
}

// detailBlocks draws what a reviewer reads; args is argumentLines' text.
func detailBlocks(rec *airlockv1.ApprovalRecord, args, publicURL string) []slackgo.Block {
	call, d := rec.GetCall(), rec.GetDecision()
	agent := escape.Slack(call.GetAgentId())
	if call.GetOnBehalfOf() != "" {
		agent += " on behalf of " + calls.OnBehalfOfText(call, escape.Slack)
	}
	fields := []*slackgo.TextBlockObject{
		mrkdwn("*Tool*\n" + escape.Slack(calls.QualifiedTool(call))),
		mrkdwn("*Risk*\n" + riskBadge(d.GetRisk())),
		mrkdwn("*Agent*\n" + agent),
		mrkdwn("*Deadline*\n" + deadlineText(rec.GetDeadline().AsTime(), rec.GetDeadline() != nil)),
	}
	if cwd := call.GetCwd(); cwd != "" { // the agent's choice, where a relative path in the arguments takes effect
		fields = append(fields, mrkdwn("*Working directory*\n"+escape.Slack(calls.Shorten(cwd, maxCwdChars))))
	}
	blocks := []slackgo.Block{slackgo.NewSectionBlock(nil, fields, nil, slackgo.SectionBlockOptionBlockID("airlock_fields"))}
	if warnings := lookalike.Warnings(call, d.GetRedact(), escape.Slack); len(warnings) > 0 {
		blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn(":warning: "+strings.Join(warnings, "\n:warning: ")), nil, nil, slackgo.SectionBlockOptionBlockID("airlock_lookalikes")))
	}

	why := "*Why a person must decide:* " + escape.SlackText(calls.Shorten(orDash(d.GetReason()), maxReasonChars))
	if d.GetRuleId() != "" {
		why += " _(rule " + escape.Slack(d.GetRuleId()) + ")_"
	}
	if slices.Contains(d.GetApprovers(), calls.Requester) {
		who := "the person this call acts for"
		// Named only when airlock verified them: an agent's claim is no
		// one's to confirm (calls.RequesterMayDecide), and the Agent field
		// already shows it as the claim it is.
		if call.GetOnBehalfOf() != "" && call.GetOnBehalfOfVerified() {
			who = escape.Slack(call.GetOnBehalfOf()) + ", " + who + ","
		}
		why += "\n*Self-confirmation:* only " + who + " may confirm it"
		if len(d.GetApprovers()) > 1 {
			why += " (or another approver)"
		}
		why += "."
	}
	if call.GetAgentRuns() {
		why += "\n_The agent runs this tool itself; airlock only decides._"
	}
	if call.GetReason() != "" {
		why += "\n*Agent's stated reason:* " + escape.Slack(calls.Shorten(call.GetReason(), maxReasonChars))
	}
	blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn(why), nil, nil, slackgo.SectionBlockOptionBlockID("airlock_reason")))

	blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn("*Arguments*\n```"+escape.SlackBlock(args)+"```"), nil, nil, slackgo.SectionBlockOptionBlockID("airlock_arguments")))
	blocks = append(blocks, previewBlock(rec))

	ctx := fmt.Sprintf("call %s · revision %d", escape.Slack(call.GetCallId()), call.GetRevision())
	if call.GetThreadId() != "" {
		ctx += " · thread " + escape.Slack(call.GetThreadId())
	}
	ctx += " · <" + ConsoleLink(publicURL, call.GetAgentId(), call.GetCallId()) + "|Open in the console>"
	blocks = append(blocks, slackgo.NewContextBlock("airlock_ids", mrkdwn(ctx)))
	return blocks
}

// maxPreviewChars bounds the preview section (Slack refuses a section
// over 3,000 characters; escaping can lengthen the excerpt).
const maxPreviewChars = 2000

// previewBlock shows what the call would do: the preview's summary and the
// start of its text (preview.Notified), escaped.
func previewBlock(rec *airlockv1.ApprovalRecord) slackgo.Block {
	summary, excerpt := preview.Notified(rec)
	text := "*Preview:* " + escape.SlackText(summary)
	if excerpt != "" {
		text += "\n```" + calls.Shorten(escape.SlackBlock(excerpt), maxPreviewChars) + "```"
	}
	return slackgo.NewSectionBlock(mrkdwn(text), nil, nil, slackgo.SectionBlockOptionBlockID("airlock_preview"))
}

// actionsBlock draws the buttons; whole says whether the card shows every
// argument whole (argumentLines), and only then is Approve among them.
func actionsBlock(rec *airlockv1.ApprovalRecord, whole bool, publicURL string) slackgo.Block {
	call := rec.GetCall()
	value := ButtonValue{Call: call.GetCallId(), Revision: call.GetRevision(), Agent: call.GetAgentId()}.Encode()
	approve := slackgo.NewButtonBlockElement(ActionApprove, value, plain("Approve"))
	approve.Style = slackgo.StylePrimary
	reject := slackgo.NewButtonBlockElement(ActionReject, value, plain("Reject"))
	reject.Style = slackgo.StyleDanger
	changes := slackgo.NewButtonBlockElement(ActionRequestChanges, value, plain("Request changes"))
	console := slackgo.NewButtonBlockElement(ActionOpenConsole, "", plain("Open in console")).WithURL(ConsoleLink(publicURL, call.GetAgentId(), call.GetCallId()))
	remember := slackgo.NewButtonBlockElement(ActionRemember, "", plain("Always allow…")).WithURL(notify.RememberURL(publicURL, call.GetAgentId(), call.GetCallId(), call.GetRevision()))
	if !whole {
		// Not every argument is on the card: it is approved in the console.
		return slackgo.NewActionBlock(BlockActions, reject, changes, console)
	}
	return slackgo.NewActionBlock(BlockActions, approve, reject, changes, console, remember)
}

// OutcomeText is the sentence that replaces the buttons once a call is
// decided: who decided, where, and what they said.
func OutcomeText(rec *airlockv1.ApprovalRecord) string {
	by := actorText(rec.GetDecidedBy())
	reason := ""
	if r := rec.GetReason(); r != "" {
		reason = ": " + escape.Slack(calls.Shorten(r, maxReasonChars))
	}
	switch rec.GetState() {
	case airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING,
		airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, airlockv1.ApprovalState_APPROVAL_STATE_FAILED:
		s := ":white_check_mark: *Approved* by " + approversText(rec, by) + reason
		if rec.GetEditedArguments() != nil {
			s += "\n_Approved with edited arguments._"
		}
		ran := "The tool ran"
		if rec.GetCall().GetAgentRuns() {
			ran = "The agent ran the tool itself"
			if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_APPROVED {
				s += "\nThe agent runs the tool itself; airlock records the result it reports."
			}
		}
		switch rec.GetState() {
		case airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING:
			s += "\nRunning now."
		case airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED:
			s += "\n" + ran + " and completed."
		case airlockv1.ApprovalState_APPROVAL_STATE_FAILED:
			s += "\n" + ran + " and failed; see the console."
		}
		return s
	case airlockv1.ApprovalState_APPROVAL_STATE_REJECTED:
		return ":no_entry: *Rejected* by " + by + reason + "\nThe call will not run."
	case airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED:
		return ":leftwards_arrow_with_hook: *Changes requested* by " + by + reason + "\nThe agent may submit a revised call."
	case airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:
		return ":hourglass: *Expired*: nobody decided before " + deadlineText(rec.GetDeadline().AsTime(), rec.GetDeadline() != nil) + ". The call will not run."
	case airlockv1.ApprovalState_APPROVAL_STATE_CANCELED:
		return ":heavy_multiplication_x: *Canceled* by " + by + reason + "\nThe call will not run."
	case airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
		return ":hourglass_flowing_sand: *Waiting for a decision.*"
	}
	return "State: " + calls.StateText(rec.GetState())
}

// approversText names everyone whose approval counted when there was a quorum.
func approversText(rec *airlockv1.ApprovalRecord, decidedBy string) string {
	if len(rec.GetVotes()) < 2 {
		return decidedBy
	}
	var names []string
	for _, v := range rec.GetVotes() {
		names = append(names, actorText(v.GetBy()))
	}
	return strings.Join(names, ", ")
}

func quorumText(rec *airlockv1.ApprovalRecord) string {
	q := rec.GetDecision().GetQuorum()
	if q <= 1 && len(rec.GetVotes()) == 0 {
		return ""
	}
	if q == 0 {
		q = 1
	}
	var names []string
	for _, v := range rec.GetVotes() {
		names = append(names, actorText(v.GetBy()))
	}
	s := fmt.Sprintf("Approvals: %d of %d", len(rec.GetVotes()), q)
	if len(names) > 0 {
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}

func actorText(a *airlockv1.Actor) string {
	if a == nil || a.GetId() == "" {
		return "airlock"
	}
	s := "*" + escape.SlackText(a.GetId()) + "*"
	if note := calls.ActorNote(a); note != "" {
		s += " (" + escape.SlackText(note) + ")"
	}
	return s
}

func riskBadge(r airlockv1.Risk) string {
	emoji := map[airlockv1.Risk]string{
		airlockv1.Risk_RISK_LOW: ":large_green_circle:", airlockv1.Risk_RISK_MEDIUM: ":large_yellow_circle:",
		airlockv1.Risk_RISK_HIGH: ":large_orange_circle:", airlockv1.Risk_RISK_CRITICAL: ":red_circle:",
	}[r]
	if emoji == "" {
		emoji = ":white_circle:"
	}
	return emoji + " " + calls.RiskName(r)
}

// deadlineText uses Slack's date formatting so each reader sees their own
// time zone; the fallback is UTC.
func deadlineText(t time.Time, set bool) string {
	if !set {
		return "none"
	}
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

func plain(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, s, false, false)
}

// mrkdwn is verbatim: Slack turns no bare URL, channel or user name in it
// into a link or a mention.
func mrkdwn(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, s, false, true)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
