package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

// callView is an approval record as the pages show it. Every string in it
// may come from an agent; templates escape them (html/template), and nothing
// here builds HTML.
type callView struct {
	ID, Agent, Thread, OnBehalfOf string
	// Key is unique across agents (call ids are not) and safe in an HTML id
	// and a CSS selector: the inbox row's id and what the live feed removes by.
	Key string
	// Path is the call's page, /calls/<agent>/<call>; ids are validated to
	// [A-Za-z0-9_-] where they enter, and escaped here all the same.
	Path string
	// ThreadCalls are the pending calls of the same agent's thread, listed
	// before "approve all of this thread" is confirmed.
	ThreadCalls                     []callView
	Server, Tool, FullTool, Reason  string
	Revision                        uint32
	Risk                            string
	HighRisk                        bool
	PolicyReason, RuleID, PolicyRev string
	Approvers                       []string
	State                           string
	Pending                         bool
	Created, Deadline, Updated      time.Time
	Args                            string // pretty JSON
	ArgsCompact                     string // one line, for summaries
	EditedArgs                      string
	ArgsDigest                      string // digest of the arguments shown (edited ones when edited)
	Edited                          bool
	Quorum                          int
	Votes                           []voteView
	DecidedBy, DecisionReason       string
	Diffs                           []textDiff
	GrantID                         string
	// AgentRuns: a gate-only call (a coding agent's hook): the agent runs
	// the tool itself, airlock only decides.
	AgentRuns bool
	// Queued: it waits behind an earlier call of its thread.
	Queued bool
	// SelfConfirm: its rule asks the person it acts for to confirm it.
	SelfConfirm bool
	// YouMayDecide: the signed-in person may send decisions about it.
	YouMayDecide bool
}

type voteView struct {
	By, Channel, Comment string
	At                   time.Time
}

// rowKey names an agent's call in the page: "<len(agent)>-<agent>-<call>".
// Ids are [A-Za-z0-9_-], so it is a valid id and selector, and the length
// keeps agent "a-b" with call "c" apart from agent "a" with call "b-c".
func rowKey(agent, call string) string { return fmt.Sprintf("%d-%s-%s", len(agent), agent, call) }

// callPath is the page of an agent's call.
func callPath(agent, call string) string {
	return "/calls/" + url.PathEscape(agent) + "/" + url.PathEscape(call)
}

func stateName(s airlockv1.ApprovalState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "APPROVAL_STATE_"))
}

func parseState(s string) (airlockv1.ApprovalState, bool) {
	v, ok := airlockv1.ApprovalState_value["APPROVAL_STATE_"+strings.ToUpper(s)]
	return airlockv1.ApprovalState(v), ok && v != 0
}

// encodeJSON keeps <, > and & as they are: the text is shown to a person
// (html/template escapes it for the page), and \u003c would hide what the
// agent actually sent.
func encodeJSON(v any, indent string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return "{}"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func prettyJSON(s *structpb.Struct) string {
	if s == nil {
		return "{}"
	}
	return encodeJSON(s.AsMap(), "  ")
}

func compactJSON(s *structpb.Struct) string {
	if s == nil {
		return "{}"
	}
	out := encodeJSON(s.AsMap(), "")
	if len(out) > 160 {
		out = out[:157] + "..."
	}
	return out
}

func newCallView(rec *airlockv1.ApprovalRecord) callView {
	c, d := rec.GetCall(), rec.GetDecision()
	v := callView{
		ID: c.GetCallId(), Agent: c.GetAgentId(), Thread: c.GetThreadId(), OnBehalfOf: c.GetOnBehalfOf(),
		Key: rowKey(c.GetAgentId(), c.GetCallId()), Path: callPath(c.GetAgentId(), c.GetCallId()),
		Server: c.GetServer(), Tool: c.GetTool(), FullTool: calls.QualifiedTool(c), Reason: c.GetReason(),
		Revision: max(c.GetRevision(), 1),
		Risk:     calls.RiskName(d.GetRisk()), HighRisk: d.GetRisk() >= airlockv1.Risk_RISK_HIGH,
		PolicyReason: d.GetReason(), RuleID: d.GetRuleId(), PolicyRev: firstNonEmpty(rec.GetPolicyRevision(), d.GetPolicyRevision()),
		Approvers: d.GetApprovers(), GrantID: d.GetGrantId(),
		State: stateName(rec.GetState()), Pending: rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		Args: prettyJSON(c.GetArguments()), ArgsCompact: compactJSON(c.GetArguments()), ArgsDigest: rec.GetArgumentsDigest(),
		Quorum: max(int(d.GetQuorum()), 1), DecidedBy: rec.GetDecidedBy().GetId(), DecisionReason: rec.GetReason(),
		AgentRuns: c.GetAgentRuns(), Queued: rec.GetQueued() && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		SelfConfirm: slices.Contains(d.GetApprovers(), calls.Requester),
	}
	if rec.GetCreatedAt() != nil {
		v.Created = rec.GetCreatedAt().AsTime()
	} else if c.GetCreatedAt() != nil {
		v.Created = c.GetCreatedAt().AsTime()
	}
	if rec.GetDeadline() != nil {
		v.Deadline = rec.GetDeadline().AsTime()
	}
	if rec.GetUpdatedAt() != nil {
		v.Updated = rec.GetUpdatedAt().AsTime()
	}
	if rec.GetEditedArguments() != nil {
		v.Edited, v.EditedArgs = true, prettyJSON(rec.GetEditedArguments())
	}
	for _, vo := range rec.GetVotes() {
		vv := voteView{By: vo.GetBy().GetId(), Channel: vo.GetBy().GetChannel(), Comment: vo.GetComment()}
		if vo.GetAt() != nil {
			vv.At = vo.GetAt().AsTime()
		}
		v.Votes = append(v.Votes, vv)
	}
	v.Diffs = editDiffs(c.GetArguments())
	if v.Edited {
		v.Diffs = append(v.Diffs, textDiff{Label: "arguments edited by the reviewer", Lines: lineDiff(v.Args, v.EditedArgs)})
	}
	return v
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// timelineEntry is one event of a call, for the call page.
type timelineEntry struct {
	Type     string
	Time     time.Time
	Revision uint32
	Actor    string
	Detail   string
}

func newTimelineEntry(ev *airlockv1.Event) timelineEntry {
	t := timelineEntry{Type: envelope.TypeOf(ev), Revision: max(ev.GetRevision(), 1)}
	if ev.GetTime() != nil {
		t.Time = ev.GetTime().AsTime()
	}
	if a := ev.GetActor(); a != nil {
		t.Actor = a.GetId()
		if a.GetChannel() != "" {
			t.Actor += " (" + a.GetChannel() + ")"
		}
	}
	switch b := ev.Body.(type) {
	case *airlockv1.Event_Requested:
		t.Detail = "asked to run " + calls.QualifiedTool(b.Requested.GetCall())
		if r := b.Requested.GetCall().GetReason(); r != "" {
			t.Detail += ": " + r
		}
	case *airlockv1.Event_Allowed:
		t.Detail = decisionDetail(b.Allowed.GetDecision())
	case *airlockv1.Event_Denied:
		t.Detail = decisionDetail(b.Denied.GetDecision())
	case *airlockv1.Event_ApprovalRequested:
		t.Detail = decisionDetail(b.ApprovalRequested.GetDecision())
	case *airlockv1.Event_Notified:
		t.Detail = fmt.Sprintf("%s %s", b.Notified.GetChannel(), b.Notified.GetKind())
	case *airlockv1.Event_Approved:
		t.Detail = fmt.Sprintf("%d vote(s)", len(b.Approved.GetVotes()))
		if b.Approved.GetEdited() {
			t.Detail += ", with edited arguments"
		}
	case *airlockv1.Event_Rejected:
		t.Detail = b.Rejected.GetReason()
	case *airlockv1.Event_ChangesRequested:
		t.Detail = b.ChangesRequested.GetFeedback()
	case *airlockv1.Event_Canceled:
		t.Detail = b.Canceled.GetReason()
	case *airlockv1.Event_Started:
		t.Detail = fmt.Sprintf("attempt %d on %s", b.Started.GetAttempt(), b.Started.GetExecutorId())
	case *airlockv1.Event_Completed:
		t.Detail = b.Completed.GetResultJson()
		if len(t.Detail) > 400 {
			t.Detail = t.Detail[:397] + "..."
		}
		if ran := calls.AgentRan(b.Completed.GetAgentRan(), b.Completed.GetArgumentsDiffer()); ran != "" {
			t.Detail = ran + ": " + t.Detail
		}
	case *airlockv1.Event_Failed:
		t.Detail = strings.TrimSpace(b.Failed.GetReason() + " (" + b.Failed.GetOutcome() + ") " + b.Failed.GetMessage())
		if ran := calls.AgentRan(b.Failed.GetAgentRan(), b.Failed.GetArgumentsDiffer()); ran != "" {
			t.Detail = ran + ": " + t.Detail
		}
	case *airlockv1.Event_UnauthorizedAttempt:
		t.Detail = b.UnauthorizedAttempt.GetAction() + " refused: " + b.UnauthorizedAttempt.GetWhy()
	case *airlockv1.Event_Invalid:
		t.Detail = b.Invalid.GetReason()
	}
	return t
}

func decisionDetail(d *airlockv1.Decision) string {
	s := fmt.Sprintf("risk %s, rule %s: %s", calls.RiskName(d.GetRisk()), firstNonEmpty(d.GetRuleId(), "(none)"), d.GetReason())
	if d.GetGrantId() != "" {
		s += " (standing grant " + d.GetGrantId() + ")"
	}
	return s
}

// grantView is a standing grant for the grants page.
type grantView struct {
	ID, Agent, Tool, CreatedBy, FromCall string
	Globs                                []string
	UsesLeft                             string
	Expires, Created                     time.Time
	Active                               bool
	Status                               string
}

func newGrantView(g *airlockv1.StandingGrant, now time.Time) grantView {
	v := grantView{ID: g.GetId(), Agent: firstNonEmpty(g.GetAgentId(), "any agent"), CreatedBy: g.GetCreatedBy().GetId(), FromCall: g.GetFromCallId(), UsesLeft: "unlimited"}
	v.Tool = g.GetTool()
	if g.GetServer() != "" {
		v.Tool = g.GetServer() + "__" + g.GetTool()
	}
	keys := make([]string, 0, len(g.GetArgumentGlobs()))
	for k := range g.GetArgumentGlobs() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v.Globs = append(v.Globs, k+" = "+g.GetArgumentGlobs()[k])
	}
	if g.GetLimitedUses() {
		v.UsesLeft = fmt.Sprint(g.GetUsesLeft())
	}
	if g.GetExpiresAt() != nil {
		v.Expires = g.GetExpiresAt().AsTime()
	}
	if g.GetCreatedAt() != nil {
		v.Created = g.GetCreatedAt().AsTime()
	}
	switch {
	case g.GetRevoked():
		v.Status = "revoked by " + g.GetRevokedBy().GetId()
	case !v.Expires.IsZero() && now.After(v.Expires):
		v.Status = "expired"
	case g.GetLimitedUses() && g.GetUsesLeft() == 0:
		v.Status = "used up"
	default:
		v.Status, v.Active = "active", true
	}
	return v
}

var protoJSON = protojson.MarshalOptions{UseProtoNames: true}
