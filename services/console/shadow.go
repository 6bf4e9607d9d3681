package console

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/encoding/protojson"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Bounds of one divergences summary: rows read from the audit trail (the
// default of Options.ShadowRows), the share of them one agent's rows may
// take, and examples kept per group.
const (
	shadowMaxRows     = 20000
	shadowAgentShare  = 10 // an agent's rows: at most 1/10 of the rows read
	shadowPageRows    = 1000
	shadowExamples    = 3
	shadowDefaultBack = "720h"
)

// ShadowExample is one divergent call. An agent chose its agent and call
// ids (and the tool name, and what a candidate's reason may quote): each
// medium escapes them where it shows them (the pages through
// escape.HTMLPage, the CLI through escape.Terminal).
type ShadowExample struct {
	Time     time.Time `json:"time"`
	Agent    string    `json:"agent_id"`
	Call     string    `json:"call_id"`
	Revision uint32    `json:"revision"`
	Reason   string    `json:"candidate_reason"`
	Path     string    `json:"-"`
}

// ShadowGroup is the divergences of one kind: one tool, one change
// (live → candidate action) by the same two rules.
type ShadowGroup struct {
	Tool          string          `json:"tool"`
	Live          string          `json:"live_action"`
	Candidate     string          `json:"candidate_action"`
	LiveRule      string          `json:"live_rule_id"`
	CandidateRule string          `json:"candidate_rule_id"`
	Count         int             `json:"count"`
	Examples      []ShadowExample `json:"examples"`
}

// ShadowSummary is what the shadow page and GET
// /api/v1/policy/shadow/divergences show: the divergences of one candidate
// since a time, by rule and tool, most frequent first.
type ShadowSummary struct {
	Candidate string        `json:"candidate_digest"`
	Since     time.Time     `json:"since"`
	Total     int           `json:"total"`
	Groups    []ShadowGroup `json:"groups"`
	// Truncated: more rows matched than one summary reads.
	Truncated bool `json:"truncated"`
	// Capped are the agents that had more than AgentRows divergences, of
	// which only the first AgentRows were read: one agent's flood never
	// hides the others'.
	Capped    []string `json:"capped_agents,omitempty"`
	AgentRows int      `json:"agent_rows"`
	Source    string   `json:"source"`
}

// shadowDivergences reads the shadow_divergence rows of candidate (all
// candidates when "") since a time and groups them. It reads at most
// Options.ShadowRows rows, and at most a tenth of them of one agent: once
// an agent has had its share, the rest of the window is read without its
// rows, so an agent flooding divergences early cannot hide the later ones
// of other agents.
func (con *Console) shadowDivergences(ctx context.Context, since time.Time, candidate string) (ShadowSummary, error) {
	maxRows := con.opts.ShadowRows
	sum := ShadowSummary{Candidate: candidate, Since: since, Source: con.opts.Audit.Source(), AgentRows: max(maxRows/shadowAgentShare, 1)}
	byKey := map[string]*ShadowGroup{}
	perAgent := map[string]int{}
	q := AuditQuery{Type: subject.ShadowDivergence, Since: since}
	for read := 0; read < maxRows; {
		q.Limit = min(shadowPageRows, maxRows-read)
		rows, err := con.opts.Audit.Search(ctx, q)
		if err != nil {
			return sum, apierr.Wrap(apierr.Unavailable, err, "read the divergences from the audit trail")
		}
		for _, r := range rows {
			if n := perAgent[r.Agent]; n >= sum.AgentRows {
				// One more than its share: the agent is capped and left out
				// of the pages to come. Not counted, so at most a page per
				// capped agent is read on top of the bound.
				if n == sum.AgentRows {
					perAgent[r.Agent]++
					q.ExcludeAgents = append(q.ExcludeAgents, r.Agent)
				}
				continue
			}
			read++
			perAgent[r.Agent]++
			if candidate != "" && r.PolicyRevision != candidate {
				continue
			}
			sum.Total++
			live, cand, _ := strings.Cut(r.Decision, "→")
			// "shadow:rule:<id>", or "shadow:grant:<id>" when a standing grant allowed it
			candRule := strings.TrimPrefix(strings.TrimPrefix(r.DecidedBy, "shadow:"), "rule:")
			key := r.Tool + "\x00" + r.Decision + "\x00" + r.RuleID + "\x00" + candRule
			g := byKey[key]
			if g == nil {
				g = &ShadowGroup{Tool: r.Tool, Live: live, Candidate: cand, LiveRule: r.RuleID, CandidateRule: candRule}
				byKey[key] = g
			}
			g.Count++
			// Rows come oldest first: keep the newest examples.
			g.Examples = append(g.Examples, ShadowExample{Time: r.Time, Agent: r.Agent, Call: r.Call, Revision: r.Revision,
				Reason: r.Reason, Path: callPath(r.Agent, r.Call)})
			if len(g.Examples) > shadowExamples {
				g.Examples = g.Examples[1:]
			}
		}
		if len(rows) < q.Limit {
			break
		}
		q.AfterSeq = rows[len(rows)-1].Seq
		sum.Truncated = read >= maxRows
	}
	sum.Capped = q.ExcludeAgents
	sort.Strings(sum.Capped)
	for _, g := range byKey {
		for i, j := 0, len(g.Examples)-1; i < j; i, j = i+1, j-1 {
			g.Examples[i], g.Examples[j] = g.Examples[j], g.Examples[i]
		}
		sum.Groups = append(sum.Groups, *g)
	}
	sort.Slice(sum.Groups, func(i, j int) bool {
		a, b := sum.Groups[i], sum.Groups[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Tool+a.LiveRule+a.CandidateRule < b.Tool+b.LiveRule+b.CandidateRule
	})
	return sum, nil
}

// shadowQuery reads since (default 720h) and candidate (default: the
// candidate in shadow, or the last one) of a divergences request.
func (con *Console) shadowQuery(c echo.Context, status *airlockv1.ShadowStatusResponse) (time.Time, string, error) {
	if con.opts.Audit == nil {
		return time.Time{}, "", apierr.New(apierr.Unavailable, "the audit trail is not available in this process")
	}
	since := firstNonEmpty(c.QueryParam("since"), shadowDefaultBack)
	t, err := parseWhen(since, con.opts.Now())
	if err != nil {
		return time.Time{}, "", apierr.New(apierr.InvalidRequest, "since=%q: use a duration back from now (24h) or a date", since)
	}
	return t, firstNonEmpty(c.QueryParam("candidate"), status.GetState().GetCandidateDigest()), nil
}

// shadowView is the shadow page.
type shadowView struct {
	layout
	Status      *airlockv1.ShadowStatusResponse
	Unavailable string
	Since       string
	Summary     ShadowSummary
}

func (con *Console) shadowPage(c echo.Context) error {
	ctx := c.Request().Context()
	v := &shadowView{layout: layout{Title: "Shadow policy", Nav: "shadow"}, Since: firstNonEmpty(c.QueryParam("since"), shadowDefaultBack)}
	st, err := con.policy.ShadowStatus(ctx)
	if err != nil {
		v.Unavailable = apierr.MessageOf(err)
	}
	v.Status = st
	since, candidate, err := con.shadowQuery(c, st)
	if err != nil {
		return err
	}
	if v.Summary, err = con.shadowDivergences(ctx, since, candidate); err != nil {
		return err
	}
	return con.render(c, http.StatusOK, "shadow", v)
}

func (con *Console) stopShadowForm(c echo.Context) error {
	if _, err := con.policy.StopShadow(c.Request().Context(), principal(c).Actor(channel(c))); err != nil {
		return err
	}
	return con.flashAndRedirect(c, "/shadow", "shadow stopped on every policy replica")
}

// apiShadowStatus is GET /api/v1/policy/shadow.
func (con *Console) apiShadowStatus(c echo.Context) error {
	st, err := con.policy.ShadowStatus(c.Request().Context())
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, st)
}

// apiStartShadow is POST /api/v1/policy/shadow: the body is a
// ShadowStartRequest (protojson); it is started as the token's person
// (admins only).
func (con *Console) apiStartShadow(c echo.Context) error {
	// JSON escaping can double a candidate's size; the policy service
	// refuses one over its own bound with a sentence.
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<20))
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "read the candidate: %v", err)
	}
	req := &airlockv1.ShadowStartRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		return apierr.New(apierr.InvalidRequest, "the body is not a candidate (ShadowStartRequest as JSON: modules, data_json, source): %v", err)
	}
	req.By = principal(c).Actor(channel(c))
	st, err := con.policy.StartShadow(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, st)
}

// apiStopShadow is DELETE /api/v1/policy/shadow (admins only).
func (con *Console) apiStopShadow(c echo.Context) error {
	st, err := con.policy.StopShadow(c.Request().Context(), principal(c).Actor(channel(c)))
	if err != nil {
		return err
	}
	return protoJSONBlob(c, http.StatusOK, st)
}

// apiShadowDivergences is GET /api/v1/policy/shadow/divergences.
func (con *Console) apiShadowDivergences(c echo.Context) error {
	st, err := con.policy.ShadowStatus(c.Request().Context())
	if err != nil && c.QueryParam("candidate") == "" {
		return err
	}
	since, candidate, err := con.shadowQuery(c, st)
	if err != nil {
		return err
	}
	sum, err := con.shadowDivergences(c.Request().Context(), since, candidate)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sum)
}
