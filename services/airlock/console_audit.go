package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// consoleAudit adapts the audit store to the console's audit pages, so the
// console module does not depend on the audit module. It reads ClickHouse
// when clickhouse.dsn is set (opened at first use, so the console starts
// while ClickHouse is down), else the events stream.
type consoleAudit struct {
	deps  svc.Deps
	mu    sync.Mutex
	rd    store.Reader
	rdDSN string // the DSN rd reads, when it reads ClickHouse
}

func newConsoleAudit(d svc.Deps) *consoleAudit { return &consoleAudit{deps: d} }

func (a *consoleAudit) reader(ctx context.Context) (store.Reader, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	dsn := a.deps.Config.ClickHouse.Reader()
	if a.deps.ClickHouse != nil {
		// A local ClickHouse that exited or moved: never dial its old
		// address (another process may listen there now).
		var err error
		if dsn, err = a.deps.ClickHouse(true); err != nil || dsn != a.rdDSN {
			if a.rd != nil {
				_ = a.rd.Close()
				a.rd, a.rdDSN = nil, ""
			}
			if err != nil {
				return nil, fmt.Errorf("the audit store is down: %w", err)
			}
		}
	}
	if a.rd != nil {
		return a.rd, nil
	}
	if dsn != "" {
		st, err := store.Open(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("open the audit store: %w", err)
		}
		a.rd, a.rdDSN = st, dsn
		return st, nil
	}
	a.rd = store.NewStream(a.deps.JS, a.deps.Config.Stream.Name, nil) // the console holds no audit key: rows from the stream carry no hashes
	return a.rd, nil
}

func (a *consoleAudit) Source() string {
	if a.deps.Config.ClickHouse.DSN != "" {
		return "clickhouse"
	}
	return "stream"
}

func auditFilter(q console.AuditQuery) store.Filter {
	return store.Filter{Call: q.Call, Thread: q.Thread, Agent: q.Agent, Tool: q.Tool, Actor: q.Actor, Type: q.Type,
		Decision: q.Decision, DecidedBy: q.DecidedBy, Grant: q.Grant, Since: q.Since, Until: q.Until, AfterSeq: q.AfterSeq, ExcludeAgents: q.ExcludeAgents, Limit: q.Limit}
}

func (a *consoleAudit) Search(ctx context.Context, q console.AuditQuery) ([]console.AuditRow, error) {
	rd, err := a.reader(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := rd.Query(ctx, auditFilter(q))
	if err != nil {
		return nil, err
	}
	out := make([]console.AuditRow, 0, len(rows))
	for _, r := range rows {
		tool := r.Tool
		if r.Server != "" && r.Tool != "" {
			tool = r.Server + "__" + r.Tool
		}
		out = append(out, console.AuditRow{Seq: r.Seq, Revision: r.Revision, Time: r.Time, Type: r.Type, Agent: r.Agent, Thread: r.Thread,
			Call: r.Call, Tool: tool, Actor: r.ActorID, ActorType: r.ActorType, Channel: r.ActorChannel, Decision: r.Decision, Reason: r.Reason,
			Risk: r.Risk, RuleID: r.RuleID, PolicyRevision: r.PolicyRevision, ArgsSHA: r.ArgsDigest, DecidedBy: r.DecidedBy, Grant: r.GrantID, Hash: r.Hash})
	}
	return out, nil
}

func (a *consoleAudit) Export(ctx context.Context, w io.Writer, format string, q console.AuditQuery) (int, error) {
	rd, err := a.reader(ctx)
	if err != nil {
		return 0, err
	}
	return store.Export(ctx, rd, w, format, auditFilter(q))
}

func (a *consoleAudit) Stats(ctx context.Context, since time.Time) (console.AuditStats, error) {
	rd, err := a.reader(ctx)
	if err != nil {
		return console.AuditStats{}, err
	}
	an, err := rd.Analytics(ctx, store.AnalyticsOptions{Since: since})
	if err != nil {
		return console.AuditStats{}, err
	}
	tools := func(ts []store.ToolStats) []console.AuditToolStats {
		var out []console.AuditToolStats
		for _, t := range ts {
			out = append(out, console.AuditToolStats{Tool: t.Tool, Allowed: t.Allowed, Denied: t.Denied, Asked: t.Asked, Approved: t.Approved,
				Rejected: t.Rejected, Changes: t.ChangesRequested, Exp: t.Expired, ApprovalRate: t.ApprovalRate})
		}
		return out
	}
	st := console.AuditStats{DecideCount: an.DecideCount, DecideP50: an.DecideP50, DecideP95: an.DecideP95,
		Tools: tools(an.Tools), MostAsked: tools(an.MostAsked), FastApproval: an.Options.FastApproval}
	for _, d := range an.Decided {
		st.Decided = append(st.Decided, console.AuditDecision{Tool: d.Tool, Outcome: d.Outcome, By: d.By, AskedAt: d.AskedAt, DecidedAt: d.DecidedAt})
	}
	for _, r := range an.Reviewers {
		st.Reviewers = append(st.Reviewers, console.AuditReviewer{ID: r.ID, Decisions: r.Decisions, Approvals: r.Approvals,
			FastApproved: r.FastApprovals, FastShare: r.FastShare, MedianSeconds: r.MedianSeconds, RubberStamper: r.RubberStamper})
	}
	return st, nil
}
