package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// pageData is what every page template receives.
type pageData struct {
	Title string
	Nav   string
	User  Principal
	// HasAudit shows the audit links (an audit reader is configured).
	HasAudit bool
	CSRF     string
	Flash    string
	Error    string
	Code     string
	Back     string
	Filter   inboxFilter
	Count    int
	Calls    []callView
	Call     *callView
	Events   []timelineEntry
	Grants   []grantView
	Grant    grantForm
	Tokens   []tokenView
	Secret   string
	Health   *healthView
	Next     string
	Login    string
	States   []string
	State    string
	Any      any
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"join":    strings.Join,
	"plusOne": func(i int) int { return i + 1 },
	"pct":     pct,
	"short": func(s string, n int) string {
		if len(s) > n {
			return s[:n]
		}
		return s
	},
	"secs": secsText,
}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(webFS, "web/templates/layout.html", "web/templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("parse console layout: %w", err)
	}
	files, err := fs.Glob(webFS, "web/templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(webFS, f)
		if err != nil {
			return nil, fmt.Errorf("parse console page %s: %w", f, err)
		}
		pages[name] = t
	}
	pages["partials"] = base
	return pages, nil
}

const flashCookie = "airlock_flash"

// render executes a page in the layout. The flash message of the previous
// action (a cookie, so it never travels in a URL) is shown once.
func (con *Console) render(c echo.Context, status int, page string, d pageData) error {
	t, ok := con.pages[page]
	if !ok {
		return fmt.Errorf("no page template %q", page)
	}
	d.User = principal(c)
	d.HasAudit = con.opts.Audit != nil
	d.CSRF = d.User.CSRF
	if d.Nav == "" {
		d.Nav = page
	}
	if ck, err := c.Cookie(flashCookie); err == nil && d.Flash == "" {
		if v, err := url.QueryUnescape(ck.Value); err == nil {
			d.Flash = v
		}
		con.setCookie(c, flashCookie, "", -1)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", d); err != nil {
		return fmt.Errorf("render %s: %w", page, err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

func (con *Console) flashAndRedirect(c echo.Context, to, msg string) error {
	con.setCookie(c, flashCookie, url.QueryEscape(msg), time.Minute)
	return c.Redirect(http.StatusSeeOther, to)
}

// --- sign-in ---

func (con *Console) loginPage(c echo.Context) error {
	// Login CSRF: a double-submit token (cookie + hidden field), since there is no session yet.
	tok := randomSecret(24)
	con.setCookie(c, loginCSRFCookie, tok, 30*time.Minute)
	return con.render(c, http.StatusOK, "login", pageData{Title: "Sign in", Login: tok, Next: safeNext(c.QueryParam("next"))})
}

func (con *Console) login(c echo.Context) error {
	ck, err := c.Cookie(loginCSRFCookie)
	if err != nil || ck.Value == "" || c.FormValue(csrfField) != ck.Value {
		return apierr.New(apierr.NotAuthorized, "the sign-in form expired or came from another site: open the sign-in page again")
	}
	u, err := con.store.checkPassword(c.Request().Context(), strings.TrimSpace(c.FormValue("user")), c.FormValue("password"))
	if err != nil {
		if apierr.CodeOf(err) == apierr.Unauthenticated {
			tok := randomSecret(24)
			con.setCookie(c, loginCSRFCookie, tok, 30*time.Minute)
			return con.render(c, http.StatusUnauthorized, "login", pageData{Title: "Sign in", Login: tok, Error: "Wrong user name or password.", Next: safeNext(c.FormValue("next"))})
		}
		return err
	}
	secret, _, err := con.store.newSession(c.Request().Context(), u.Name)
	if err != nil {
		return err
	}
	con.setCookie(c, loginCSRFCookie, "", -1)
	con.setCookie(c, sessionCookie, secret, con.cfg.Console.SessionMaxAge)
	con.log.Info("signed in", "user", u.Name)
	return c.Redirect(http.StatusSeeOther, safeNext(c.FormValue("next")))
}

func (con *Console) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if err := con.store.endSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	con.setCookie(c, sessionCookie, "", -1)
	return c.Redirect(http.StatusSeeOther, "/login")
}

// --- inbox ---

type inboxFilter struct {
	Agent, Tool, Risk string
}

func (f inboxFilter) Query() string {
	v := url.Values{}
	if f.Agent != "" {
		v.Set("agent", f.Agent)
	}
	if f.Tool != "" {
		v.Set("tool", f.Tool)
	}
	if f.Risk != "" {
		v.Set("risk", f.Risk)
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func (f inboxFilter) matches(v *callView) bool {
	if f.Agent != "" && v.Agent != f.Agent {
		return false
	}
	if f.Tool != "" && v.FullTool != f.Tool && v.Tool != f.Tool {
		return false
	}
	if min := calls.ParseRisk(f.Risk); min != airlockv1.Risk_RISK_UNSPECIFIED && calls.ParseRisk(v.Risk) < min {
		return false
	}
	return true
}

func filterFrom(c echo.Context) inboxFilter {
	return inboxFilter{Agent: strings.TrimSpace(c.QueryParam("agent")), Tool: strings.TrimSpace(c.QueryParam("tool")), Risk: strings.TrimSpace(c.QueryParam("risk"))}
}

// list asks the approval service for records and keeps those f matches
// (the service filters too; filtering again keeps the inbox and the live
// feed consistent whatever the service does with a filter).
func (con *Console) list(ctx context.Context, states []airlockv1.ApprovalState, f inboxFilter, limit uint32) ([]callView, error) {
	resp, err := con.approvals.List(ctx, &airlockv1.ListRequest{States: states, AgentId: f.Agent, Tool: f.Tool, MinRisk: calls.ParseRisk(f.Risk), Limit: limit})
	if err != nil {
		return nil, err
	}
	var out []callView
	for _, rec := range resp.GetRecords() {
		v := newCallView(rec)
		if f.matches(&v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func (con *Console) pending(ctx context.Context, f inboxFilter) ([]callView, error) {
	calls, err := con.list(ctx, []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}, f, 500)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Created.After(calls[j].Created) })
	return calls, nil
}

func (con *Console) inboxPage(c echo.Context) error {
	f := filterFrom(c)
	calls, err := con.pending(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "inbox", pageData{Title: "Inbox", Filter: f, Calls: calls, Count: len(calls)})
}

// inboxEvents is the server-sent events stream behind a live inbox:
// "sync" (every row, sent first and after each reconnect), "pending" (one
// row to add or replace) and "decided" (a call id to remove). Rows are HTML
// rendered by the same escaping template as the page.
func (con *Console) inboxEvents(c echo.Context) error {
	f := filterFrom(c)
	ch, cancel := con.feed.subscribe()
	defer cancel()
	calls, err := con.pending(c.Request().Context(), f)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rows, err := con.rowsHTML(calls)
	if err != nil {
		return err
	}
	writeSSE(w, "sync", rows)
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
				if !f.matches(m.Row) {
					continue
				}
				row, err := con.rowsHTML([]callView{*m.Row})
				if err != nil {
					return err
				}
				writeSSE(w, "pending", row)
			case "decided":
				writeSSE(w, "decided", m.CallID)
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

func (con *Console) rowsHTML(calls []callView) (string, error) {
	var buf bytes.Buffer
	for _, v := range calls {
		if err := con.pages["partials"].ExecuteTemplate(&buf, "row", v); err != nil {
			return "", fmt.Errorf("render inbox row: %w", err)
		}
	}
	return buf.String(), nil
}

// --- call page and actions ---

// record reads the approval record of an agent's call: the given
// revision, or the newest when rev is 0.
func (con *Console) record(ctx context.Context, agent, id string, rev uint32) (*airlockv1.ApprovalRecord, error) {
	if _, err := callref.New(agent, id, rev); err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	rec, err := con.approvals.Get(ctx, agent, id, rev)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.GetCall() == nil {
		return nil, apierr.New(apierr.NotFound, "no call %s of agent %s is waiting or was decided by a person", id, agent)
	}
	return rec, nil
}

// threadCalls are the pending calls of an agent's thread, oldest first.
func (con *Console) threadCalls(ctx context.Context, agent, thread string) ([]callView, error) {
	resp, err := con.approvals.List(ctx, &airlockv1.ListRequest{
		States: []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}, AgentId: agent, ThreadId: thread,
	})
	if err != nil {
		return nil, err
	}
	var out []callView
	for _, rec := range resp.GetRecords() {
		if rec.GetCall().GetAgentId() == agent && rec.GetCall().GetThreadId() == thread {
			out = append(out, newCallView(rec))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// timeline reads every event of the call from the stream, in order.
func (con *Console) timeline(ctx context.Context, agent, call string) ([]timelineEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []timelineEntry
	err := bus.ReadStored(ctx, con.js, con.cfg.Stream.Name, []string{subject.OfCall(agent, call)}, func(m jetstream.Msg) bool {
		ev, err := envelope.Decode(m.Data(), m.Headers())
		if err != nil {
			out = append(out, timelineEntry{Type: m.Subject()[strings.LastIndex(m.Subject(), ".")+1:], Detail: "undecodable: " + err.Error()})
			return true
		}
		out = append(out, newTimelineEntry(ev))
		return true
	})
	if err != nil {
		return out, apierr.Wrap(apierr.Unavailable, err, "read the events of call %s", call)
	}
	return out, nil
}

func (con *Console) callPage(c echo.Context) error {
	ctx := c.Request().Context()
	rev, err := revisionParam(c.QueryParam("rev"))
	if err != nil {
		return err
	}
	rec, err := con.record(ctx, c.Param("agent"), c.Param("id"), rev)
	if err != nil {
		return err
	}
	v := newCallView(rec)
	v.YouMayDecide = mayDecide(principal(c), rec)
	if v.Pending && v.Thread != "" {
		if v.ThreadCalls, err = con.threadCalls(ctx, v.Agent, v.Thread); err != nil {
			return err
		}
	}
	events, err := con.timeline(ctx, v.Agent, v.ID)
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "call", pageData{Title: v.FullTool + " · " + v.ID, Nav: "inbox", Call: &v, Events: events})
}

func formRevision(c echo.Context) (uint32, error) { return revisionParam(c.FormValue("revision")) }

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

// decide sends one decision as p and returns the service's sentence.
func (con *Console) decide(ctx context.Context, p Principal, ch, agent, id string, rev uint32, sawDigest string, kind airlockv1.DecisionKind, reason string, edited *structpb.Struct) (*airlockv1.DecideResponse, error) {
	if err := con.decidable(ctx, p, agent, id, rev); err != nil {
		return nil, err
	}
	if _, err := con.record(ctx, agent, id, rev); err != nil {
		return nil, err
	}
	switch kind {
	case airlockv1.DecisionKind_DECISION_KIND_REJECT:
		if strings.TrimSpace(reason) == "" {
			return nil, apierr.New(apierr.InvalidRequest, "say why you reject the call: the agent receives the reason")
		}
	case airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES:
		if strings.TrimSpace(reason) == "" {
			return nil, apierr.New(apierr.InvalidRequest, "say what should change: the agent receives the feedback")
		}
	}
	resp, err := con.approvals.Decide(ctx, &airlockv1.DecideRequest{
		AgentId: agent, CallId: id, Revision: rev, Principal: p.Actor(ch), Kind: kind, Reason: strings.TrimSpace(reason), EditedArguments: edited,
		ArgumentsDigest: sawDigest,
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// decidable refuses a decision (or a grant) about a call from someone who
// may not send one: someone who is not a reviewer, about a call that is not
// theirs to confirm (and learns nothing about it).
func (con *Console) decidable(ctx context.Context, p Principal, agent, id string, rev uint32) error {
	if p.CanDecide() {
		return nil // the approval service checks a reviewer against the approvers
	}
	rec, err := con.record(ctx, agent, id, rev)
	if err != nil || !mayDecide(p, rec) {
		return notYours(p)
	}
	return nil
}

// notYours refuses a decision from someone who is neither a reviewer nor
// the requester of a self-confirmed call.
func notYours(p Principal) error {
	return apierr.New(apierr.NotAuthorized, "%s cannot decide this call: deciding takes the reviewer role, or being the person a call acts for when its rule asks them to confirm it themselves", p.Name)
}

func decideMessage(resp *airlockv1.DecideResponse, fallback string) string {
	if resp.GetMessage() != "" {
		return resp.GetMessage()
	}
	return fallback
}

func (con *Console) formDecision(c echo.Context, kind airlockv1.DecisionKind, field string, edited *structpb.Struct) error {
	agent, id := c.Param("agent"), c.Param("id")
	rev, err := formRevision(c)
	if err != nil {
		return err
	}
	resp, err := con.decide(c.Request().Context(), principal(c), channel(c), agent, id, rev, c.FormValue("arguments_digest"), kind, c.FormValue(field), edited)
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, callPath(agent, id), decideMessage(resp, "done"))
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

// approveThread approves exactly the listed revisions ("<call>.<rev>") of
// an agent's thread that are still pending.
func (con *Console) approveThread(ctx context.Context, p Principal, ch, agent, thread string, listed []string, reason string) (*airlockv1.ApproveThreadResponse, error) {
	if strings.TrimSpace(thread) == "" {
		return nil, apierr.New(apierr.InvalidRequest, "no thread given")
	}
	req := &airlockv1.ApproveThreadRequest{AgentId: agent, ThreadId: thread, Principal: p.Actor(ch), Reason: reason}
	for _, l := range listed {
		id, revText, _ := strings.Cut(l, ".")
		rev, err := revisionParam(revText)
		if err != nil {
			return nil, err
		}
		ref, err := callref.New(agent, id, rev)
		if err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "%v", err)
		}
		req.Calls = append(req.Calls, ref.Proto())
	}
	if len(req.Calls) == 0 {
		return nil, apierr.New(apierr.InvalidRequest, "no calls listed: open the call and confirm the calls of its thread you were shown")
	}
	return con.approvals.ApproveThread(ctx, req)
}

func threadSummary(resp *airlockv1.ApproveThreadResponse) string {
	approved := 0
	for _, r := range resp.GetResults() {
		if r.GetChanged() {
			approved++
		}
	}
	msg := fmt.Sprintf("approved %d call(s) of the thread", approved)
	if n := len(resp.GetRefused()); n > 0 {
		var parts []string
		for id, why := range resp.GetRefused() {
			parts = append(parts, id+": "+why)
		}
		sort.Strings(parts)
		msg += fmt.Sprintf("; %d refused (%s)", n, strings.Join(parts, "; "))
	}
	return msg
}

func (con *Console) approveThreadForm(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "the form does not parse: %v", err)
	}
	agent := c.FormValue("agent")
	resp, err := con.approveThread(c.Request().Context(), principal(c), channel(c), agent, c.FormValue("thread"), form["call"], c.FormValue("reason"))
	if err != nil {
		return err
	}
	back := "/"
	if id := c.FormValue("from"); ids.Validate("call id", id) == nil && ids.Validate("agent id", agent) == nil {
		back = callPath(agent, id)
	}
	return con.flashAndRedirect(c, back, threadSummary(resp))
}

// --- history ---

var finalStates = []airlockv1.ApprovalState{
	airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, airlockv1.ApprovalState_APPROVAL_STATE_REJECTED,
	airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED,
	airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING,
	airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, airlockv1.ApprovalState_APPROVAL_STATE_FAILED,
}

func (con *Console) historyPage(c echo.Context) error {
	f := filterFrom(c)
	states := finalStates
	state := c.QueryParam("state")
	if state != "" {
		s, ok := parseState(state)
		if !ok {
			return apierr.New(apierr.InvalidRequest, "state %q is not one of approved, rejected, changes_requested, canceled, expired, executing, completed, failed", state)
		}
		states = []airlockv1.ApprovalState{s}
	}
	calls, err := con.list(c.Request().Context(), states, f, 500)
	if err != nil {
		return err
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Updated.After(calls[j].Updated) })
	var names []string
	for _, s := range finalStates {
		names = append(names, stateName(s))
	}
	return con.render(c, http.StatusOK, "history", pageData{Title: "History", Filter: f, Calls: calls, States: names, State: state})
}

// --- grants ---

// grantForm is the "always allow" form, pre-filled from a call.
type grantForm struct {
	FromCall, Agent, Tool, Globs string
	// Prefixes are "pointer = command prefix" lines; Digest pins the exact
	// arguments when the form's "exact" box is ticked.
	Prefixes, Digest string
	FromRevision     uint32
	Uses             int
	ExpiresHours     int
}

func (con *Console) grantsPage(c echo.Context) error {
	grants, err := con.approvals.ListGrants(c.Request().Context(), c.QueryParam("all") != "")
	if err != nil {
		return err
	}
	now := con.opts.Now()
	var views []grantView
	for _, g := range grants {
		views = append(views, newGrantView(g, now))
	}
	return con.render(c, http.StatusOK, "grants", pageData{Title: "Standing grants", Grants: views, Any: c.QueryParam("all") != ""})
}

func (con *Console) newGrantPage(c echo.Context) error {
	rev, err := revisionParam(c.QueryParam("rev"))
	if err != nil {
		return err
	}
	if err := con.decidable(c.Request().Context(), principal(c), c.QueryParam("agent"), c.QueryParam("from"), rev); err != nil {
		return err
	}
	rec, err := con.record(c.Request().Context(), c.QueryParam("agent"), c.QueryParam("from"), rev)
	if err != nil {
		return err
	}
	v := newCallView(rec)
	// Pre-fill: this agent, this tool, each string argument pinned to its
	// value (the reviewer widens with globs), 10 uses, one day; a shell
	// command is remembered by its first two words instead.
	var globs, prefixes []string
	args := rec.GetCall().GetArguments().AsMap()
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := args[k].(string)
		if p := calls.CommandPrefix(s, 2); ok && k == "command" && p != "" {
			prefixes = append(prefixes, "/"+k+" = "+p)
			continue
		}
		if ok && !strings.Contains(s, "\n") && len(s) <= 200 {
			globs = append(globs, "/"+k+" = "+s)
		}
	}
	form := grantForm{FromCall: v.ID, FromRevision: v.Revision, Agent: v.Agent, Tool: v.FullTool, Globs: strings.Join(globs, "\n"),
		Prefixes: strings.Join(prefixes, "\n"), Digest: v.ArgsDigest, Uses: 10, ExpiresHours: 24}
	return con.render(c, http.StatusOK, "grant_new", pageData{Title: "Always allow", Nav: "grants", Call: &v, Grant: form})
}

// parseGlobs reads "pointer = glob" lines.
func parseGlobs(raw string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(raw, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !strings.HasPrefix(k, "/") || v == "" {
			return nil, apierr.New(apierr.InvalidRequest, "argument constraint on line %d must read \"/pointer = glob\", e.g. \"/path = /tmp/**\"", i+1)
		}
		out[k] = v
	}
	return out, nil
}

func (con *Console) grantFromForm(c echo.Context) (*airlockv1.CreateGrantRequest, error) {
	globs, err := parseGlobs(c.FormValue("globs"))
	if err != nil {
		return nil, err
	}
	prefixes, err := parseGlobs(c.FormValue("prefixes"))
	if err != nil {
		return nil, err
	}
	pins := grantPins{Globs: globs, Prefixes: prefixes}
	if c.FormValue("exact") != "" {
		pins.Digest = c.FormValue("digest")
	}
	uses, err := strconv.Atoi(strings.TrimSpace(firstNonEmpty(c.FormValue("uses"), "0")))
	if err != nil || uses < 0 {
		return nil, apierr.New(apierr.InvalidRequest, "uses must be a whole number, 0 for unlimited")
	}
	hours, err := strconv.Atoi(strings.TrimSpace(firstNonEmpty(c.FormValue("expires_hours"), "0")))
	if err != nil || hours < 0 {
		return nil, apierr.New(apierr.InvalidRequest, "expiry must be a whole number of hours, 0 for none")
	}
	rev, err := revisionParam(c.FormValue("from_revision"))
	if err != nil {
		return nil, err
	}
	return con.grantRequest(c.Request().Context(), c.FormValue("from"), rev, c.FormValue("agent"), c.FormValue("tool"), pins, uses, time.Duration(hours)*time.Hour, principal(c), channel(c))
}

// grantPins narrow a grant: argument globs, shell-command prefixes, and the
// exact arguments' digest.
type grantPins struct {
	Globs, Prefixes map[string]string
	Digest          string
}

func (con *Console) grantRequest(ctx context.Context, from string, fromRev uint32, agent, tool string, pins grantPins, uses int, ttl time.Duration, p Principal, ch string) (*airlockv1.CreateGrantRequest, error) {
	if from == "" {
		return nil, apierr.New(apierr.InvalidRequest, "a grant is created from a call: give its id")
	}
	if err := con.decidable(ctx, p, strings.TrimSpace(agent), from, fromRev); err != nil {
		return nil, err
	}
	g := &airlockv1.StandingGrant{AgentId: strings.TrimSpace(agent), ArgumentGlobs: pins.Globs, CommandPrefixes: pins.Prefixes, ArgumentsDigest: pins.Digest, FromCallId: from}
	if srv, t, ok := strings.Cut(strings.TrimSpace(tool), "__"); ok {
		g.Server, g.Tool = srv, t
	} else {
		g.Tool = strings.TrimSpace(tool)
	}
	if uses > 0 {
		g.LimitedUses, g.UsesLeft = true, uint32(uses)
	}
	if ttl > 0 {
		g.ExpiresAt = timestamppb.New(con.opts.Now().Add(ttl))
	}
	return &airlockv1.CreateGrantRequest{FromAgentId: g.AgentId, FromCallId: from, FromRevision: fromRev, Grant: g, By: p.Actor(ch),
		RequestId: randomSecret(12)}, nil
}

func (con *Console) createGrantForm(c echo.Context) error {
	req, err := con.grantFromForm(c)
	if err != nil {
		return err
	}
	g, err := con.approvals.CreateGrant(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/grants", "standing grant "+g.GetId()+" created")
}

func (con *Console) revokeGrantForm(c echo.Context) error {
	g, err := con.approvals.RevokeGrant(c.Request().Context(), &airlockv1.RevokeGrantRequest{GrantId: c.Param("id"), By: principal(c).Actor(channel(c))})
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/grants", "standing grant "+g.GetId()+" revoked")
}

// --- tokens ---

type tokenView struct {
	ID, Name, Kind, Owner, AgentID string
	Created, Expires, LastUsed     time.Time
}

func (con *Console) tokenViews(ctx context.Context, p Principal) ([]tokenView, error) {
	owner := p.Name
	if p.Has(config.RoleAdmin) {
		owner = ""
	}
	recs, err := con.store.tokens(ctx, owner)
	if err != nil {
		return nil, err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].CreatedAt.After(recs[j].CreatedAt) })
	var out []tokenView
	for _, r := range recs {
		out = append(out, tokenView{ID: r.ID, Name: r.Name, Kind: r.Kind, Owner: r.Owner, AgentID: r.AgentID, Created: r.CreatedAt, Expires: r.ExpiresAt})
	}
	return out, nil
}

func (con *Console) tokensPage(c echo.Context) error {
	views, err := con.tokenViews(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "tokens", pageData{Title: "API tokens", Tokens: views})
}

// createToken makes a personal token for p, or an agent token (admins only).
func (con *Console) createToken(ctx context.Context, p Principal, name, kind, agent, onBehalfOf string, days int) (string, tokenRecord, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "name the token after what will use it, e.g. \"ci\" or \"laptop\"")
	}
	if len(name) > 100 {
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "the token name is longer than 100 characters")
	}
	ttl := con.cfg.Console.TokenTTL
	if days > 0 {
		ttl = time.Duration(days) * 24 * time.Hour
	}
	rec := tokenRecord{Name: name, Kind: TokenPersonal, Owner: p.Name}
	switch kind {
	case "", TokenPersonal:
	case TokenAgent:
		if !p.Has(config.RoleAdmin) {
			return "", tokenRecord{}, apierr.New(apierr.NotAuthorized, "only admins create agent tokens")
		}
		if err := validAgent(agent); err != nil {
			return "", tokenRecord{}, err
		}
		rec.Kind, rec.AgentID, rec.OnBehalfOf = TokenAgent, agent, strings.TrimSpace(onBehalfOf)
	default:
		return "", tokenRecord{}, apierr.New(apierr.InvalidRequest, "token kind %q: use personal or agent", kind)
	}
	return con.store.newToken(ctx, rec, ttl)
}

func (con *Console) createTokenForm(c echo.Context) error {
	days, _ := strconv.Atoi(c.FormValue("days"))
	secret, _, err := con.createToken(c.Request().Context(), principal(c), c.FormValue("name"), c.FormValue("kind"), strings.TrimSpace(c.FormValue("agent")), c.FormValue("on_behalf_of"), days)
	if err != nil {
		return err
	}
	views, err := con.tokenViews(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "tokens", pageData{Title: "API tokens", Tokens: views, Secret: secret})
}

func (con *Console) revokeTokenForm(c echo.Context) error {
	if err := con.store.revokeToken(c.Request().Context(), c.Param("id"), principal(c)); err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/tokens", "token "+c.Param("id")+" revoked")
}
