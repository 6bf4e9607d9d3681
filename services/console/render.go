package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	// short is a time as people scan a list: the time of day, with the
	// date when it is not the same day as now (all in UTC).
	"short": shortTime,
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	// unverified is what follows an on_behalf_of airlock did not verify,
	// as on every surface.
	"unverified": func() string { return calls.Unverified },
	"join":       strings.Join,
	"plusOne":    func(i int) int { return i + 1 },
	"pct":        pct,
	"cut": func(s string, n int) string {
		if len(s) > n {
			return calls.Cut(s, n)
		}
		return s
	},
	"secs":      secsText,
	"ruleTable": newRuleTable,
	// unknownToolWarning says, for a person deciding, that the registry
	// lacks the call's tool (executorapi.Warning), every name as code.
	"unknownToolWarning": func(u *airlockv1.UnknownTool) template.HTML {
		return template.HTML(executorapi.Warning(u, func(name string) string {
			return "<code>" + template.HTMLEscapeString(name) + "</code>"
		}))
	},
}

// shortTime is "15:04:05" for today and "Jan 2 15:04" otherwise, in UTC.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	t, now := t.UTC(), time.Now().UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05")
	}
	if t.Year() == now.Year() {
		return t.Format("Jan 2 15:04")
	}
	return t.Format("2006-01-02 15:04")
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
func (con *Console) render(c echo.Context, status int, page string, v view) error {
	t, ok := con.pages[page]
	if !ok {
		return fmt.Errorf("no page template %q", page)
	}
	l := v.base()
	l.User = principal(c)
	l.HasAudit = con.opts.Audit != nil
	l.CSRF = l.User.CSRF
	if l.Nav == "" {
		l.Nav = page
	}
	if ck, err := c.Cookie(flashCookie); err == nil && l.Flash == "" {
		if v, err := url.QueryUnescape(ck.Value); err == nil {
			l.Flash = v
		}
		con.setCookie(c, flashCookie, "", -1)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		return fmt.Errorf("render %s: %w", page, err)
	}
	// Every page, whatever data it shows, is escaped for its medium here.
	return c.HTMLBlob(status, escape.HTMLPage(buf.Bytes()))
}

// flashAndRedirect shows msg on the next page, at to: a path built here
// from validated ids (never a URL from the request).
func (con *Console) flashAndRedirect(c echo.Context, to, msg string) error {
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") {
		to = "/"
	}
	con.setCookie(c, flashCookie, url.QueryEscape(msg), time.Minute)
	return c.Redirect(http.StatusSeeOther, to)
}

// rows renders one table row per record with the named partial. A record
// that cannot be rendered becomes a flagged row naming it; the others
// render: no single record breaks a list.
func (con *Console) rows(partial string, recs []*airlockv1.ApprovalRecord) template.HTML {
	var out bytes.Buffer
	for _, rec := range recs {
		out.WriteString(string(con.row(partial, rec)))
	}
	return template.HTML(out.String())
}

func (con *Console) row(partial string, rec *airlockv1.ApprovalRecord) template.HTML {
	return con.rowAs(partial, rec, nil)
}

// rowAs is row with the view adjusted by as (nil leaves it): what the
// signed-in person may do with the call.
func (con *Console) rowAs(partial string, rec *airlockv1.ApprovalRecord, as func(*callView)) (html template.HTML) {
	agent, call := rec.GetCall().GetAgentId(), rec.GetCall().GetCallId()
	broken := func(why string) template.HTML {
		con.log.Warn("a record could not be rendered; it is flagged in the list", "agent", agent, "call", call, "err", why)
		var buf bytes.Buffer
		if err := con.pages["partials"].ExecuteTemplate(&buf, "broken-row", brokenRow{Key: rowKey(agent, call), Agent: agent, Call: call, Path: callPath(agent, call), Why: why}); err != nil {
			return template.HTML(`<tr class="call-row broken"><td colspan="6">a record could not be shown</td></tr>`)
		}
		return template.HTML(escape.HTMLPage(buf.Bytes()))
	}
	defer func() {
		if r := recover(); r != nil {
			html = broken(fmt.Sprint(r))
		}
	}()
	v := newCallView(rec)
	if as != nil {
		as(&v)
	}
	var buf bytes.Buffer
	if err := con.pages["partials"].ExecuteTemplate(&buf, partial, v); err != nil {
		return broken(err.Error())
	}
	// A row is also sent alone, on the inbox's event stream.
	return template.HTML(escape.HTMLPage(buf.Bytes()))
}

// brokenRow is a record the list could not render.
type brokenRow struct {
	Key, Agent, Call, Path, Why string
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

func secsText(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}
