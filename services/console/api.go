package console

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
)

func validAgent(agent string) error {
	if err := ids.Validate("agent id", agent); err != nil {
		return apierr.Wrap(apierr.InvalidRequest, err, "%s", err.Error())
	}
	return nil
}

// readJSON decodes the request body into v; an empty body leaves v as is.
// Unknown fields are refused so that a misspelt field is not silently ignored.
func readJSON(c echo.Context, v any, limit int64) error {
	body := http.MaxBytesReader(c.Response(), c.Request().Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return apierr.New(apierr.InvalidRequest, "the request body is over %d bytes", limit)
		}
		return apierr.New(apierr.InvalidRequest, "the request body is not the JSON this endpoint takes: %v", err)
	}
	return nil
}

func protoJSONBlob(c echo.Context, status int, m proto.Message) error {
	data, err := pbjson.Marshal(m)
	if err != nil {
		return err
	}
	return c.JSONBlob(status, data)
}

// --- agents ---

// submitRequest is the body of POST /api/v1/calls.
type submitRequest struct {
	CallID         string          `json:"call_id"`
	Revision       uint32          `json:"revision"`
	Server         string          `json:"server"`
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"` // decoded once its size is known to fit (agentCalls.submit)
	ThreadID       string          `json:"thread_id"`
	OnBehalfOf     string          `json:"on_behalf_of"`
	Reason         string          `json:"reason"`
	IdempotencyKey string          `json:"idempotency_key"`
	// AgentRuns: a gate-only call; airlock decides, the agent runs the tool
	// and reports how it ended (POST /api/v1/calls/{id}/report).
	AgentRuns bool `json:"agent_runs"`
}

type submitResponse struct {
	CallID string `json:"call_id"`
	Status string `json:"status"`
	// Await is where the outcome can be long-polled.
	Await string `json:"await"`
}

// apiSubmit publishes a call as the token's agent (agentCalls.submit).
// Whom the call acts for comes from the token, never the body.
func (con *Console) apiSubmit(c echo.Context) error {
	p := principal(c)
	release, err := con.agents.holdBody(p.AgentID)
	if err != nil {
		return err
	}
	defer release()
	var req submitRequest
	if err := readJSON(c, &req, ingress.MaxJSONBody(con.cfg.Limits.MaxRequestBytes)); err != nil {
		return err
	}
	resp, err := con.agents.submit(c.Request().Context(), p.AgentID, p.OnBehalfOf, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, resp)
}

// ownCall reads a request of the token's agent about one of its own calls:
// the path's id, and the JSON body (at most limit bytes) into body.
func ownCall(c echo.Context, body any, limit int64) (string, error) {
	id := c.Param("id")
	if err := ids.Validate("call id", id); err != nil {
		return "", apierr.New(apierr.InvalidRequest, "%s", err.Error())
	}
	return id, readJSON(c, body, limit)
}

// cancelRequest is the body of POST /api/v1/calls/{id}/cancel.
type cancelRequest struct {
	Reason string `json:"reason"`
	// Revision the agent submitted (0: its first): a revision after the
	// first is withdrawn while it waits for the policy only when named.
	Revision uint32 `json:"revision"`
}

// apiCancel withdraws the token's agent's own call (agentCalls.cancel) and
// answers the call's state after it.
func (con *Console) apiCancel(c echo.Context) error {
	var req cancelRequest
	id, err := ownCall(c, &req, 4096)
	if err != nil {
		return err
	}
	state, err := con.agents.cancel(c.Request().Context(), principal(c).AgentID, id, req.Revision, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"call_id": id, "state": state})
}

// apiReport records how the token's agent's gate-only call ended
// (agentCalls.report).
func (con *Console) apiReport(c echo.Context) error {
	release, err := con.agents.holdBody(principal(c).AgentID)
	if err != nil {
		return err
	}
	defer release()
	var req reportRequest
	id, err := ownCall(c, &req, ingress.MaxJSONBody(con.cfg.Limits.MaxRequestBytes))
	if err != nil {
		return err
	}
	if err := con.agents.report(c.Request().Context(), principal(c).AgentID, id, req); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"call_id": id, "status": "reported"})
}

// awaitResponse is the body of GET /api/v1/calls/{id}: the SDK's outcome, or
// status "pending" when wait passed first.
type awaitResponse struct {
	airlock.Outcome
}

// pendingResponse is GET /api/v1/calls/{id} of a call without an outcome
// yet: what it waits for, and, once the policy asked a person, why, who
// may decide, until when and where. WaitCappedTo says the ?wait= asked for
// was cut to console.max_wait (the Airlock-Wait-Capped header says so too).
type pendingResponse struct {
	CallID     string    `json:"call_id"`
	Revision   uint32    `json:"revision,omitempty"`
	Status     string    `json:"status"`
	WaitingFor string    `json:"waiting_for"`
	Reason     string    `json:"reason,omitempty"`
	RuleID     string    `json:"rule_id,omitempty"`
	Risk       string    `json:"risk,omitempty"`
	Approvers  []string  `json:"approvers,omitempty"`
	Quorum     uint32    `json:"quorum,omitempty"`
	Deadline   time.Time `json:"deadline,omitzero"`
	ConsoleURL string    `json:"console_url,omitempty"`
	// WaitCappedTo is console.max_wait when the ?wait= asked for was longer.
	WaitCappedTo string `json:"wait_capped_to,omitempty"`
	// UnknownTool: the executor's registry lacks the tool of the call a
	// person is asked to decide, so even approved it would end failed
	// (unknown_tool); absent when the registry has it or could not be read.
	UnknownTool *airlockv1.UnknownTool `json:"unknown_tool,omitempty"`
}

// apiAwait long-polls a call's outcome (agentCalls.await) for up to ?wait=
// (default 0: answer at once), capped by console.max_wait: of revision
// ?rev= (default: the newest the agent asked for).
func (con *Console) apiAwait(c echo.Context) error {
	id := c.Param("id")
	if err := ids.Validate("call id", id); err != nil {
		return apierr.New(apierr.InvalidRequest, "%s", err.Error())
	}
	rev, err := revisionParam(c.QueryParam("rev"))
	if err != nil {
		return err
	}
	wait, capped := time.Duration(0), ""
	if w := c.QueryParam("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return apierr.New(apierr.InvalidRequest, "wait=%q is not a duration such as 30s", w)
		}
		wait = min(d, con.cfg.Console.MaxWait)
		if d > wait {
			capped = con.cfg.Console.MaxWait.String()
			c.Response().Header().Set("Airlock-Wait-Capped", capped)
		}
	}
	answer, ok, err := con.agents.await(c.Request().Context(), principal(c).AgentID, id, rev, wait, capped)
	if err != nil || !ok {
		return err // !ok: the client went away
	}
	return c.JSON(http.StatusOK, answer)
}

// --- reviewers ---

// listedRecord is one record of GET /api/v1/approvals, with what could
// not be shown as it is.
type listProblem struct {
	AgentID  string `json:"agent_id"`
	CallID   string `json:"call_id"`
	Revision uint32 `json:"revision"`
	Problem  string `json:"problem"`
}

// apiList is GET /api/v1/approvals: the body is a ListResponse's JSON plus
// "problems". Each record is encoded on its own: one whose values JSON
// cannot hold is sent with those values as marker strings and named in
// problems, and one that cannot be encoded at all is left out and named —
// no single record breaks the list.
func (con *Console) apiList(c echo.Context) error {
	states := []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}
	if s := c.QueryParam("state"); s != "" {
		var err error
		if states, err = parseStates(s, true); err != nil {
			return err
		}
	}
	limit := uint64(100)
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.ParseUint(l, 10, 32)
		if err != nil {
			return apierr.New(apierr.InvalidRequest, "limit=%q is not a number", l)
		}
		limit = n
	}
	recs, err := con.use.list(c.Request().Context(), states, filterFrom(c), uint32(limit))
	if err != nil {
		return err
	}
	out := struct {
		Records  []json.RawMessage `json:"records"`
		Problems []listProblem     `json:"problems,omitempty"`
	}{Records: []json.RawMessage{}}
	for _, rec := range recs {
		shown := calls.Showable(rec)
		data, err := pbjson.Marshal(shown)
		ref := listProblem{AgentID: rec.GetCall().GetAgentId(), CallID: rec.GetCall().GetCallId(), Revision: max(rec.GetCall().GetRevision(), 1)}
		if err != nil {
			ref.Problem = "the record cannot be encoded as JSON and is left out: " + err.Error()
			out.Problems = append(out.Problems, ref)
			continue
		}
		out.Records = append(out.Records, data)
		for _, p := range shown.GetProblems() {
			ref.Problem = p
			out.Problems = append(out.Problems, ref)
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (con *Console) apiGet(c echo.Context) error {
	rev, err := revisionParam(c.QueryParam("rev"))
	if err != nil {
		return err
	}
	rec, err := con.use.readable(c.Request().Context(), principal(c), c.Param("agent"), c.Param("id"), rev)
	if err != nil {
		return err
	}
	out := &airlockv1.GetResponse{Record: calls.Showable(rec)}
	if rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		out.UnknownTool = executorapi.Said(con.unknownTool(c.Request().Context(), principal(c), rec.GetCall()))
	}
	return protoJSONBlob(c, http.StatusOK, out)
}

// timelineJSON is one event of a call in GET /api/v1/approvals/{agent}/{id}/events.
type timelineJSON struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Revision uint32    `json:"revision"`
	Actor    string    `json:"actor,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// apiEvents returns the call's events from the events stream, in order:
// the first and the last timelineEnds, and when there are more, how many
// are left out between them (omitted) and the command that lists them all
// (all_events).
func (con *Console) apiEvents(c echo.Context) error {
	rec, err := con.use.readable(c.Request().Context(), principal(c), c.Param("agent"), c.Param("id"), 0)
	if err != nil {
		return err
	}
	agent, call := rec.GetCall().GetAgentId(), rec.GetCall().GetCallId()
	t, err := con.timeline(c.Request().Context(), agent, call)
	if err != nil {
		return err
	}
	out := make([]timelineJSON, 0, len(t.Head)+len(t.Tail))
	for _, e := range t.All() {
		out = append(out, timelineJSON(e))
	}
	body := map[string]any{"events": out}
	if t.Omitted > 0 {
		body["omitted"], body["all_events"] = t.Omitted, auditQueryOfCall(agent, call)
	}
	return c.JSON(http.StatusOK, body)
}

// decideBody is the body of the approve, reject and changes endpoints.
type decideBody struct {
	Revision uint32 `json:"revision"`
	// ArgumentsDigest of the call as the reviewer saw it (needed to approve
	// arguments another reviewer edited).
	ArgumentsDigest string         `json:"arguments_digest"`
	Reason          string         `json:"reason"`
	Feedback        string         `json:"feedback"`
	Arguments       map[string]any `json:"arguments"`
}

func (con *Console) apiDecide(c echo.Context, kind airlockv1.DecisionKind) error {
	var b decideBody
	if err := readJSON(c, &b, int64(con.cfg.Limits.MaxRequestBytes)*2); err != nil {
		return err
	}
	d := decision{Agent: c.Param("agent"), Call: c.Param("id"), Revision: b.Revision, Kind: kind, Reason: b.Reason, SawDigest: b.ArgumentsDigest}
	if kind == airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES {
		d.Reason = firstNonEmpty(b.Feedback, b.Reason)
	}
	if b.Arguments != nil {
		raw, _ := json.Marshal(b.Arguments)
		s, err := parseArguments(string(raw))
		if err != nil {
			return err
		}
		d.Edited = s
	}
	resp, err := con.use.decide(c.Request().Context(), principal(c), channel(c), d)
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, resp)
}

func (con *Console) apiApprove(c echo.Context) error {
	return con.apiDecide(c, airlockv1.DecisionKind_DECISION_KIND_APPROVE)
}

func (con *Console) apiReject(c echo.Context) error {
	return con.apiDecide(c, airlockv1.DecisionKind_DECISION_KIND_REJECT)
}

func (con *Console) apiChanges(c echo.Context) error {
	return con.apiDecide(c, airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES)
}

// apiCancelCall withdraws a pending call as the person the token or
// session is (useCases.cancel); the body is {"reason": "..."}, the reason
// the agent receives.
func (con *Console) apiCancelCall(c echo.Context) error {
	var b cancelRequest
	if err := readJSON(c, &b, 4096); err != nil {
		return err
	}
	resp, err := con.use.cancel(c.Request().Context(), principal(c), channel(c), c.Param("agent"), c.Param("id"), b.Reason)
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, resp)
}

// threadBody is the body of POST /api/v1/threads/{agent}/{thread}/approve:
// the call revisions the reviewer was shown, each with the digest of the
// arguments they saw (call.call_id, call.revision and arguments_digest of
// each record GET /api/v1/approvals?agent=A&thread=T listed).
type threadBody struct {
	Calls []struct {
		CallID          string `json:"call_id"`
		Revision        uint32 `json:"revision"`
		ArgumentsDigest string `json:"arguments_digest"`
	} `json:"calls"`
	Reason string `json:"reason"`
}

func (con *Console) apiApproveThread(c echo.Context) error {
	var b threadBody
	if err := readJSON(c, &b, 64<<10); err != nil {
		return err
	}
	var shown []shownCall
	for _, sc := range b.Calls {
		shown = append(shown, shownCall{Call: sc.CallID, Revision: sc.Revision, Digest: sc.ArgumentsDigest})
	}
	resp, err := con.use.approveThread(c.Request().Context(), principal(c), channel(c), c.Param("agent"), c.Param("thread"), shown, b.Reason)
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, resp)
}

// --- grants ---

func (con *Console) apiListGrants(c echo.Context) error {
	grants, err := con.use.grants(c.Request().Context(), principal(c), c.QueryParam("all") != "")
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, &airlockv1.ListGrantsResponse{Grants: grants})
}

// grantBody is the body of POST /api/v1/grants. A grant allows only what
// it names: pin arguments exactly with argument_values (any JSON value),
// match string arguments with argument_globs, hold numbers within a closed
// range with argument_ranges, name arguments that may take any value in
// any_arguments; every argument none of them names is refused
// (only_listed_arguments, the default when any of them is given: an
// explicit false lets such arguments take any value, as it is for a grant
// by command prefix).
type grantBody struct {
	FromCallID          string            `json:"from_call_id"`
	FromRevision        uint32            `json:"from_revision"`
	AgentID             string            `json:"agent_id"`
	Tool                string            `json:"tool"`
	ArgumentValues      map[string]any    `json:"argument_values"`
	ArgumentGlobs       map[string]string `json:"argument_globs"`
	AnyArguments        []string          `json:"any_arguments"`
	OnlyListedArguments *bool             `json:"only_listed_arguments"`
	// ArgumentRanges hold number arguments within closed ranges (JSON
	// pointer → {"min": 1, "max": 10}, both ends included and required).
	ArgumentRanges map[string]rangeBody `json:"argument_ranges"`
	// CommandPrefixes remember a shell command by its prefix (JSON pointer →
	// prefix, e.g. {"/command": "git commit"}); ArgumentsDigest pins the
	// exact arguments the person reviewed (the call's arguments_digest).
	CommandPrefixes map[string]string `json:"command_prefixes"`
	ArgumentsDigest string            `json:"arguments_digest"`
	Uses            int               `json:"uses"`
	ExpiresIn       string            `json:"expires_in"`
}

// rangeBody is one closed numeric range of a grantBody.
type rangeBody struct {
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
}

func (con *Console) apiCreateGrant(c echo.Context) error {
	var b grantBody
	if err := readJSON(c, &b, 64<<10); err != nil {
		return err
	}
	// A grant that names arguments allows only those unless it says otherwise.
	onlyListed := len(b.ArgumentValues)+len(b.ArgumentGlobs)+len(b.ArgumentRanges)+len(b.AnyArguments) > 0
	if b.OnlyListedArguments != nil {
		onlyListed = *b.OnlyListedArguments
	}
	in := grantInput{FromAgent: strings.TrimSpace(b.AgentID), FromCall: b.FromCallID, FromRevision: b.FromRevision, Globs: b.ArgumentGlobs,
		Any: b.AnyArguments, OnlyListed: onlyListed, Prefixes: b.CommandPrefixes, Digest: b.ArgumentsDigest, Uses: b.Uses}
	if b.ExpiresIn != "" {
		d, err := time.ParseDuration(b.ExpiresIn)
		if err != nil || d < 0 {
			return apierr.New(apierr.InvalidRequest, "expires_in %q is not a duration such as 24h", b.ExpiresIn)
		}
		in.TTL = d
	}
	if len(b.ArgumentValues) > 0 {
		in.Values = map[string]*structpb.Value{}
		for ptr, v := range b.ArgumentValues {
			pv, err := structpb.NewValue(v)
			if err != nil {
				return apierr.New(apierr.InvalidRequest, "argument_values %s: %v", ptr, err)
			}
			in.Values[ptr] = pv
		}
	}
	for ptr, r := range b.ArgumentRanges {
		if r.Min == nil || r.Max == nil {
			return apierr.New(apierr.InvalidRequest, "argument_ranges %s needs both min and max: a range is closed at both ends", ptr)
		}
		if in.Ranges == nil {
			in.Ranges = map[string]*airlockv1.NumberRange{}
		}
		in.Ranges[ptr] = &airlockv1.NumberRange{Min: *r.Min, Max: *r.Max}
	}
	g, err := con.use.createGrant(c.Request().Context(), principal(c), channel(c), in)
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusCreated, &airlockv1.CreateGrantResponse{Grant: g})
}

func (con *Console) apiRevokeGrant(c echo.Context) error {
	g, err := con.use.revokeGrant(c.Request().Context(), principal(c), channel(c), c.Param("id"))
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, &airlockv1.RevokeGrantResponse{Grant: g})
}

// --- tokens ---

type tokenBody struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	AgentID string `json:"agent_id"`
	// OnBehalfOf binds an agent token to the person its calls act for.
	OnBehalfOf string `json:"on_behalf_of"`
	Days       int    `json:"days"`
}

type tokenJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Kind      string     `json:"kind"`
	Owner     string     `json:"owner"`
	AgentID   string     `json:"agent_id,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Token is the secret, returned once at creation.
	Token string `json:"token,omitempty"`
}

func tokenOut(r tokenRecord, secret string) tokenJSON {
	t := tokenJSON{ID: r.ID, Name: r.Name, Kind: r.Kind, Owner: r.Owner, AgentID: r.AgentID, CreatedAt: r.CreatedAt, Token: secret}
	if !r.ExpiresAt.IsZero() {
		e := r.ExpiresAt
		t.ExpiresAt = &e
	}
	return t
}

func (con *Console) apiListTokens(c echo.Context) error {
	recs, err := con.use.tokens(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	out := []tokenJSON{}
	for _, r := range recs {
		out = append(out, tokenOut(r, ""))
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": out})
}

func (con *Console) apiCreateToken(c echo.Context) error {
	var b tokenBody
	if err := readJSON(c, &b, 16<<10); err != nil {
		return err
	}
	secret, rec, err := con.use.createToken(c.Request().Context(), principal(c), channel(c), b.Name, b.Kind, b.AgentID, b.OnBehalfOf, b.Days)
	if err != nil {
		return con.refusedIf(c, err)
	}
	return c.JSON(http.StatusCreated, tokenOut(rec, secret))
}

func (con *Console) apiRevokeToken(c echo.Context) error {
	if err := con.use.revokeToken(c.Request().Context(), principal(c), channel(c), c.Param("id")); err != nil {
		return con.refusedIf(c, err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (con *Console) apiWhoami(c echo.Context) error {
	p := principal(c)
	return c.JSON(http.StatusOK, map[string]any{"name": p.Name, "roles": p.Roles, "groups": p.Groups, "via": p.Via})
}
