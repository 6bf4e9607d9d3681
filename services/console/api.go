package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
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
	data, err := envelope.JSONForm.Marshal(m)
	if err != nil {
		return err
	}
	return c.JSONBlob(status, data)
}

// --- agents ---

// submitRequest is the body of POST /api/v1/calls.
type submitRequest struct {
	CallID         string         `json:"call_id"`
	Revision       uint32         `json:"revision"`
	Server         string         `json:"server"`
	Tool           string         `json:"tool"`
	Arguments      map[string]any `json:"arguments"`
	ThreadID       string         `json:"thread_id"`
	OnBehalfOf     string         `json:"on_behalf_of"`
	Reason         string         `json:"reason"`
	IdempotencyKey string         `json:"idempotency_key"`
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

// agentClient submits as agent, sealing each request as the console: the
// console authenticated the agent's token, and vouches for the person the
// token binds its calls to.
func (con *Console) agentClient(agent string) (*airlock.Client, error) {
	return airlock.New(con.nc, agent, airlock.WithStream(con.cfg.Stream.Name), airlock.WithMaxRequestBytes(con.cfg.Limits.MaxRequestBytes),
		airlock.WithRequestSeal(func(m *nats.Msg) { con.frontend.Request(m, Frontend, con.opts.Now()) }))
}

// apiSubmit publishes a call as the token's agent, through the SDK (the same
// checks and envelope as a Go agent). Submitting the same call again is
// harmless. Whom the call acts for comes from the token, never the body.
func (con *Console) apiSubmit(c echo.Context) error {
	p := principal(c)
	var req submitRequest
	if err := readJSON(c, &req, int64(con.cfg.Limits.MaxRequestBytes)*2); err != nil {
		return err
	}
	if req.OnBehalfOf != "" && req.OnBehalfOf != p.OnBehalfOf {
		return apierr.New(apierr.InvalidRequest, "on_behalf_of comes from the agent token (%q), not the request: leave it out, or ask an admin for a token bound to %q", p.OnBehalfOf, req.OnBehalfOf)
	}
	client, err := con.agentClient(p.AgentID)
	if err != nil {
		return apierr.Wrap(apierr.InvalidRequest, err, "%s", err.Error())
	}
	id, err := client.Submit(c.Request().Context(), airlock.Call{
		ID: req.CallID, Revision: req.Revision, Server: req.Server, Tool: req.Tool, Args: req.Arguments,
		Thread: req.ThreadID, OnBehalfOf: p.OnBehalfOf, Reason: req.Reason, IdempotencyKey: req.IdempotencyKey,
		AgentRuns: req.AgentRuns,
	})
	if errors.Is(err, airlock.ErrInvalid) {
		return apierr.New(apierr.InvalidRequest, "%s", strings.TrimPrefix(err.Error(), airlock.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "the call could not be stored: try again")
	}
	return c.JSON(http.StatusAccepted, submitResponse{CallID: id, Status: "submitted", Await: "/api/v1/calls/" + url.PathEscape(id) + "?wait=30s"})
}

// ownCall reads a request of the token's agent about one of its own calls
// (the path's id) with its JSON body (at most limit bytes) into body, and
// returns the agent's client and the call id.
func (con *Console) ownCall(c echo.Context, body any, limit int64) (*airlock.Client, string, error) {
	id := c.Param("id")
	if err := ids.Validate("call id", id); err != nil {
		return nil, "", apierr.New(apierr.InvalidRequest, "%s", err.Error())
	}
	if err := readJSON(c, body, limit); err != nil {
		return nil, "", err
	}
	client, err := con.agentClient(principal(c).AgentID)
	return client, id, err
}

// cancelRequest is the body of POST /api/v1/calls/{id}/cancel.
type cancelRequest struct {
	Reason string `json:"reason"`
}

// apiCancel withdraws the token's agent's own call while it waits for a
// decision (the agent's cancel, as over NATS) and answers the call's state
// after it: "canceled", or how a call decided already stands (left as is).
func (con *Console) apiCancel(c echo.Context) error {
	var req cancelRequest
	client, id, err := con.ownCall(c, &req, 4096)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := client.Cancel(ctx, id, req.Reason); err != nil {
		if apierr.CodeOf(err) == apierr.Internal {
			return apierr.Wrap(apierr.Unavailable, err, "call %s could not be canceled: try again", id)
		}
		return err
	}
	rec, err := con.use.approvals.Get(ctx, principal(c).AgentID, id, 0)
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "call %s: read its state after the cancel", id)
	}
	return c.JSON(http.StatusOK, map[string]any{"call_id": id, "state": calls.StateName(rec.GetState())})
}

// reportRequest is the body of POST /api/v1/calls/{id}/report: how a
// gate-only call the agent ran itself ended.
type reportRequest struct {
	Revision  uint32          `json:"revision"`
	Failed    bool            `json:"failed"`
	Result    json.RawMessage `json:"result"`
	Truncated bool            `json:"truncated"`
	Error     string          `json:"error"`
	LatencyMS int64           `json:"latency_ms"`
}

// apiReport records how the token's agent's gate-only call ended (the
// SDK's Report): only the first report of an allowed or approved revision
// counts; airlock records a refused one as an unauthorized attempt.
func (con *Console) apiReport(c echo.Context) error {
	var req reportRequest
	client, id, err := con.ownCall(c, &req, int64(con.cfg.Limits.MaxRequestBytes)*2)
	if err != nil {
		return err
	}
	err = client.Report(c.Request().Context(), id, req.Revision, airlock.Report{
		Failed: req.Failed, Result: req.Result, Truncated: req.Truncated, Error: req.Error,
		Latency: time.Duration(req.LatencyMS) * time.Millisecond,
	})
	if errors.Is(err, airlock.ErrInvalid) {
		return apierr.New(apierr.InvalidRequest, "%s", strings.TrimPrefix(err.Error(), airlock.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "the report could not be stored: try again")
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
}

// apiAwait long-polls a call's outcome for up to ?wait= (default 0: answer
// at once), capped by console.max_wait.
func (con *Console) apiAwait(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := ids.Validate("call id", id); err != nil {
		return apierr.New(apierr.InvalidRequest, "%s", err.Error())
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
	if wait > 0 {
		if !con.waits.acquire(p.AgentID) {
			return apierr.New(apierr.Unavailable, "agent %s already holds %d waits on this console: wait for one to end, or poll without ?wait=", p.AgentID, maxWaitsPerAgent)
		}
		defer con.waits.release(p.AgentID)
	}
	ctx := c.Request().Context()
	if err := con.callExists(ctx, p.AgentID, id); err != nil {
		return err
	}
	client, err := con.agentClient(p.AgentID)
	if err != nil {
		return err
	}
	// Even without waiting, give Await a moment to read the call's history.
	actx, cancel := context.WithTimeout(ctx, max(wait, 500*time.Millisecond))
	defer cancel()
	var mu sync.Mutex
	pending := pendingResponse{CallID: id, Status: "pending", WaitingFor: "the policy", WaitCappedTo: capped}
	out, err := client.AwaitProgress(actx, id, 0, func(pr airlock.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if pr.Revision < pending.Revision {
			return
		}
		pending.Revision = pr.Revision
		switch pr.Type {
		case "approval_requested":
			d := pr.Decision
			pending.WaitingFor, pending.Reason, pending.RuleID = "a person", d.GetReason(), d.GetRuleId()
			pending.Risk, pending.Approvers, pending.Quorum = calls.RiskName(d.GetRisk()), d.GetApprovers(), max(d.GetQuorum(), 1)
			pending.Deadline = pr.Deadline
			if path := callRevPath(p.AgentID, id, pr.Revision); path != "" {
				pending.ConsoleURL = strings.TrimRight(con.cfg.HTTP.PublicURL, "/") + path
			}
		case "approved", "allowed", "started":
			pending.WaitingFor = "the tool to finish"
		}
	})
	if out.Status == "" {
		if ctx.Err() != nil {
			return nil // the client went away
		}
		if err != nil && actx.Err() == nil {
			return apierr.Wrap(apierr.Unavailable, err, "follow call %s", id)
		}
		mu.Lock()
		defer mu.Unlock()
		return c.JSON(http.StatusOK, pending)
	}
	return c.JSON(http.StatusOK, awaitResponse{out})
}

// callExists checks that the agent submitted the call, so that awaiting a
// mistyped id fails at once instead of after the whole wait: its request is
// recorded in the events stream, or the agent has requests waiting in the
// intake (stored under airlock.req.<agent>, so the call may be one of them:
// reading them all for its id would let one agent make every await cost a
// thousand reads).
func (con *Console) callExists(ctx context.Context, agent, id string) error {
	recorded, err := subject.Event(agent, id, subject.Requested)
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "%s", err.Error())
	}
	for _, w := range []struct{ stream, subject string }{{con.cfg.Stream.Name, recorded}, {con.cfg.Intake.Name, subject.AgentRequests(agent)}} {
		if found, err := con.stored(ctx, w.stream, w.subject); found || err != nil {
			return err
		}
	}
	// The policy service may be taking it from the intake right now.
	if m, err := bus.LastStored(ctx, con.nc, con.cfg.Stream.Name, recorded); err == nil && m != nil {
		return nil
	}
	return apierr.New(apierr.NotFound, "agent %s submitted no call %s", agent, id)
}

// stored reports whether stream holds a message on subj.
func (con *Console) stored(ctx context.Context, name, subj string) (bool, error) {
	stream, err := con.js.Stream(ctx, name)
	if err != nil {
		return false, apierr.Wrap(apierr.Unavailable, err, "read stream %s", name)
	}
	_, err = stream.GetLastMsgForSubject(ctx, subj)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	}
	return false, apierr.Wrap(apierr.Unavailable, err, "read stream %s", name)
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
		data, err := envelope.JSONForm.Marshal(shown)
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
	return protoJSONBlob(c, http.StatusOK, &airlockv1.GetResponse{Record: calls.Showable(rec)})
}

// timelineJSON is one event of a call in GET /api/v1/approvals/{agent}/{id}/events.
type timelineJSON struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Revision uint32    `json:"revision"`
	Actor    string    `json:"actor,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// apiEvents returns every event of the call from the events stream, in order.
func (con *Console) apiEvents(c echo.Context) error {
	rec, err := con.use.readable(c.Request().Context(), principal(c), c.Param("agent"), c.Param("id"), 0)
	if err != nil {
		return err
	}
	entries, err := con.timeline(c.Request().Context(), rec.GetCall().GetAgentId(), rec.GetCall().GetCallId())
	if err != nil {
		return err
	}
	out := make([]timelineJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, timelineJSON(e))
	}
	return c.JSON(http.StatusOK, map[string]any{"events": out})
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
// match string arguments with argument_globs, name arguments that may take
// any value in any_arguments; every argument none of them names is refused
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
	// CommandPrefixes remember a shell command by its prefix (JSON pointer →
	// prefix, e.g. {"/command": "git commit"}); ArgumentsDigest pins the
	// exact arguments the person reviewed (the call's arguments_digest).
	CommandPrefixes map[string]string `json:"command_prefixes"`
	ArgumentsDigest string            `json:"arguments_digest"`
	Uses            int               `json:"uses"`
	ExpiresIn       string            `json:"expires_in"`
}

func (con *Console) apiCreateGrant(c echo.Context) error {
	var b grantBody
	if err := readJSON(c, &b, 64<<10); err != nil {
		return err
	}
	// A grant that names arguments allows only those unless it says otherwise.
	onlyListed := len(b.ArgumentValues)+len(b.ArgumentGlobs)+len(b.AnyArguments) > 0
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
