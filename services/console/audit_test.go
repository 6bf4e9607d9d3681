package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/console"
)

// memAudit is an in-memory audit trail behind the console's Audit port.
type memAudit struct {
	rows    []console.AuditRow
	queries []console.AuditQuery
	decided []console.AuditDecision
}

func (m *memAudit) Source() string { return "memory" }

func (m *memAudit) match(q console.AuditQuery) []console.AuditRow {
	var out []console.AuditRow
	for _, r := range m.rows {
		if (q.Agent == "" || r.Agent == q.Agent) && (q.Type == "" || r.Type == q.Type) && (q.Since.IsZero() || !r.Time.Before(q.Since)) && r.Seq > q.AfterSeq && !slices.Contains(q.ExcludeAgents, r.Agent) {
			out = append(out, r)
		}
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out
}

func (m *memAudit) Search(_ context.Context, q console.AuditQuery) ([]console.AuditRow, error) {
	m.queries = append(m.queries, q)
	return m.match(q), nil
}

func (m *memAudit) Export(_ context.Context, w io.Writer, format string, q console.AuditQuery) (int, error) {
	rows := m.match(q)
	for _, r := range rows {
		fmt.Fprintf(w, "%d,%s,%s,%s\n", r.Seq, r.Type, r.Call, r.Reason)
	}
	return len(rows), nil
}

func (m *memAudit) Stats(_ context.Context, _ time.Time) (console.AuditStats, error) {
	return console.AuditStats{DecideCount: 3, DecideP50: 1.5, DecideP95: 4, FastApproval: 5 * time.Second,
		Reviewers: []console.AuditReviewer{{ID: "speedy", Decisions: 20, Approvals: 20, FastApproved: 19, FastShare: 0.95, MedianSeconds: 1, RubberStamper: true}},
		MostAsked: []console.AuditToolStats{{Tool: "fs__write_file", Asked: 20, Approved: 19, Rejected: 1, ApprovalRate: 0.95}}, Decided: m.decided}, nil
}

func TestAuditPages(t *testing.T) {
	e := newEnv(t)
	mem := &memAudit{rows: []console.AuditRow{
		{Seq: 1, Time: time.Now(), Type: "requested", Agent: "bot", Call: "call_1", Tool: "fs__write_file", Actor: "bot", Hash: "abcdef0123456789"},
		{Seq: 2, Time: time.Now(), Type: "rejected", Agent: "bot", Call: "call_1", Actor: "alice", Channel: "console", Decision: "reject", Reason: "<script>x</script>", Hash: "0123"},
		{Seq: 3, Time: time.Now(), Type: "requested", Agent: "other", Call: "call_2", Tool: "fs__read_file", Hash: "ff"},
		{Seq: 4, Time: time.Now(), Type: "canceled", Agent: "bot", Call: "call_3", Actor: "bot", ActorType: "agent", Channel: "nats", Reason: "the user changed their mind", Hash: "ee"},
	}}
	_, e.srv = e.startConsoleWith(console.Options{Audit: mem})

	auditor := e.browser()
	auditor.signIn("audrey")
	t.Run("an auditor searches the trail and agent text stays text", func(t *testing.T) {
		p := auditor.get("/audit?agent=bot&since=1h")
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "call_1") || strings.Contains(p.Body, "call_2") ||
			!strings.Contains(p.Body, "&lt;script&gt;x&lt;/script&gt;") || !strings.Contains(p.Body, "abcdef0123<") {
			t.Fatalf("%d\n%s", p.Status, p.Body)
		}
		last := mem.queries[len(mem.queries)-1]
		if last.Agent != "bot" || time.Since(last.Since) < 59*time.Minute || time.Since(last.Since) > 61*time.Minute {
			t.Fatalf("query %+v", last)
		}
		if !strings.Contains(p.Body, `href="/audit/export?agent=bot&amp;format=csv&amp;since=1h"`) {
			t.Fatalf("the export link does not keep the filters:\n%s", p.Body)
		}
	})
	t.Run("an agent's own cancel is noted as the agent's, a person's decision by its channel", func(t *testing.T) {
		p := auditor.get("/audit?agent=bot")
		for _, want := range []string{`bot <span class="muted">(agent)</span>`, `alice <span class="muted">(console)</span>`} {
			if !strings.Contains(p.Body, want) {
				t.Fatalf("the audit page lacks %q:\n%s", want, p.Body)
			}
		}
	})
	t.Run("export downloads the matching rows", func(t *testing.T) {
		p := auditor.get("/audit/export?format=csv&type=rejected")
		if p.Status != http.StatusOK || p.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
			!strings.Contains(p.Header.Get("Content-Disposition"), "attachment") || strings.TrimSpace(p.Body) != "2,rejected,call_1,<script>x</script>" {
			t.Fatalf("%d %v\n%s", p.Status, p.Header, p.Body)
		}
		if p := auditor.get("/audit/export?format=xml"); p.Status != http.StatusBadRequest {
			t.Fatalf("xml export: %d", p.Status)
		}
		if p := auditor.get("/audit?since=yesterday-ish"); p.Status != http.StatusBadRequest {
			t.Fatalf("bad since: %d", p.Status)
		}
	})
	t.Run("analytics flags the rubber-stamping reviewer", func(t *testing.T) {
		p := auditor.get("/audit/analytics")
		for _, want := range []string{"speedy", "rubber-stamping?", "95%", "fs__write_file", "median 1.5s"} {
			if !strings.Contains(p.Body, want) {
				t.Fatalf("analytics lacks %q:\n%s", want, p.Body)
			}
		}
	})
	t.Run("a reviewer cannot read the audit trail", func(t *testing.T) {
		b := e.browser()
		b.signIn("alice")
		if p := b.get("/audit"); p.Status != http.StatusForbidden {
			t.Fatalf("%d", p.Status)
		}
		if p := b.get("/"); strings.Contains(p.Body, `href="/audit"`) {
			t.Fatal("the reviewer is shown the audit link")
		}
	})
	t.Run("without an audit reader the pages say it is unavailable", func(t *testing.T) {
		_, plain := e.startConsole()
		b := e.browser()
		b.base = plain.URL
		b.signIn("audrey")
		if p := b.get("/audit"); p.Status != http.StatusServiceUnavailable {
			t.Fatalf("%d", p.Status)
		}
	})
}

// TestAuditPagesAtScale: the audit view pages through a long trail 100
// rows at a time, and analytics draws its charts as inline SVG.
func TestAuditPagesAtScale(t *testing.T) {
	e := newEnv(t)
	mem := &memAudit{}
	start := time.Now().Add(-48 * time.Hour)
	for i := 1; i <= 250; i++ {
		mem.rows = append(mem.rows, console.AuditRow{Seq: uint64(i), Time: start.Add(time.Duration(i) * time.Minute), Type: "requested", Agent: "bot", Call: fmt.Sprintf("c%d", i), Hash: "ab"})
	}
	outcomes := []string{"approved", "approved", "rejected", "changes_requested", "expired"}
	for i := 0; i < 40; i++ {
		asked := start.Add(time.Duration(i) * time.Hour)
		mem.decided = append(mem.decided, console.AuditDecision{Tool: "fs__write_file", Outcome: outcomes[i%len(outcomes)], By: "alice",
			AskedAt: asked, DecidedAt: asked.Add(time.Duration(i+1) * 7 * time.Second)})
	}
	_, e.srv = e.startConsoleWith(console.Options{Audit: mem})
	b := e.browser()
	b.signIn("audrey")

	pages := []struct {
		name, path, first, last string
		next                    bool
	}{
		{"the_first_page_holds_100_rows_and_links_the_next", "/audit", "bot/c1<", "bot/c100<", true},
		{"the_next_page_starts_after_the_last_row", "/audit?after=100", "bot/c101<", "bot/c200<", true},
		{"the_last_page_has_no_next_link", "/audit?after=200", "bot/c201<", "bot/c250<", false},
	}
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			p := b.get(pg.path)
			rows := strings.Count(p.Body, `data-label="#"`)
			if p.Status != http.StatusOK || !strings.Contains(p.Body, pg.first) || !strings.Contains(p.Body, pg.last) || rows > 100 {
				t.Fatalf("%d, %d rows:\n%s", p.Status, rows, p.Body)
			}
			if got := strings.Contains(p.Body, `id="audit-next"`); got != pg.next {
				t.Fatalf("next link shown: %v, want %v", got, pg.next)
			}
		})
	}
	t.Run("analytics_draws_four_charts_in_the_top_navigation", func(t *testing.T) {
		p := b.get("/audit/analytics")
		if n := strings.Count(p.Body, `<svg class="chart"`); n != 4 {
			t.Fatalf("%d charts:\n%s", n, p.Body)
		}
		for _, want := range []string{`id="nav-analytics"`, `class="bar-rejected"`, `class="chart-line"`, `class="bar-fast"`, "fs__write_file: 19 of 20 decided calls approved (95%)"} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("analytics lacks %q", want)
			}
		}
		if strings.Contains(p.Body, "<script>") || strings.Contains(p.Body, "style=") {
			t.Error("a chart uses inline script or style, which the page's policy forbids")
		}
	})
}
