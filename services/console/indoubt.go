package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// The "did it happen?" tasks of calls that ended in doubt (failed, outcome
// indeterminate): a list, a form on each row and on the call page, and the
// REST API the CLI uses. Reviewers only; the approval service keeps the
// tasks and records each answer as an outcome_resolved event.

// happenedOf reads a form's or body's answer: yes or no.
func happenedOf(s string) (bool, error) {
	switch s {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, apierr.New(apierr.InvalidRequest, "say whether the call happened: yes or no, not %q", s)
}

func (u *useCases) inDoubtTasks(ctx context.Context, includeResolved bool) (*airlockv1.ListInDoubtResponse, error) {
	return u.approvals.ListInDoubt(ctx, &airlockv1.ListInDoubtRequest{IncludeResolved: includeResolved})
}

func (u *useCases) resolveInDoubt(ctx context.Context, p Principal, ch, agent, call string, happened bool, note string) (*airlockv1.ResolveInDoubtResponse, error) {
	if err := validAgent(agent); err != nil {
		return nil, err
	}
	return u.approvals.ResolveInDoubt(ctx, &airlockv1.ResolveInDoubtRequest{AgentId: agent, CallId: call, Happened: happened, Note: note, Principal: p.Actor(ch)})
}

// inDoubtView is one task as the pages show it.
type inDoubtView struct {
	Agent, Call, Thread, Tool, Reason, Message string
	Revision                                   uint32
	Failed                                     time.Time
	Resolved                                   bool
	Answer, Note, By                           string
	ResolvedAt                                 time.Time
	CallPath, ResolvePath                      string
	// CSRF is the session's token for the form; From says where the form
	// returns to ("call": the call page).
	CSRF, From string
}

func newInDoubtView(t *airlockv1.InDoubtTask) inDoubtView {
	v := inDoubtView{Agent: t.GetAgentId(), Call: t.GetCallId(), Thread: t.GetThreadId(), Revision: t.GetRevision(),
		Tool: calls.ToolName(t.GetServer(), t.GetTool()), Reason: t.GetReason(), Message: t.GetMessage(), Failed: t.GetFailedAt().AsTime(),
		Resolved: t.GetResolved(), Note: t.GetNote(), By: t.GetResolvedBy().GetId(), ResolvedAt: t.GetResolvedAt().AsTime(),
		CallPath:    callPath(t.GetAgentId(), t.GetCallId()),
		ResolvePath: "/calls/" + url.PathEscape(t.GetAgentId()) + "/" + url.PathEscape(t.GetCallId()) + "/in-doubt"}
	if t.GetResolved() {
		v.Answer = calls.Happened(t.GetHappened())
	}
	return v
}

type inDoubtPageView struct {
	layout
	All       bool
	Tasks     []inDoubtView
	Truncated bool
	// What the list cannot show (ListInDoubtResponse): agents at their
	// share of open tasks, and a bucket past its mark.
	AgentsAtShare  []string
	MaxPerAgent    uint32
	BucketPastMark bool
}

func (con *Console) inDoubtPage(c echo.Context) error {
	all := c.QueryParam("all") != ""
	out, err := con.use.inDoubtTasks(c.Request().Context(), all)
	if err != nil {
		return err
	}
	v := &inDoubtPageView{layout: layout{Title: "In doubt"}, All: all, Truncated: out.GetTruncated(),
		AgentsAtShare: out.GetAgentsAtShare(), MaxPerAgent: out.GetMaxPerAgent(), BucketPastMark: out.GetBucketPastMark()}
	for _, t := range out.GetTasks() {
		row := newInDoubtView(t)
		row.CSRF = principal(c).CSRF
		v.Tasks = append(v.Tasks, row)
	}
	return con.render(c, http.StatusOK, "in_doubt", v)
}

func (con *Console) resolveInDoubtForm(c echo.Context) error {
	happened, err := happenedOf(c.FormValue("happened"))
	if err != nil {
		return err
	}
	out, err := con.use.resolveInDoubt(c.Request().Context(), principal(c), channel(c), c.Param("agent"), c.Param("id"), happened, c.FormValue("note"))
	if err != nil {
		return err
	}
	back := "/in-doubt"
	if c.FormValue("from") == "call" {
		back = callPath(out.GetTask().GetAgentId(), out.GetTask().GetCallId())
	}
	return con.flashAndRedirect(c, back, "recorded for "+out.GetTask().GetAgentId()+"/"+out.GetTask().GetCallId()+": "+calls.Happened(happened))
}

// inDoubtBody is the body of POST /api/v1/in-doubt/{agent}/{call}.
type inDoubtBody struct {
	Happened string `json:"happened"`
	Note     string `json:"note"`
}

func (con *Console) apiInDoubt(c echo.Context) error {
	out, err := con.use.inDoubtTasks(c.Request().Context(), c.QueryParam("all") != "")
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, out)
}

func (con *Console) apiResolveInDoubt(c echo.Context) error {
	var b inDoubtBody
	if err := readJSON(c, &b, 16<<10); err != nil {
		return err
	}
	happened, err := happenedOf(b.Happened)
	if err != nil {
		return err
	}
	out, err := con.use.resolveInDoubt(c.Request().Context(), principal(c), channel(c), c.Param("agent"), c.Param("id"), happened, b.Note)
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, out)
}

// inDoubtOf is the task of a call for its page, nil when it has none (or
// the page is shown to someone who may not answer it).
func (con *Console) inDoubtOf(ctx context.Context, p Principal, agent, call string) *inDoubtView {
	if !p.CanDecide() {
		return nil
	}
	t, err := con.use.approvals.GetInDoubt(ctx, agent, call, 0)
	if err != nil {
		if apierr.CodeOf(err) != apierr.NotFound {
			con.log.Warn("console: the in-doubt task of a call could not be read", "call", call, "err", err)
		}
		return nil
	}
	v := newInDoubtView(t)
	v.CSRF, v.From = p.CSRF, "call"
	return &v
}
