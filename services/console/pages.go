package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Pages translate forms into use cases and their results into views.

// --- inbox ---

// inboxFilter narrows a list of calls.
type inboxFilter struct {
	Agent, Tool, Risk string
	// Thread narrows to one agent's thread (with Agent).
	Thread string
	// reader, when it may not read every call, narrows to the calls made
	// for that person (never part of the query: it is who is signed in).
	reader *Principal
}

// Query is the filter as a query string ("" or "?agent=…").
func (f inboxFilter) Query() string {
	v := url.Values{}
	for k, x := range map[string]string{"agent": f.Agent, "tool": f.Tool, "risk": f.Risk, "thread": f.Thread} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// Any reports whether the filter narrows anything.
func (f inboxFilter) Any() bool { return f.Query() != "" }

func (f inboxFilter) matches(rec *airlockv1.ApprovalRecord) bool {
	if f.reader != nil && !mayRead(*f.reader, rec) {
		return false
	}
	c := rec.GetCall()
	if f.Agent != "" && c.GetAgentId() != f.Agent {
		return false
	}
	if f.Thread != "" && c.GetThreadId() != f.Thread {
		return false
	}
	if f.Tool != "" && calls.QualifiedTool(c) != f.Tool && c.GetTool() != f.Tool {
		return false
	}
	if min := calls.ParseRisk(f.Risk); min != airlockv1.Risk_RISK_UNSPECIFIED && rec.GetDecision().GetRisk() < min {
		return false
	}
	return true
}

func filterFrom(c echo.Context) inboxFilter {
	f := inboxFilter{Agent: strings.TrimSpace(c.QueryParam("agent")), Tool: strings.TrimSpace(c.QueryParam("tool")),
		Risk: strings.TrimSpace(c.QueryParam("risk")), Thread: strings.TrimSpace(c.QueryParam("thread"))}
	if p := principal(c); !p.CanRead() {
		f.reader = &p
	}
	return f
}

func (con *Console) inboxPage(c echo.Context) error {
	f := filterFrom(c)
	recs, more, err := con.use.pending(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := &inboxView{layout: layout{Title: "Inbox"}, Filter: f, More: more, Page: inboxPage}
	v.Rows, v.Others, v.Count, v.OtherCount = con.inboxRows(c.Request().Context(), principal(c), recs)
	return con.render(c, http.StatusOK, "inbox", v)
}

// inboxEvents is the server-sent events stream behind a live inbox:
// "sync" (every row, sent first and after each reconnect), "pending" (one
// row to add or replace) and "decided" (a row key to remove). Rows are HTML
// rendered by the same escaping template as the page.
func (con *Console) inboxEvents(c echo.Context) error {
	f := filterFrom(c)
	ch, cancel := con.feed.subscribe()
	defer cancel()
	recs, _, err := con.use.pending(c.Request().Context(), f)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	p := principal(c)
	yours, others, _, _ := con.inboxRows(c.Request().Context(), p, recs)
	writeSSE(w, "sync", string(yours)+string(others))
	// Someone who reads only their own calls hears only of those leaving:
	// shown holds the rows they were sent and still have.
	var shown map[string]bool
	if f.reader != nil {
		shown = map[string]bool{}
		for _, rec := range recs {
			shown[rowKey(rec.GetCall().GetAgentId(), rec.GetCall().GetCallId())] = true
		}
	}
	w.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-c.Request().Context().Done():
			return nil
		case <-heartbeat.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
			w.Flush()
		case m, ok := <-ch:
			if !ok {
				return nil // shut down or too slow: the browser reconnects and syncs again
			}
			switch m.Kind {
			case "pending":
				if !f.matches(m.Record) {
					continue
				}
				if shown != nil {
					shown[m.Key] = true
				}
				writeSSE(w, "pending", string(con.inboxRow(c.Request().Context(), p, m.Record)))
			case "decided":
				if shown != nil {
					if !shown[m.Key] {
						continue
					}
					delete(shown, m.Key)
				}
				writeSSE(w, "decided", m.Key)
			}
			w.Flush()
		}
	}
}

func writeSSE(w http.ResponseWriter, event, data string) {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	// A bare \r also ends a line in the event-stream format: normalise it so
	// text an agent wrote can never end the event early and inject another.
	data = strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	_, _ = w.Write([]byte(b.String()))
}

// --- call page and decisions ---

// timelineEnds is how many of a call's first and of its last events the
// call page and the events API show. An agent makes a call's events as
// many as it likes (each refused report is one), and a page of every one of
// them grew without bound (4,000 made it 1.3 MB); the events between are
// counted and left to the audit trail, which pages.
const timelineEnds = 100

// callTimeline is what the call page and the events API show of a call's
// events: the first timelineEnds (Head), the last (Tail), and how many
// between them are not shown (Omitted).
type callTimeline struct {
	Head, Tail []timelineEntry
	Omitted    int
}

// All is the events shown, in order.
func (t callTimeline) All() []timelineEntry { return append(slices.Clip(t.Head), t.Tail...) }

// timeline reads the call's events from the stream, in order, keeping the
// first and the last timelineEnds (callTimeline). Only those are decoded:
// the rest are counted as they pass. An event that cannot be decoded is
// shown as such; the others still show.
func (con *Console) timeline(ctx context.Context, agent, call string) (callTimeline, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kept := ends[jetstream.Msg]{n: timelineEnds}
	err := bus.ReadStored(ctx, con.js, con.cfg.Stream.Name, []string{subject.OfCall(agent, call)}, func(m jetstream.Msg) bool {
		kept.add(m)
		return true
	})
	head, tail, omitted := kept.result()
	t := callTimeline{Omitted: omitted}
	for _, m := range head {
		t.Head = append(t.Head, timelineEntryOf(m))
	}
	for _, m := range tail {
		t.Tail = append(t.Tail, timelineEntryOf(m))
	}
	if err != nil {
		return t, apierr.Wrap(apierr.Unavailable, err, "read the events of call %s", call)
	}
	return t, nil
}

// ends keeps the first n and the last n of what it is given, in order,
// and counts the rest, in memory bounded by n however many pass.
type ends[T any] struct {
	n    int
	head []T
	last []T // a ring of the newest after the head
	past int // how many came after the head
}

func (e *ends[T]) add(v T) {
	switch {
	case len(e.head) < e.n:
		e.head = append(e.head, v)
		return
	case len(e.last) < e.n:
		e.last = append(e.last, v)
	default:
		e.last[e.past%e.n] = v
	}
	e.past++
}

// result is the first n, the last n after them, and how many between
// the two were left out.
func (e *ends[T]) result() (head, tail []T, omitted int) {
	oldest := 0 // where the ring's oldest is
	if e.past > e.n {
		oldest = e.past % e.n
	}
	for i := range len(e.last) {
		tail = append(tail, e.last[(oldest+i)%len(e.last)])
	}
	return e.head, tail, e.past - len(e.last)
}

// auditQueryOfCall is the command that lists every event of a call.
func auditQueryOfCall(agent, call string) string {
	return "airlock audit query --agent " + agent + " --call " + call
}

// timelineEntryOf is the call page's line of one stored event.
func timelineEntryOf(m jetstream.Msg) timelineEntry {
	ev, err := envelope.Decode(m.Data(), m.Headers())
	if err != nil {
		return timelineEntry{Type: m.Subject()[strings.LastIndex(m.Subject(), ".")+1:], Detail: "undecodable: " + err.Error()}
	}
	return newTimelineEntry(ev)
}

func (con *Console) callPage(c echo.Context) error {
	ctx := c.Request().Context()
	rev, err := revisionParam(c.QueryParam("rev"))
	if err != nil {
		return err
	}
	rec, err := con.use.readable(ctx, principal(c), c.Param("agent"), c.Param("id"), rev)
	if err != nil {
		return err
	}
	v := &callPageView{Call: newCallView(rec)}
	v.Title, v.Nav = v.Call.FullTool+" · "+v.Call.ID, "inbox"
	con.asPerson(principal(c), rec)(&v.Call)
	v.Call.YouMayCancel = con.mayCancel(principal(c), rec)
	if v.Call.Pending {
		v.Call.UnknownTool = con.unknownTool(ctx, principal(c), rec.GetCall())
	}
	v.Call.Sandbox, v.Call.SandboxPath = demoSandbox(con.cfg, rec.GetCall())
	// Approving a whole thread takes a reviewer (a requester confirms only
	// their own call).
	if v.Call.Pending && v.Call.Thread != "" && principal(c).CanDecide() {
		tp, err := con.use.threadPreview(ctx, v.Call.Agent, v.Call.Thread)
		if err != nil {
			return err
		}
		if len(tp.Calls) > 1 {
			v.Thread = tp
		}
	}
	if v.Events, err = con.timeline(ctx, v.Call.Agent, v.Call.ID); err != nil {
		return err
	}
	v.AuditQuery = auditQueryOfCall(v.Call.Agent, v.Call.ID)
	if v.Call.Pending {
		v.ClientWait = con.clientWait(ctx, v.Call.Agent, v.Call.ID)
	}
	v.InDoubt = con.inDoubtOf(ctx, principal(c), v.Call.Agent, v.Call.ID)
	return con.render(c, http.StatusOK, "call", v)
}

// demoSandbox says where a call of the executor's built-in demo tools
// works: the sandbox directory, and the file its "path" argument names
// there (only a relative path that stays inside; the tool refuses others).
func demoSandbox(cfg config.Config, call *airlockv1.ToolCall) (dir, file string) {
	if call.GetServer() != config.DemoServer || call.GetAgentRuns() {
		return "", ""
	}
	dir = cfg.SandboxDir()
	if p := call.GetArguments().GetFields()["path"].GetStringValue(); p != "" && filepath.IsLocal(filepath.FromSlash(p)) {
		file = filepath.Join(dir, filepath.FromSlash(p))
	}
	return dir, file
}

// clientWait says whether the MCP client of a gateway call still waits for
// its outcome; "" when no gateway client waited for it (or it cannot be
// read: the page shows without it).
func (con *Console) clientWait(ctx context.Context, agent, call string) string {
	line, err := con.clients.LineOf(ctx, agent, call, con.opts.Now())
	if err != nil {
		con.log.Warn("console: whether a client waits for a call could not be read", "call", call, "err", err)
	}
	return line
}

func revisionParam(s string) (uint32, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, apierr.New(apierr.InvalidRequest, "revision %q is not a number", s)
	}
	return uint32(n), nil
}

func decideMessage(resp *airlockv1.DecideResponse, fallback string) string {
	if resp.GetMessage() != "" {
		return resp.GetMessage()
	}
	return fallback
}

func (con *Console) formDecision(c echo.Context, kind airlockv1.DecisionKind, field string, edited *structpb.Struct) error {
	agent, id := c.Param("agent"), c.Param("id")
	rev, err := revisionParam(c.FormValue("revision"))
	if err != nil {
		return err
	}
	resp, err := con.use.decide(c.Request().Context(), principal(c), channel(c), decision{
		Agent: agent, Call: id, Revision: rev, Kind: kind, Reason: c.FormValue(field), SawDigest: c.FormValue("arguments_digest"), Edited: edited,
	})
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, callRevPath(agent, id, rev), decideMessage(resp, "done"))
}

func (con *Console) approveForm(c echo.Context) error {
	return con.formDecision(c, airlockv1.DecisionKind_DECISION_KIND_APPROVE, "reason", nil)
}

func (con *Console) rejectForm(c echo.Context) error {
	return con.formDecision(c, airlockv1.DecisionKind_DECISION_KIND_REJECT, "reason", nil)
}

func (con *Console) changesForm(c echo.Context) error {
	return con.formDecision(c, airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES, "feedback", nil)
}

// cancelForm withdraws a pending call (useCases.cancel) and goes back to it.
func (con *Console) cancelForm(c echo.Context) error {
	agent, id := c.Param("agent"), c.Param("id")
	resp, err := con.use.cancel(c.Request().Context(), principal(c), channel(c), agent, id, c.FormValue("reason"))
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, callPath(agent, id), cancelMessage(resp))
}

// cancelMessage says what a person's cancel did.
func cancelMessage(resp *airlockv1.CancelResponse) string {
	if resp.GetChanged() {
		return "canceled: the call will not run, and the agent receives your reason"
	}
	return "the call is already " + calls.StateText(resp.GetRecord().GetState()) + "; nothing changed"
}

// parseArguments validates edited arguments: a JSON object.
func parseArguments(raw string) (*structpb.Struct, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments are empty: give a JSON object such as {\"path\": \"/tmp/x\"}")
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments are not a JSON object: %v", err)
	}
	if m == nil {
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments must be a JSON object, not null")
	}
	if dec.More() {
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments have text after the JSON object: remove it")
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "the edited arguments cannot be used: %v", err)
	}
	return s, nil
}

func (con *Console) editForm(c echo.Context) error {
	args, err := parseArguments(c.FormValue("arguments"))
	if err != nil {
		return err
	}
	return con.formDecision(c, airlockv1.DecisionKind_DECISION_KIND_APPROVE, "reason", args)
}

// approveThreadForm approves the calls of a thread the reviewer was shown.
// The agent and thread come from the form as values, never as a path; the
// page to go back to is built from validated ids.
func (con *Console) approveThreadForm(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "the form does not parse: %v", err)
	}
	agent := c.FormValue("agent")
	var shown []shownCall
	for _, v := range form["call"] {
		sc, err := parseShownCall(v)
		if err != nil {
			return err
		}
		shown = append(shown, sc)
	}
	resp, err := con.use.approveThread(c.Request().Context(), principal(c), channel(c), agent, c.FormValue("thread"), shown, c.FormValue("reason"))
	if err != nil {
		return err
	}
	back := callPath(agent, c.FormValue("from"))
	if back == "" {
		back = "/"
	}
	return con.flashAndRedirect(c, back, threadSummary(resp))
}

// --- history ---

func stateOptions() []stateOption {
	var out []stateOption
	for _, s := range calls.DecidedStates {
		out = append(out, stateOption{Value: calls.StateName(s), Text: calls.StateText(s)})
	}
	return out
}

func parseStates(list string, allowPending bool) ([]airlockv1.ApprovalState, error) {
	var states []airlockv1.ApprovalState
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "decided" {
			states = append(states, calls.DecidedStates...)
			continue
		}
		st, ok := calls.ParseState(name)
		if !ok || (!allowPending && st == airlockv1.ApprovalState_APPROVAL_STATE_PENDING) {
			var words []string
			if allowPending {
				words = append(words, "pending")
			}
			for _, s := range calls.DecidedStates {
				words = append(words, calls.StateName(s))
			}
			return nil, apierr.New(apierr.InvalidRequest, "state %q is not one of %s or decided", name, strings.Join(words, ", "))
		}
		states = append(states, st)
	}
	return states, nil
}

func (con *Console) historyPage(c echo.Context) error {
	f := filterFrom(c)
	states := calls.DecidedStates
	state := c.QueryParam("state")
	if state != "" {
		var err error
		if states, err = parseStates(state, false); err != nil {
			return err
		}
	}
	recs, err := con.use.list(c.Request().Context(), states, f, 500)
	if err != nil {
		return err
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].GetUpdatedAt().AsTime().After(recs[j].GetUpdatedAt().AsTime()) })
	return con.render(c, http.StatusOK, "history", &historyView{layout: layout{Title: "History"}, Filter: f, States: stateOptions(), State: state,
		Rows: con.rows("history-row", recs), Count: len(recs)})
}

// --- grants ---

func (con *Console) grantsPage(c echo.Context) error {
	all := c.QueryParam("all") != ""
	grants, err := con.use.grants(c.Request().Context(), principal(c), all)
	if err != nil {
		return err
	}
	now := con.opts.Now()
	v := &grantsView{layout: layout{Title: "Standing grants"}, All: all}
	for _, g := range grants {
		v.Grants = append(v.Grants, newGrantView(g, now))
	}
	return con.render(c, http.StatusOK, "grants", v)
}

func (con *Console) revokeGrantForm(c echo.Context) error {
	g, err := con.use.revokeGrant(c.Request().Context(), principal(c), channel(c), c.Param("id"))
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/grants", "standing grant "+g.GetId()+" revoked")
}

// --- tokens ---

type tokenView struct {
	ID, Name, Kind, Owner, AgentID string
	RevokePath                     string
	Created, Expires, LastUsed     time.Time
}

func (con *Console) tokenViews(ctx context.Context, p Principal) ([]tokenView, error) {
	recs, err := con.use.tokens(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []tokenView
	for _, r := range recs {
		out = append(out, tokenView{ID: r.ID, Name: r.Name, Kind: r.Kind, Owner: r.Owner, AgentID: r.AgentID, Created: r.CreatedAt, Expires: r.ExpiresAt,
			RevokePath: "/tokens/" + url.PathEscape(r.ID) + "/revoke"})
	}
	return out, nil
}

func (con *Console) tokensPage(c echo.Context) error {
	views, err := con.tokenViews(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "tokens", &tokensView{layout: layout{Title: "API tokens"}, Tokens: views})
}

func (con *Console) createTokenForm(c echo.Context) error {
	days, _ := strconv.Atoi(c.FormValue("days"))
	secret, _, err := con.use.createToken(c.Request().Context(), principal(c), channel(c), c.FormValue("name"), c.FormValue("kind"), c.FormValue("agent"), c.FormValue("on_behalf_of"), days)
	if err != nil {
		return con.refusedIf(c, err)
	}
	views, err := con.tokenViews(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "tokens", &tokensView{layout: layout{Title: "API tokens"}, Tokens: views, Secret: secret})
}

func (con *Console) revokeTokenForm(c echo.Context) error {
	if err := con.use.revokeToken(c.Request().Context(), principal(c), channel(c), c.Param("id")); err != nil {
		return con.refusedIf(c, err)
	}
	id := c.Param("id")
	if ids.Validate("token id", id) != nil {
		id = "(token)"
	}
	return con.flashAndRedirect(c, "/tokens", "token "+id+" revoked")
}
