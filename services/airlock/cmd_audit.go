package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
)

// auditFlags are the flags every `airlock audit` command shares.
type auditFlags struct {
	dsn                                                    string
	call, thread, agent, tool, actor, typ, decision, since string
	until                                                  string
	limit                                                  int
}

func (a *auditFlags) addDSN(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.dsn, "clickhouse", "", "ClickHouse DSN, e.g. clickhouse://127.0.0.1:9000/airlock (default clickhouse.dsn / AIRLOCK_CLICKHOUSE_DSN; without one the trail is read from the events stream)")
}

func (a *auditFlags) addFilters(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.call, "call", "", "only this call id")
	f.StringVar(&a.thread, "thread", "", "only this thread")
	f.StringVar(&a.agent, "agent", "", "only this agent")
	f.StringVar(&a.tool, "tool", "", "only calls to this tool (server__tool or tool)")
	f.StringVar(&a.actor, "actor", "", "only events caused by this actor id (a reviewer, an agent, a service)")
	f.StringVar(&a.typ, "type", "", "only this event type (requested, approved, completed, ...)")
	f.StringVar(&a.decision, "decision", "", "only this decision (allow, deny, ask, approve, reject, request_changes, expire, cancel)")
	f.StringVar(&a.since, "since", "", "from this time: 7d, 12h, 2026-01-31 or RFC 3339")
	f.StringVar(&a.until, "until", "", "before this time (same forms as --since)")
}

func (a *auditFlags) filter() (store.Filter, error) {
	now := time.Now()
	since, err := record.ParseSince(a.since, now)
	if err != nil {
		return store.Filter{}, fmt.Errorf("--since: %w", err)
	}
	until, err := record.ParseSince(a.until, now)
	if err != nil {
		return store.Filter{}, fmt.Errorf("--until: %w", err)
	}
	return store.Filter{Call: a.call, Thread: a.thread, Agent: a.agent, Tool: a.tool, Actor: a.actor,
		Type: a.typ, Decision: a.decision, Since: since, Until: until, Limit: a.limit}, nil
}

// openAudit opens the ClickHouse store, or the events stream when no DSN
// is configured. close releases whatever was opened.
func (a *auditFlags) open(ctx context.Context, g *globals) (rd store.Reader, closeFn func(), err error) {
	cfg, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	dsn, from := cfg.ClickHouse.DSN, ""
	if a.dsn != "" {
		dsn = a.dsn
	}
	if dsn == "" {
		// `airlock dev --clickhouse-local` says where its ClickHouse listens.
		if raw, err := os.ReadFile(localDSNFile(cfg.Dev.DataDir)); err == nil {
			dsn, from = strings.TrimSpace(string(raw)), localDSNFile(cfg.Dev.DataDir)
		}
	}
	if dsn != "" {
		st, err := store.Open(ctx, dsn)
		if err != nil {
			if from != "" {
				return nil, nil, fmt.Errorf("the local ClickHouse that %s names does not answer: %w (is `airlock dev --clickhouse-local` running?)", from, err)
			}
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	nc, js, err := g.connect(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("no ClickHouse configured, so the audit trail is read from the events stream, but NATS is not reachable: %w (pass --clickhouse DSN, or start airlock)", err)
	}
	fmt.Fprintln(os.Stderr, "(no ClickHouse configured: reading the audit trail from the events stream)")
	return store.NewStream(js, cfg.Stream.Name), func() { nc.Close() }, nil
}

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Query, verify, export and analyse the audit trail",
		Long: `The audit trail is every event, hash-chained in stream order, in ClickHouse
(clickhouse.dsn, AIRLOCK_CLICKHOUSE_DSN or --clickhouse). Without ClickHouse the
same rows are computed from the events stream.`,
	}
	cmd.AddCommand(newAuditQueryCmd(g), newAuditVerifyCmd(g), newAuditExportCmd(g), newAuditStatsCmd(g))
	return cmd
}

func newAuditQueryCmd(g *globals) *cobra.Command {
	var a auditFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "query [filters]",
		Short: "List audit events matching filters (a table, or JSON lines with --json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.filter()
			if err != nil {
				return usageErr(cmd, "%v", err)
			}
			rd, closeFn, err := a.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			if asJSON {
				_, err := store.Export(cmd.Context(), rd, os.Stdout, store.FormatJSONL, f)
				return err
			}
			return printRows(cmd.Context(), rd, f, os.Stdout)
		},
	}
	a.addDSN(cmd)
	a.addFilters(cmd)
	cmd.Flags().IntVar(&a.limit, "limit", 100, "at most this many rows (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func printRows(ctx context.Context, rd store.Reader, f store.Filter, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tTYPE\tAGENT\tCALL\tREV\tTOOL\tACTOR\tDECISION\tREASON")
	n := 0
	err := rd.Each(ctx, f, func(r store.Row) error {
		n++
		actor := r.ActorID
		if r.ActorType != "" && actor != "" {
			actor = r.ActorType + ":" + actor
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.UTC().Format("2006-01-02 15:04:05.000"), r.Type,
			r.Agent, r.Call, r.Revision, record.ToolKey(r.Server, r.Tool), actor, r.Decision, auditOneLine(r.Reason, 60))
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d event(s) from %s\n", n, rd.Source())
	return nil
}

func auditOneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func newAuditVerifyCmd(g *globals) *cobra.Command {
	var a auditFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute the hash chain: prints OK with the count, or the first row that does not match (exit 1)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rd, closeFn, err := a.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := rd.Verify(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(res)
				fmt.Println(string(b))
			} else if res.OK {
				fmt.Printf("OK: %d events verified (seq %d-%d), chain head %s (%s)\n", res.Count, res.FirstSeq, res.LastSeq, res.Head, res.Source)
			}
			if !res.OK {
				if !asJSON {
					fmt.Printf("BROKEN at seq %d (event %s): %s\n", res.Break.Seq, res.Break.EventID, res.Break.Problem)
				}
				return fmt.Errorf("audit chain verification failed at seq %d: investigate who changed the audit store", res.Break.Seq)
			}
			return nil
		},
	}
	a.addDSN(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

func newAuditExportCmd(g *globals) *cobra.Command {
	var a auditFlags
	var format, out string
	cmd := &cobra.Command{
		Use:   "export --format csv|json|jsonl [filters]",
		Short: "Export audit events matching filters as CSV or JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.filter()
			if err != nil {
				return usageErr(cmd, "%v", err)
			}
			if format != store.FormatCSV && format != store.FormatJSON && format != store.FormatJSONL {
				return usageErr(cmd, "--format must be csv, json or jsonl")
			}
			rd, closeFn, err := a.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			w := io.Writer(os.Stdout)
			if out != "" && out != "-" {
				file, err := os.Create(out)
				if err != nil {
					return fmt.Errorf("export to %s: %w", out, err)
				}
				defer file.Close()
				w = file
			}
			n, err := store.Export(cmd.Context(), rd, w, format, f)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			fmt.Fprintf(os.Stderr, "exported %d event(s) from %s\n", n, rd.Source())
			return nil
		},
	}
	a.addDSN(cmd)
	a.addFilters(cmd)
	cmd.Flags().StringVar(&format, "format", "csv", "csv, json (one array) or jsonl (one object per line)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "write to this file instead of stdout")
	return cmd
}

func newAuditStatsCmd(g *globals) *cobra.Command {
	var a auditFlags
	var asJSON bool
	var opt store.AnalyticsOptions
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Analytics for tuning policy: approval rate per tool, time to decide, rubber-stamping reviewers, most-asked tools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			since, err := record.ParseSince(a.since, time.Now())
			if err != nil {
				return usageErr(cmd, "--since: %v", err)
			}
			opt.Since = since
			if !cmd.Flags().Changed("fast") {
				if cfg, err := g.load(); err == nil && cfg.Audit.FastApproval > 0 {
					opt.FastApproval = cfg.Audit.FastApproval
				}
			}
			rd, closeFn, err := a.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			an, err := rd.Analytics(cmd.Context(), opt)
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(an)
				fmt.Println(string(b))
				return nil
			}
			printAnalytics(os.Stdout, an)
			return nil
		},
	}
	a.addDSN(cmd)
	cmd.Flags().StringVar(&a.since, "since", "30d", "analyse calls asked about since: 7d, 12h, a date or RFC 3339 (\"\" for all)")
	cmd.Flags().DurationVar(&opt.FastApproval, "fast", 5*time.Second, "an approval quicker than this counts as fast (default audit.fast_approval)")
	cmd.Flags().IntVar(&opt.MinDecisions, "min-decisions", 3, "decisions a reviewer needs before being judged a rubber-stamper")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printAnalytics(out io.Writer, a store.Analytics) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tALLOWED\tDENIED\tASKED\tAPPROVED\tREJECTED\tCHANGES\tEXPIRED\tAPPROVAL RATE")
	for _, t := range a.Tools {
		rate := "-"
		if t.Approved+t.Rejected+t.ChangesRequested > 0 {
			rate = fmt.Sprintf("%.0f%%", 100*t.ApprovalRate)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Tool, t.Allowed, t.Denied, t.Asked, t.Approved, t.Rejected, t.ChangesRequested, t.Expired, rate)
	}
	tw.Flush()
	fmt.Fprintf(out, "\ntime to decide: p50 %s, p95 %s over %d decisions\n", secs(a.DecideP50), secs(a.DecideP95), a.DecideCount)
	fmt.Fprintf(out, "\nreviewers (fast = approved in under %s):\n", a.Options.FastApproval)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REVIEWER\tDECISIONS\tAPPROVALS\tFAST\tMEDIAN\tRUBBER-STAMPER")
	for _, r := range a.Reviewers {
		flag := ""
		if r.RubberStamper {
			flag = "yes: most decisions are approvals in seconds"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d (%.0f%%)\t%s\t%s\n", r.ID, r.Decisions, r.Approvals, r.FastApprovals, 100*r.FastShare, secs(r.MedianSeconds), flag)
	}
	tw.Flush()
	fmt.Fprintln(out, "\nmost asked about:")
	for i, t := range a.MostAsked {
		fmt.Fprintf(out, "  %d. %s (%d)\n", i+1, t.Tool, t.Asked)
	}
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
