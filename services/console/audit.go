package console

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Audit is the read side of the audit trail that the audit and analytics
// pages use. The console does not depend on the audit service's module: the
// airlock binary passes an adapter over its store (ClickHouse, or the
// events stream when no ClickHouse is configured). Nil hides the pages.
type Audit interface {
	// Source names where rows come from ("clickhouse" or "stream").
	Source() string
	// Search returns rows matching q in stream order, at most q.Limit.
	Search(ctx context.Context, q AuditQuery) ([]AuditRow, error)
	// Export writes every row matching q to w as csv, json or jsonl and
	// returns how many it wrote.
	Export(ctx context.Context, w io.Writer, format string, q AuditQuery) (int, error)
	// Stats computes approval rates, time to decide, rubber-stamping
	// reviewers and the most-asked tools since a time (zero: all).
	Stats(ctx context.Context, since time.Time) (AuditStats, error)
}

// AuditQuery selects audit rows; empty fields match everything.
type AuditQuery struct {
	Call, Thread, Agent, Tool, Actor, Type, Decision string
	// DecidedBy is human, rule, grant, timeout or one exactly (rule:ask-writes);
	// Grant a standing grant id.
	DecidedBy, Grant string
	Since, Until     time.Time
	// AfterSeq returns only rows after this stream sequence (paging).
	AfterSeq uint64
	// ExcludeAgents leaves out these agents' rows.
	ExcludeAgents []string
	Limit         int
}

// AuditRow is one audited event.
type AuditRow struct {
	Seq                                                     uint64
	Revision                                                uint32
	Time                                                    time.Time
	Type, Agent, Thread, Call, Tool, Actor, Channel         string
	Decision, Reason, Risk, RuleID, PolicyRevision, ArgsSHA string
	DecidedBy, Grant                                        string
	Hash                                                    string
	// ActorType is who Actor is, as the audit's actor_type column words it
	// (calls.ActorTypeName: "human", "agent", "service"; "" unknown).
	ActorType string
}

// AuditStats is what the analytics page shows.
type AuditStats struct {
	DecideCount          int
	DecideP50, DecideP95 float64
	Tools, MostAsked     []AuditToolStats
	Reviewers            []AuditReviewer
	FastApproval         time.Duration
	// Decided are the calls people were asked about and their outcomes,
	// for the charts.
	Decided []AuditDecision
}

// AuditToolStats counts what happened to one tool's calls.
type AuditToolStats struct {
	Tool                                                     string
	Allowed, Denied, Asked, Approved, Rejected, Changes, Exp int
	ApprovalRate                                             float64
}

// AuditReviewer is one reviewer's decisions; RubberStamper flags one who
// approves nearly everything within seconds.
type AuditReviewer struct {
	ID                                 string
	Decisions, Approvals, FastApproved int
	FastShare, MedianSeconds           float64
	RubberStamper                      bool
}

// auditView is the audit page: one page of rows at a time.
type auditView struct {
	layout
	Source string
	Q      url.Values
	// Export links carry the page's filters.
	ExportCSV, ExportJSON, ExportJSONL string
	Rows                               []auditRowView
	// NextPath is the next page (empty on the last); FirstPath the first
	// page when this is not it.
	NextPath, FirstPath string
	FirstSeq, LastSeq   uint64
	PageSize            int
}

// auditRowView is one row with its call's page (when its ids are ids), or
// for a system event about a standing grant the grant's audit trail.
type auditRowView struct {
	AuditRow
	CallPath string
	Short    string
	// ActorNote follows Actor in brackets (calls.ActorNote).
	ActorNote string
}

// auditPageRows is how many rows one page of the audit view shows.
const auditPageRows = 100

func auditQueryFrom(c echo.Context, now time.Time) (AuditQuery, error) {
	q := AuditQuery{
		Call: c.QueryParam("call"), Thread: c.QueryParam("thread"), Agent: c.QueryParam("agent"), Tool: c.QueryParam("tool"),
		Actor: c.QueryParam("actor"), Type: c.QueryParam("type"), Decision: c.QueryParam("decision"),
		DecidedBy: c.QueryParam("decided_by"), Grant: c.QueryParam("grant"),
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		v := strings.TrimSpace(c.QueryParam(p.name))
		if v == "" {
			continue
		}
		t, err := parseWhen(v, now)
		if err != nil {
			return q, apierr.New(apierr.InvalidRequest, "%s=%q: use a duration back from now (24h) or a time (2026-01-02 or 2026-01-02T15:04:05Z)", p.name, v)
		}
		*p.dst = t
	}
	if a := c.QueryParam("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return q, apierr.New(apierr.InvalidRequest, "after=%q is not an event number", a)
		}
		q.AfterSeq = n
	}
	return q, nil
}

// parseWhen reads "24h" (that long ago), a date or an RFC 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, s)
}

// withParam is the page's query with one parameter set (or removed when v is "").
func withParam(q url.Values, k, v string) url.Values {
	out := url.Values{}
	for key, vs := range q {
		out[key] = vs
	}
	if v == "" {
		out.Del(k)
	} else {
		out.Set(k, v)
	}
	return out
}

func (con *Console) auditPage(c echo.Context) error {
	if con.opts.Audit == nil {
		return apierr.New(apierr.Unavailable, "the audit trail is not available in this process")
	}
	q, err := auditQueryFrom(c, con.opts.Now())
	if err != nil {
		return err
	}
	q.Limit = auditPageRows + 1
	rows, err := con.opts.Audit.Search(c.Request().Context(), q)
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "read the audit trail: %v", err)
	}
	v := &auditView{layout: layout{Title: "Audit", Nav: "audit"}, Source: con.opts.Audit.Source(), Q: c.QueryParams(), PageSize: auditPageRows}
	filters := withParam(c.QueryParams(), "after", "")
	v.ExportCSV = "/audit/export?" + withParam(filters, "format", "csv").Encode()
	v.ExportJSON = "/audit/export?" + withParam(filters, "format", "json").Encode()
	v.ExportJSONL = "/audit/export?" + withParam(filters, "format", "jsonl").Encode()
	more := len(rows) > auditPageRows
	if more {
		rows = rows[:auditPageRows]
	}
	for _, r := range rows {
		v.Rows = append(v.Rows, auditRowView{AuditRow: r, CallPath: auditRowPath(r), Short: shortTime(r.Time), ActorNote: auditActorNote(r)})
	}
	if len(rows) > 0 {
		v.FirstSeq, v.LastSeq = rows[0].Seq, rows[len(rows)-1].Seq
	}
	if more {
		v.NextPath = "/audit?" + withParam(c.QueryParams(), "after", strconv.FormatUint(v.LastSeq, 10)).Encode()
	}
	if q.AfterSeq > 0 {
		v.FirstPath = "/audit?" + filters.Encode()
	}
	return con.render(c, http.StatusOK, "audit", v)
}

// auditActorNote is calls.ActorNote of the row's actor, rebuilt from the
// words the audit stores, so that the page notes an agent's own cancel as
// "(agent)" as every other surface does.
func auditActorNote(r AuditRow) string {
	t := airlockv1.ActorType(airlockv1.ActorType_value["ACTOR_TYPE_"+strings.ToUpper(r.ActorType)])
	return calls.ActorNote(&airlockv1.Actor{Type: t, Channel: r.Channel})
}

// auditRowPath is where a row's Call links: the call's page, or for a
// system event (sign-ins, tokens, grants) the grant's trail when it names
// one, else nowhere.
func auditRowPath(r AuditRow) string {
	if r.Agent != subject.SystemAgent {
		return callPath(r.Agent, r.Call)
	}
	if r.Grant == "" {
		return ""
	}
	return "/audit?" + url.Values{"grant": {r.Grant}}.Encode()
}

func (con *Console) auditExport(c echo.Context) error {
	if con.opts.Audit == nil {
		return apierr.New(apierr.Unavailable, "the audit trail is not available in this process")
	}
	q, err := auditQueryFrom(c, con.opts.Now())
	if err != nil {
		return err
	}
	format := c.QueryParam("format")
	ctype := map[string]string{"csv": "text/csv; charset=utf-8", "json": "application/json", "jsonl": "application/x-ndjson"}[format]
	if ctype == "" {
		return apierr.New(apierr.InvalidRequest, "format=%q: use csv, json or jsonl", format)
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, ctype)
	w.Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="airlock-audit-%s.%s"`, con.opts.Now().UTC().Format("20060102-150405"), format))
	w.WriteHeader(http.StatusOK)
	if _, err := con.opts.Audit.Export(c.Request().Context(), w, format, q); err != nil {
		// The status is sent; all we can do is log and cut the download short.
		con.log.Error("audit export failed mid-way", "err", err)
	}
	return nil
}

// analyticsView is the analytics page: figures, tables and charts.
type analyticsView struct {
	layout
	Source, Since string
	Stats         AuditStats
	// Charts, drawn on the server as SVG.
	DecisionsChart, TimeChart, DistributionChart, RateChart template.HTML
}

func (con *Console) analyticsPage(c echo.Context) error {
	if con.opts.Audit == nil {
		return apierr.New(apierr.Unavailable, "the audit trail is not available in this process")
	}
	since := firstNonEmpty(c.QueryParam("since"), "720h")
	t, err := parseWhen(since, con.opts.Now())
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "since=%q: use a duration back from now (24h) or a date", since)
	}
	st, err := con.opts.Audit.Stats(c.Request().Context(), t)
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "compute analytics: %v", err)
	}
	v := &analyticsView{layout: layout{Title: "Analytics", Nav: "analytics"}, Source: con.opts.Audit.Source(), Since: since, Stats: st,
		DecisionsChart: decisionsChart(st.Decided), TimeChart: timeToDecideChart(st.Decided),
		DistributionChart: distributionChart(st.Decided), RateChart: approvalRateChart(st.MostAsked)}
	return con.render(c, http.StatusOK, "analytics", v)
}
