package console

import (
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/grant"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/lookalike"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// Every page has its own view struct, embedding layout for what the frame
// around it shows. Every string in a view may come from an agent;
// templates escape them (html/template), and URLs are built here with
// escaping, from ids validated where they entered.

// layout is what the frame of every page shows.
type layout struct {
	Title, Nav string
	User       Principal
	// HasAudit shows the audit links (an audit reader is configured).
	HasAudit bool
	CSRF     string
	Flash    string
	Error    string
}

func (l *layout) base() *layout { return l }

// view is a page's data: its own fields plus the layout.
type view interface{ base() *layout }

// callView is an approval record as the pages show it.
type callView struct {
	ID, Agent, Thread, OnBehalfOf string
	// OnBehalfOfVerified: airlock verified OnBehalfOf; otherwise the page
	// says it is only the agent's claim.
	OnBehalfOfVerified bool
	// Key is unique across agents (call ids are not) and safe in an HTML id
	// and a CSS selector: the inbox row's id and what the live feed removes by.
	Key string
	// Path is the call's page, /calls/<agent>/<call>, escaped.
	Path string
	// GrantPath opens "always allow" for this revision.
	GrantPath                       string
	Server, Tool, FullTool, Reason  string
	Revision                        uint32
	Risk                            string
	HighRisk                        bool
	PolicyReason, RuleID, PolicyRev string
	Approvers                       []string
	// State is the state's token (CSS classes, filters); StateText its words.
	State, StateText              string
	Pending                       bool
	Created, Deadline, Updated    time.Time
	Args, ArgsCompact             string // pretty and one-line JSON
	EditedArgs, EditedArgsCompact string
	ArgsDigest                    string // digest of the arguments shown (edited ones when edited)
	Edited                        bool
	// ArgsCut: the arguments that would run are too large to show whole on
	// a page (calls.ShownArgumentsBytes): nobody approves them from it.
	ArgsCut bool
	// Abridged: the record came from a list, whose arguments were too large
	// to carry; Args are only their start, the call's page shows them whole.
	Abridged                  bool
	Quorum                    int
	Votes                     []voteView
	DecidedBy, DecisionReason string
	// DecidedByNote follows DecidedBy in brackets (calls.ActorNote):
	// "agent" when the agent canceled its own call, whose reason is then
	// its own words; else the channel.
	DecidedByNote string
	Diffs         []textDiff
	// Preview is what the call would do, as its tool said when the call
	// came to wait for a person.
	Preview previewView
	GrantID string
	// Problems name values that could not be shown as they are (a
	// non-finite number): the record renders, flagged.
	Problems []string
	// LookAlikes warn of names in the agent's words that pass for Latin
	// ones they are not (lookalike.Warnings): pаypal.com with a
	// Cyrillic а.
	LookAlikes []string
	// AgentRuns: a gate-only call (a coding agent's hook): the agent runs
	// the tool itself, airlock only decides.
	AgentRuns bool
	// Cwd is the working directory the agent said it runs the tool in.
	Cwd string
	// Sandbox is the directory the executor's demo tools work in, for a
	// call of a demo tool; SandboxPath is where its "path" argument lands
	// there ("" when it names none that stays inside).
	Sandbox, SandboxPath string
	// Queued: it waits behind an earlier call of its thread.
	Queued bool
	// UnknownTool: it waits for a person, but the executor's registry lacks
	// its tool, so even approved it would end failed (unknown_tool); nil
	// when the registry has it or could not be read.
	UnknownTool *airlockv1.UnknownTool
	// SelfConfirm: its rule asks the person it acts for to confirm it.
	SelfConfirm bool
	// YouMayDecide: the signed-in person may decide it (the approval
	// service would not refuse them); WhyNotYou says why not, Deciders
	// who can (sorted; empty when nobody its approvers name can).
	YouMayDecide bool
	WhyNotYou    string
	Deciders     []string
	// YouMayCancel: the signed-in person may withdraw it (an approver of
	// it, or the person it acts for: calls.Directory.MayCancel; or an
	// admin, Principal.Operator).
	YouMayCancel bool
}

type voteView struct {
	By, Channel, Comment string
	At                   time.Time
}

// rowKey names an agent's call in the page: "<len(agent)>-<agent>-<call>".
// Ids are [A-Za-z0-9_-], so it is a valid id and selector, and the length
// keeps agent "a-b" with call "c" apart from agent "a" with call "b-c".
func rowKey(agent, call string) string { return fmt.Sprintf("%d-%s-%s", len(agent), agent, call) }

// callPath is the page of an agent's call; "" when either id is not an id
// (nothing an agent wrote reaches a URL path unchecked).
func callPath(agent, call string) string {
	if ids.Validate("agent id", agent) != nil || ids.Validate("call id", call) != nil {
		return ""
	}
	return "/calls/" + url.PathEscape(agent) + "/" + url.PathEscape(call)
}

// callRevPath is callPath of one revision.
func callRevPath(agent, call string, rev uint32) string {
	p := callPath(agent, call)
	if p == "" || rev <= 1 {
		return p
	}
	return p + "?" + url.Values{"rev": {fmt.Sprint(rev)}}.Encode()
}

func newCallView(rec *airlockv1.ApprovalRecord) callView {
	c, d := rec.GetCall(), rec.GetDecision()
	v := callView{
		ID: c.GetCallId(), Agent: c.GetAgentId(), Thread: c.GetThreadId(), OnBehalfOf: c.GetOnBehalfOf(), OnBehalfOfVerified: c.GetOnBehalfOfVerified(),
		Key: rowKey(c.GetAgentId(), c.GetCallId()), Path: callPath(c.GetAgentId(), c.GetCallId()),
		Server: c.GetServer(), Tool: c.GetTool(), FullTool: calls.QualifiedTool(c), Reason: escape.Visible(c.GetReason()),
		Revision: max(c.GetRevision(), 1),
		Risk:     calls.RiskName(d.GetRisk()), HighRisk: d.GetRisk() >= airlockv1.Risk_RISK_HIGH,
		PolicyReason: d.GetReason(), RuleID: d.GetRuleId(), PolicyRev: firstNonEmpty(rec.GetPolicyRevision(), d.GetPolicyRevision()),
		Approvers: d.GetApprovers(), GrantID: d.GetGrantId(),
		State: calls.StateName(rec.GetState()), StateText: calls.StateText(rec.GetState()),
		Pending:    rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		ArgsDigest: rec.GetArgumentsDigest(),
		Quorum:     max(int(d.GetQuorum()), 1), DecidedBy: rec.GetDecidedBy().GetId(), DecisionReason: rec.GetReason(),
		DecidedByNote: calls.ActorNote(rec.GetDecidedBy()),
		AgentRuns:     c.GetAgentRuns(), Cwd: c.GetCwd(), Queued: rec.GetQueued() && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
		SelfConfirm: slices.Contains(d.GetApprovers(), calls.Requester),
	}
	if v.Path != "" {
		v.GrantPath = "/grants/new?" + url.Values{"agent": {v.Agent}, "from": {v.ID}, "rev": {fmt.Sprint(v.Revision)}}.Encode()
	}
	raw := ""
	if v.Path != "" { // the whole record as JSON, for arguments too large to show
		raw = "/api/v1/approvals" + strings.TrimPrefix(v.Path, "/calls")
	}
	var whole bool
	v.Args, v.ArgsCompact, v.Problems, whole = argsText(c.GetArguments(), raw)
	v.ArgsCut = !whole
	v.LookAlikes = lookalike.Warnings(c, nil, func(s string) string { return s }) // html/template escapes them; the page shows the arguments unredacted
	if rec.GetAbridged() && c.GetArguments() == nil {
		v.Abridged = true
		v.Args, v.ArgsCompact = rec.GetArgumentsPreview(), compactPreview(rec.GetArgumentsPreview())
	}
	v.Problems = append(v.Problems, rec.GetProblems()...)
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
		var problems []string
		var whole bool
		v.Edited = true
		v.EditedArgs, v.EditedArgsCompact, problems, whole = argsText(rec.GetEditedArguments(), raw)
		v.Problems = append(v.Problems, problems...)
		v.ArgsCut = !whole // the edited arguments are the ones that run
	} else if p := rec.GetEditedArgumentsPreview(); p != "" {
		v.Edited = true
		v.EditedArgs, v.EditedArgsCompact = p, compactPreview(p)
	}
	for _, vo := range rec.GetVotes() {
		vv := voteView{By: vo.GetBy().GetId(), Channel: vo.GetBy().GetChannel(), Comment: vo.GetComment()}
		if vo.GetAt() != nil {
			vv.At = vo.GetAt().AsTime()
		}
		v.Votes = append(v.Votes, vv)
	}
	if v.ArgsCut {
		v.GrantPath = "" // nobody remembers arguments they were not shown
	}
	v.Preview = newPreviewView(rec.GetPreview())
	v.Preview.Summary = preview.SummaryOf(rec)
	v.Diffs = editDiffs(c.GetArguments())
	if v.Edited && !v.Abridged {
		v.Diffs = append(v.Diffs, textDiff{Label: "arguments edited by the reviewer", Lines: lineDiff(v.Args, v.EditedArgs)})
	}
	return v
}

// compactPreview is an abridged record's arguments preview as a list row
// shows arguments (argsText's length).
func compactPreview(p string) string {
	if len(p) > 160 {
		return calls.Cut(p, 157) + "..."
	}
	return p
}

// ShownArgs are the arguments that would run, on one line and cut to fit
// a list: the edited ones after an edit.
func (v callView) ShownArgs() string {
	if v.Edited {
		return v.EditedArgsCompact
	}
	return v.ArgsCompact
}

// ShownArgsWhole are the arguments that would run, whole: what a thread
// approval shows of each call it approves.
func (v callView) ShownArgsWhole() string {
	if v.Edited {
		return v.EditedArgs
	}
	return v.Args
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
			_, compact, _, _ := argsText(b.Approved.GetCall().GetArguments(), "")
			t.Detail += ", with edited arguments " + compact
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
			t.Detail = calls.Cut(t.Detail, 397) + "..."
		}
		if ran := calls.AgentRan(b.Completed.GetAgentRan(), b.Completed.GetArgumentsDiffer()); ran != "" {
			t.Detail = ran + ": " + t.Detail
		}
		if snap := calls.SnapshotText(b.Completed.GetSnapshot()); snap != "" {
			t.Detail += " — " + snap
		}
	case *airlockv1.Event_Failed:
		t.Detail = strings.TrimSpace(b.Failed.GetReason() + " (" + b.Failed.GetOutcome() + ") " + b.Failed.GetMessage())
		if ran := calls.AgentRan(b.Failed.GetAgentRan(), b.Failed.GetArgumentsDiffer()); ran != "" {
			t.Detail = ran + ": " + t.Detail
		}
		if snap := calls.SnapshotText(b.Failed.GetSnapshot()); snap != "" {
			t.Detail += " — " + snap
		}
	case *airlockv1.Event_UnauthorizedAttempt:
		t.Detail = b.UnauthorizedAttempt.GetAction() + " refused: " + b.UnauthorizedAttempt.GetWhy()
	case *airlockv1.Event_Invalid:
		t.Detail = b.Invalid.GetReason()
	case *airlockv1.Event_Expired:
		t.Detail = "no decision before the deadline"
	case *airlockv1.Event_PolicyChanged:
		t.Detail = b.PolicyChanged.GetChange()
		if b.PolicyChanged.GetRefused() {
			t.Detail += " — refused: " + b.PolicyChanged.GetError()
		}
	case *airlockv1.Event_VoteCast:
		v := b.VoteCast
		t.Detail = fmt.Sprintf("approval %d of %d", v.GetVotes(), v.GetQuorum())
		if v.GetEdited() {
			t.Detail += ", of edited arguments"
		}
		if c := v.GetVote().GetComment(); c != "" {
			t.Detail += ": " + c
		}
	case *airlockv1.Event_DecisionRefused:
		t.Detail = b.DecisionRefused.GetAction() + " changed nothing (" + b.DecisionRefused.GetCode() + "): " + b.DecisionRefused.GetWhy()
	case *airlockv1.Event_GrantCreated:
		g := b.GrantCreated.GetGrant()
		t.Detail = fmt.Sprintf("standing grant %s for %s on %s, from call %s", g.GetGrantId(), g.GetAgentId(), calls.ToolName(g.GetServer(), g.GetTool()), g.GetFromCallId())
	case *airlockv1.Event_GrantUsed:
		t.Detail = "allowed by standing grant " + b.GrantUsed.GetGrantId()
		if b.GrantUsed.GetLimitedUses() {
			t.Detail += fmt.Sprintf(" (%d use(s) left)", b.GrantUsed.GetUsesLeft())
		}
	case *airlockv1.Event_GrantRevoked:
		t.Detail = "standing grant " + b.GrantRevoked.GetGrantId() + " revoked"
	case *airlockv1.Event_GrantExpired:
		t.Detail = "standing grant " + b.GrantExpired.GetGrantId() + " " + strings.ReplaceAll(b.GrantExpired.GetWhy(), "_", " ")
	case *airlockv1.Event_SignIn:
		t.Detail = "signed in"
		if !b.SignIn.GetOk() {
			t.Detail = "sign-in refused: " + b.SignIn.GetWhy()
		}
	case *airlockv1.Event_TokenCreated:
		t.Detail = b.TokenCreated.GetKind() + " token " + b.TokenCreated.GetName() + " created"
	case *airlockv1.Event_TokenRevoked:
		t.Detail = "token " + b.TokenRevoked.GetTokenId() + " revoked"
	case *airlockv1.Event_AuditPruned:
		t.Detail = fmt.Sprintf("audit months %s dropped (%d rows)", strings.Join(b.AuditPruned.GetPartitions(), ", "), b.AuditPruned.GetRows())
	case *airlockv1.Event_Undone:
		u := b.Undone
		t.Detail = fmt.Sprintf("undone: %d file(s) put back from %s", len(u.GetPaths())+int(u.GetMore()), u.GetRef())
		if len(u.GetPaths()) > 0 {
			t.Detail += " [" + strings.Join(u.GetPaths(), ", ") + "]"
		}
		if u.GetForced() {
			t.Detail += " (forced over later changes)"
		}
	case *airlockv1.Event_OutcomeResolved:
		t.Detail = "in doubt, resolved: " + calls.Happened(b.OutcomeResolved.GetHappened())
		if n := b.OutcomeResolved.GetNote(); n != "" {
			t.Detail += ": " + n
		}
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
	ID, Agent, Tool, CreatedBy, FromCall, FromPath string
	RevokePath                                     string
	Constraints                                    []string
	UsesLeft                                       string
	Expires, Created                               time.Time
	Active                                         bool
	Status                                         string
}

func newGrantView(g *airlockv1.StandingGrant, now time.Time) grantView {
	v := grantView{ID: g.GetId(), Agent: firstNonEmpty(g.GetAgentId(), "any agent"), Tool: grant.Tool(g), CreatedBy: g.GetCreatedBy().GetId(),
		FromCall: g.GetFromCallId(), FromPath: callPath(g.GetAgentId(), g.GetFromCallId()), UsesLeft: "unlimited",
		RevokePath: "/grants/" + url.PathEscape(g.GetId()) + "/revoke"}
	for _, c := range grant.Constraints(g) {
		v.Constraints = append(v.Constraints, c.Text())
	}
	if g.GetOnlyListedArguments() {
		v.Constraints = append(v.Constraints, "no other argument")
	}
	if d := g.GetArgumentsDigest(); d != "" {
		v.Constraints = append(v.Constraints, "exactly the arguments it was made from (digest "+calls.Cut(d, 12)+")")
	}
	if p := g.GetOnBehalfOf(); p != "" {
		v.Constraints = append(v.Constraints, "only calls made for "+p)
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
	v.Status, v.Active = grant.Status(g, now)
	return v
}

// --- page views ---

type loginView struct {
	layout
	Login, Next string
	// SSO names the single sign-on provider on its button ("" without one);
	// Passwords shows the password form.
	SSO       string
	Passwords bool
}

type errorView struct {
	layout
	Code, Back string
}

// inboxView is the inbox: Rows are rendered one record at a time, so one
// that cannot be rendered is flagged and the others still show.
type inboxView struct {
	layout
	Filter inboxFilter
	// Rows are the calls the person may decide, Count how many; Others
	// are those someone else must decide, OtherCount how many.
	Rows, Others      template.HTML
	Count, OtherCount int
	// More: other calls wait beyond the first Page shown.
	More bool
	Page int
}

// threadPreview is what "approve all of this thread" will approve,
// shown before it is confirmed.
type threadPreview struct {
	Agent, Thread string
	Calls         []callView
	// Skipped are pending calls of the thread whose arguments are too large
	// for the preview to show whole: a thread approval never includes them,
	// each is approved on its own page.
	Skipped []callView
	// ByRisk counts the calls per risk word, highest first ("2 high, 1 low").
	ByRisk string
	// Highest is the highest risk among them; HighRisk when it is high or critical.
	Highest  string
	HighRisk bool
}

type callPageView struct {
	layout
	Call   callView
	Events callTimeline
	// AuditQuery is the command that lists every event of the call, for
	// those the page does not show.
	AuditQuery string
	Thread     *threadPreview
	// ClientWait says whether the MCP client of a pending gateway call
	// still waits for its outcome ("": not a call a gateway client waited
	// for past a heartbeat).
	ClientWait string
	// InDoubt is the call's "did it happen?" task (reviewers only).
	InDoubt *inDoubtView
}

type stateOption struct{ Value, Text string }

type historyView struct {
	layout
	Filter inboxFilter
	States []stateOption
	State  string
	Rows   template.HTML
	Count  int
}

type grantsView struct {
	layout
	Grants []grantView
	All    bool
}

// grantArg is one argument of the call in the "always allow" form.
type grantArg struct {
	Index   int
	Pointer string
	// Value is the argument as compact JSON, shown exactly as it is pinned.
	Value string
	// Multiline is true when the value's text spans lines.
	Multiline bool
	// IsString: only string values can be matched with a glob.
	IsString bool
	// Command: a plain shell command, which can also be remembered by the
	// words it starts with (Prefix, pre-filled with its first two).
	Command bool
	// IsNumber: only number values can be held within a range, whose ends
	// RangeMin and RangeMax the form pre-fills with the value itself.
	IsNumber           bool
	RangeMin, RangeMax string
	// Mode is exact (the default), glob, prefix, range or any.
	Mode, Glob, Prefix string
}

type grantFormView struct {
	layout
	Call         callView
	Args         []grantArg
	OnlyListed   bool
	Extra        string
	Uses, Hours  int
	Scope        string
	FromRevision uint32
}

type tokensView struct {
	layout
	Tokens []tokenView
	Secret string
}

type rulesView struct {
	layout
	rulesData
}

type healthPageView struct {
	layout
	Health *healthView
}
