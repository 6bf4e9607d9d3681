package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/encoding/protojson"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// ruleView is a run-time policy rule for the rules page.
type ruleView struct {
	ID, Match, Effect, Risk, Reason, Approvers, Timeout, UpdatedBy string
	DeletePath                                                     string
	Priority                                                       int32
	Quorum                                                         uint32
	Args                                                           []string
	UpdatedAt                                                      time.Time
}

func newRuleView(r *airlockv1.PolicyRule) ruleView {
	var match []string
	if r.GetPattern() != "" {
		match = append(match, "name "+r.GetPattern())
	}
	if r.GetServer() != "" && r.GetServer() != "*" {
		match = append(match, "server "+r.GetServer())
	}
	if r.GetTool() != "" && r.GetTool() != "*" {
		match = append(match, "tool "+r.GetTool())
	}
	if r.GetToolPattern() != "" {
		match = append(match, "tool "+r.GetToolPattern())
	}
	if r.GetAgent() != "" && r.GetAgent() != "*" {
		match = append(match, "agent "+r.GetAgent())
	}
	if len(match) == 0 {
		match = append(match, "every call")
	}
	v := ruleView{ID: r.GetId(), Priority: r.GetPriority(), Match: strings.Join(match, ", "), Effect: r.GetEffect(), Risk: r.GetRisk(),
		Reason: r.GetReason(), Approvers: strings.Join(r.GetApprovers(), ", "), Quorum: r.GetQuorum(), Timeout: r.GetTimeout(),
		UpdatedBy: r.GetUpdatedBy().GetId(), DeletePath: "/rules/" + url.PathEscape(r.GetId()) + "/delete"}
	for k, g := range r.GetArgs() {
		v.Args = append(v.Args, k+" = "+g)
	}
	for k, b := range r.GetAnnotations() {
		v.Args = append(v.Args, fmt.Sprintf("annotation %s = %v", k, b))
	}
	sort.Strings(v.Args)
	if re := r.GetArgumentsMatch(); re != "" {
		v.Args = append(v.Args, "some argument matches "+re)
	}
	// Each named argument against its expression, in one sorted list.
	var exprs []string
	for k, re := range r.GetArgumentsNotMatching() {
		exprs = append(exprs, k+" does not match "+re)
	}
	for k, re := range r.GetArgumentsMatching() {
		exprs = append(exprs, k+" matches "+re)
	}
	sort.Strings(exprs)
	v.Args = append(v.Args, exprs...)
	if r.GetOtherArguments() != "" {
		v.Args = append(v.Args, "other arguments: "+r.GetOtherArguments())
	}
	if r.GetUpdatedAt() != nil {
		v.UpdatedAt = r.GetUpdatedAt().AsTime()
	}
	return v
}

// ruleTable is one table of rules on the rules page.
type ruleTable struct {
	ID    string
	Rules []ruleView
	Empty string
	Admin bool
	CSRF  string
}

func newRuleTable(id string, rules []ruleView, empty string, admin bool, csrf string) ruleTable {
	return ruleTable{ID: id, Rules: rules, Empty: empty, Admin: admin, CSRF: csrf}
}

// rulesData is what the rules page shows.
type rulesData struct {
	Revision string
	// Rules are the run-time rules; Builtin the policy's own that they did
	// not replace; Fallback says what decides a call no rule matches.
	Rules, Builtin []ruleView
	Fallback       string
	// Unavailable says why rules cannot be read (no policy service answering).
	Unavailable string
	// Eval is the result of a dry run, when one was asked.
	Eval     *airlockv1.Decision
	EvalTool string
	EvalArgs string
	EvalRisk string
	// EvalAction is allow, ask or deny.
	EvalAction string
}

func (con *Console) rulesData(ctx context.Context) rulesData {
	resp, err := con.policy.ListRules(ctx)
	if err != nil {
		return rulesData{Unavailable: err.Error()}
	}
	d := rulesData{Revision: resp.GetPolicyRevision(), Fallback: resp.GetFallback()}
	for _, r := range resp.GetRules() {
		d.Rules = append(d.Rules, newRuleView(r))
	}
	for _, r := range resp.GetBuiltinRules() {
		d.Builtin = append(d.Builtin, newRuleView(r))
	}
	sort.SliceStable(d.Rules, func(i, j int) bool { return d.Rules[i].Priority < d.Rules[j].Priority })
	return d
}

func (con *Console) rulesPage(c echo.Context) error {
	return con.render(c, http.StatusOK, "rules", &rulesView{layout: layout{Title: "Rules"}, rulesData: con.rulesData(c.Request().Context())})
}

// ruleFromForm reads the add-rule form; the policy service validates the
// rule fully (and refuses one that would not compile).
func ruleFromForm(c echo.Context) (*airlockv1.PolicyRule, error) {
	r := &airlockv1.PolicyRule{
		Id: strings.TrimSpace(c.FormValue("id")), Pattern: strings.TrimSpace(c.FormValue("pattern")),
		Agent: strings.TrimSpace(c.FormValue("agent")), Effect: c.FormValue("effect"), Risk: c.FormValue("risk"),
		Reason: strings.TrimSpace(c.FormValue("reason")), Timeout: strings.TrimSpace(c.FormValue("timeout")),
	}
	if r.Id == "" {
		return nil, apierr.New(apierr.InvalidRequest, "give the rule an id, e.g. \"allow-tmp-writes\"")
	}
	if p := strings.TrimSpace(c.FormValue("priority")); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "priority %q is not a whole number", p)
		}
		r.Priority = int32(n)
	}
	if q := strings.TrimSpace(c.FormValue("quorum")); q != "" {
		n, err := strconv.ParseUint(q, 10, 32)
		if err != nil {
			return nil, apierr.New(apierr.InvalidRequest, "quorum %q is not a whole number", q)
		}
		r.Quorum = uint32(n)
	}
	for _, a := range strings.Split(c.FormValue("approvers"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			r.Approvers = append(r.Approvers, a)
		}
	}
	args, err := parseGlobs(c.FormValue("args"))
	if err != nil {
		return nil, err
	}
	if len(args) > 0 {
		r.Args = args
	}
	return r, nil
}

func (con *Console) putRuleForm(c echo.Context) error {
	r, err := ruleFromForm(c)
	if err != nil {
		return err
	}
	resp, err := con.policy.PutRule(c.Request().Context(), r, principal(c).Actor(channel(c)))
	if err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/rules", fmt.Sprintf("rule %s saved; every policy replica applies it", resp.GetRule().GetId()))
}

func (con *Console) deleteRuleForm(c echo.Context) error {
	id := c.Param("id")
	if err := con.policy.DeleteRule(c.Request().Context(), id, principal(c).Actor(channel(c))); err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/rules", "rule "+id+" removed")
}

// evalForm dry-runs a call against the policy in force (nothing is published).
func (con *Console) evalForm(c echo.Context) error {
	tool := strings.TrimSpace(c.FormValue("tool"))
	args, err := parseArguments(firstNonEmpty(c.FormValue("arguments"), "{}"))
	if err != nil {
		return err
	}
	call := &airlockv1.ToolCall{CallId: "dry_run", AgentId: firstNonEmpty(strings.TrimSpace(c.FormValue("agent")), "dry-run"), Arguments: args, Revision: 1}
	if srv, t, ok := strings.Cut(tool, "__"); ok {
		call.Server, call.Tool = srv, t
	} else {
		return apierr.New(apierr.InvalidRequest, "name the tool as server__tool, e.g. fs__write_file")
	}
	dec, err := con.policy.Eval(c.Request().Context(), call)
	if err != nil {
		return err
	}
	d := con.rulesData(c.Request().Context())
	pretty, _, _, _ := argsText(args, "")
	d.Eval, d.EvalTool, d.EvalArgs, d.EvalRisk = dec, tool, pretty, calls.RiskName(dec.GetRisk())
	d.EvalAction = strings.ToLower(strings.TrimPrefix(dec.GetAction().String(), "ACTION_"))
	return con.render(c, http.StatusOK, "rules", &rulesView{layout: layout{Title: "Rules"}, rulesData: d})
}

// apiPutRule is POST /api/v1/rules: the body is a PolicyRule (protojson);
// the change is made as the token's person (admins only).
func (con *Console) apiPutRule(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 64<<10))
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "read the rule: %v", err)
	}
	r := &airlockv1.PolicyRule{}
	if err := protojson.Unmarshal(body, r); err != nil {
		return apierr.New(apierr.InvalidRequest, "the body is not a rule (PolicyRule as JSON): %v", err)
	}
	resp, err := con.policy.PutRule(c.Request().Context(), r, principal(c).Actor(channel(c)))
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, resp)
}

// apiDeleteRule is DELETE /api/v1/rules/{id}, as the token's person (admins only).
func (con *Console) apiDeleteRule(c echo.Context) error {
	if err := con.policy.DeleteRule(c.Request().Context(), c.Param("id"), principal(c).Actor(channel(c))); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deleted": c.Param("id")})
}
