package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// auditFlags are the flags every `airlock audit` command shares.
type auditFlags struct {
	dsn                                                    string
	call, thread, agent, tool, actor, typ, decision, since string
	until, decidedBy, grant                                string
	limit                                                  int
	after                                                  uint64
	// write: the command changes the trail (drop-before), so it logs in to
	// the ClickHouse of `airlock dev --clickhouse-local` as its writer;
	// every other command as its read-only auditor.
	write bool
}

func (a *auditFlags) addDSN(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.dsn, "clickhouse", "", "ClickHouse DSN, e.g. clickhouse://127.0.0.1:9000/airlock (default clickhouse.dsn / AIRLOCK_CLICKHOUSE_DSN, else the one airlock dev --clickhouse-local runs; without one the trail is read from the events stream)")
}

// addStoreDSN is --clickhouse of the commands that work on the stored rows
// themselves (verify, drop-before), which the stream cannot stand in for.
func (a *auditFlags) addStoreDSN(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.dsn, "clickhouse", "", "ClickHouse DSN, e.g. clickhouse://127.0.0.1:9000/airlock (default clickhouse.dsn / AIRLOCK_CLICKHOUSE_DSN, else the one airlock dev --clickhouse-local runs); this command needs one")
}

func (a *auditFlags) addFilters(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.call, "call", "", "only this call id")
	f.StringVar(&a.thread, "thread", "", "only this thread")
	f.StringVar(&a.agent, "agent", "", "only this agent")
	f.StringVar(&a.tool, "tool", "", "only calls to this tool (server__tool or tool)")
	f.StringVar(&a.actor, "actor", "", "only events caused by this actor id (a reviewer, an agent, a service)")
	f.StringVar(&a.typ, "type", "", "only this event type (requested, approved, completed, ...)")
	f.StringVar(&a.decision, "decision", "", "only this decision (allow, deny, ask, vote, approve, reject, request_changes, expire, cancel)")
	f.StringVar(&a.decidedBy, "decided-by", "", "only what this decided: human, rule, grant, timeout, or one of them exactly (human:alice, rule:ask-writes, grant:grant_…)")
	f.StringVar(&a.grant, "grant", "", "only events about this standing grant (created, used, revoked, expired, and the calls it allowed)")
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
		Type: a.typ, Decision: a.decision, DecidedBy: a.decidedBy, Grant: a.grant, Since: since, Until: until, AfterSeq: a.after, Limit: a.limit}, nil
}

// openAudit opens the ClickHouse store, or the events stream when no DSN
// is configured. close releases whatever was opened.
func (a *auditFlags) open(ctx context.Context, g *globals) (rd store.Reader, closeFn func(), err error) {
	cfg, dsn, from, err := a.config(g)
	if err != nil {
		return nil, nil, err
	}
	if dsn != "" {
		st, err := openStore(ctx, dsn, from)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	nc, js, err := g.connect(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("no ClickHouse configured, so the audit trail is read from the events stream, but connecting to NATS failed: %w (if airlock is not running, start it; or pass --clickhouse DSN)", err)
	}
	fmt.Fprintln(os.Stderr, "(no ClickHouse configured: reading the audit trail from the events stream)")
	// The key only adds the hashes the sink would store: reading goes on without it.
	key, err := auditKey(cfg)
	if err != nil && !errors.Is(err, audit.ErrNoKey) {
		fmt.Fprintf(os.Stderr, "(rows shown without hashes: %v)\n", err)
	}
	return store.NewStream(js, cfg.Stream.Name, key), func() { nc.Close() }, nil
}

// auditKey is the configured audit key, or else the one `airlock dev` keeps
// in its data directory, so the CLI verifies a dev trail without setup.
func auditKey(cfg config.Config) (*record.Key, error) {
	if cfg.Audit.Key == "" && cfg.Audit.KeyFile == "" {
		if p := filepath.Join(cfg.Dev.DataDir, "audit.key"); fileExists(p) {
			cfg.Audit.KeyFile = p
		}
	}
	return audit.LoadKey(cfg.Audit)
}

// config loads the configuration and the DSN to use: --clickhouse wins,
// then clickhouse.reader_dsn or else clickhouse.dsn (clickhouse.dsn for a
// command that writes), then the one `airlock dev --clickhouse-local` keeps
// in its data directory, with its auditor's credentials or, for a command
// that writes, its writer's (from names that file when it was used).
func (a *auditFlags) config(g *globals) (cfg config.Config, dsn, from string, err error) {
	cfg, err = g.load()
	switch {
	case a.dsn != "":
		return cfg, a.dsn, "", err
	case a.write && cfg.ClickHouse.DSN != "" || err != nil:
		return cfg, cfg.ClickHouse.DSN, "", err
	case cfg.ClickHouse.Reader() != "":
		return cfg, cfg.ClickHouse.Reader(), "", nil
	}
	base, rerr := runningDevFile(natsauth.Dev{DataDir: cfg.Dev.DataDir}, localDSNFile(cfg.Dev.DataDir), ", or pass --clickhouse DSN")
	switch {
	case errors.Is(rerr, fs.ErrNotExist):
		return cfg, "", "", nil
	case rerr != nil:
		return cfg, "", "", rerr
	}
	user := audit.LocalAuditor
	if a.write {
		user = audit.LocalWriter
	}
	dsn, err = audit.LocalDSN(cfg.Dev.DataDir, base, user)
	return cfg, dsn, localDSNFile(cfg.Dev.DataDir), err
}

// writer opens the ClickHouse store itself, for the commands that need it
// (verify, drop-before): the stream holds no stored rows to check or drop.
// what says what the command does with them and without what it means to
// be without them, for the error without one.
func (a *auditFlags) writer(ctx context.Context, g *globals, what, without string) (*store.ClickHouse, config.Config, error) {
	cfg, dsn, from, err := a.config(g)
	if err != nil {
		return nil, cfg, err
	}
	if dsn == "" {
		return nil, cfg, fmt.Errorf("%s, and no ClickHouse is configured: start `airlock dev --clickhouse-local` (this command then finds it by itself) "+
			"or pass --clickhouse DSN (or set clickhouse.dsn / AIRLOCK_CLICKHOUSE_DSN). Without ClickHouse the events stream is the only trail, "+
			"read by `airlock audit query`, `export` and `stats`, %s", what, without)
	}
	st, err := openStore(ctx, dsn, from)
	return st, cfg, err
}

// openStore opens the ClickHouse at dsn; from names the file the DSN came
// from when `airlock dev --clickhouse-local` wrote it.
func openStore(ctx context.Context, dsn, from string) (*store.ClickHouse, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil && from != "" {
		return nil, fmt.Errorf("the local ClickHouse that %s names does not answer: %w (is `airlock dev --clickhouse-local` running?)", from, err)
	}
	return st, err
}

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Query, verify, export and analyse the audit trail",
		Long: `The audit trail is every event, hash-chained in stream order, in ClickHouse
(clickhouse.dsn, AIRLOCK_CLICKHOUSE_DSN or --clickhouse). Without ClickHouse the
same rows are computed from the events stream.`,
	}
	cmd.AddCommand(newAuditQueryCmd(g), newAuditVerifyCmd(g), newAuditExportCmd(g), newAuditStatsCmd(g), newAuditKeygenCmd(), newAuditDropBeforeCmd(g))
	return cmd
}

func newAuditQueryCmd(g *globals) *cobra.Command {
	var a auditFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "query [filters]",
		Short: "List audit events matching filters, oldest first, a page at a time (a table, or JSON lines with --json)",
		Long: `Lists the audit events matching the filters in the trail's order (oldest
first, as the console's Audit page does), at most --limit of them. When more
match, it says how many and the --after SEQ that shows the next page (on
stderr with --json). --since narrows to recent events; --limit 0 lists all.`,
		Args: cobra.NoArgs,
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
			seen := &lastSeq{Reader: rd}
			var n int
			if asJSON {
				n, err = store.Export(cmd.Context(), seen, os.Stdout, store.FormatJSONL, f)
			} else {
				n, err = printRows(cmd.Context(), seen, f, os.Stdout)
			}
			if err != nil {
				return err
			}
			if f.Limit == 0 || n < f.Limit {
				return nil
			}
			more, err := countAfter(cmd.Context(), rd, f, seen.last)
			if err != nil {
				return fmt.Errorf("count the events after seq %d: %w", seen.last, err)
			}
			if more > 0 {
				out := io.Writer(os.Stdout)
				if asJSON {
					out = os.Stderr
				}
				fmt.Fprintf(out, "%d more event(s) match: add --after %d for the next %d (or --limit 0 for all)\n", more, seen.last, f.Limit)
			}
			return nil
		},
	}
	a.addDSN(cmd)
	a.addFilters(cmd)
	cmd.Flags().IntVar(&a.limit, "limit", 100, "at most this many rows, oldest first (0: all)")
	cmd.Flags().Uint64Var(&a.after, "after", 0, "only events after this sequence number (SEQ): the next page")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	g.dataFlag(cmd)
	return cmd
}

// lastSeq is a store.Reader that notes the sequence of the last row it
// passed on: where the next page starts.
type lastSeq struct {
	store.Reader
	last uint64
}

// Each implements store.Reader.
func (l *lastSeq) Each(ctx context.Context, f store.Filter, fn func(store.Row) error) error {
	return l.Reader.Each(ctx, f, func(r store.Row) error {
		l.last = r.Seq
		return fn(r)
	})
}

// countAfter counts the rows matching f (whatever its limit) after seq:
// ClickHouse counts them itself; the stream reader reads them.
func countAfter(ctx context.Context, rd store.Reader, f store.Filter, seq uint64) (uint64, error) {
	f.Limit, f.AfterSeq = 0, seq
	if c, ok := rd.(interface {
		Count(context.Context, store.Filter) (uint64, error)
	}); ok {
		return c.Count(ctx, f)
	}
	var n uint64
	err := rd.Each(ctx, f, func(store.Row) error { n++; return nil })
	return n, err
}

// printRows prints the rows matching f as a table and how many there were;
// it returns that number.
func printRows(ctx context.Context, rd store.Reader, f store.Filter, out io.Writer) (int, error) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tTYPE\tAGENT\tCALL\tREV\tTOOL\tACTOR\tDECIDED BY\tDECISION\tREASON")
	n := 0
	err := rd.Each(ctx, f, func(r store.Row) error {
		n++
		actor := r.ActorID
		if r.ActorType != "" && actor != "" {
			actor = r.ActorType + ":" + actor
		}
		t := escape.Terminal // every cell an agent or a person chose, on one line
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.UTC().Format("2006-01-02 15:04:05.000"), t(r.Type),
			t(r.Agent), t(r.Call), r.Revision, t(record.ToolKey(r.Server, r.Tool)), t(actor), t(r.DecidedBy), t(r.Decision), auditOneLine(r.Reason, 60))
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := tw.Flush(); err != nil {
		return n, err
	}
	fmt.Fprintf(out, "%d event(s) from %s\n", n, rd.Source())
	return n, nil
}

func auditOneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = calls.Cut(s, n-1) + "…"
	}
	return escape.Terminal(s)
}

func newAuditVerifyCmd(g *globals) *cobra.Command {
	var a auditFlags
	var asJSON, noStream bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every stored row with the audit key and against the events stream: prints OK, or each altered, forged, missing, extra or planted row (exit 1)",
		Long: `Reads every row of the ClickHouse audit trail in sequence order and checks
its keyed hash (audit.key_file / AIRLOCK_AUDIT_KEY: the key the audit service
seals rows with; ClickHouse never sees it) and its link to the row before.
For the range the events stream still retains, it also compares each row with
the event it was built from: rows missing, extra, altered or beyond the
stream's last event are each named. Exit status 1 when anything is wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, cfg, err := a.writer(ctx, g, "verify checks the rows stored in ClickHouse (their keyed chain, and each against the event it was built from)",
				"and there is no stored copy to check")
			if err != nil {
				return err
			}
			defer st.Close()
			key, err := auditKey(cfg)
			if err != nil {
				return fmt.Errorf("verify needs the audit key the audit service uses: %w", err)
			}
			opt := store.VerifyOptions{Key: key, Stream: cfg.Stream.Name}
			if !noStream {
				nc, js, err := g.connect(ctx, cfg)
				if err != nil {
					return fmt.Errorf("verify compares ClickHouse with the events stream, but connecting to NATS failed: %w (if airlock is not running, start it; or pass --no-stream to check the chain alone)", err)
				}
				defer nc.Close()
				opt.JS = js
			}
			rep, err := st.Verify(ctx, opt)
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(rep)
				fmt.Println(string(b))
			} else {
				printReport(os.Stdout, rep, key)
			}
			if !rep.OK {
				return fmt.Errorf("audit trail verification found %d problem(s): investigate who writes the audit store", rep.ProblemCount)
			}
			return nil
		},
	}
	a.addStoreDSN(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "check the keyed chain only, without comparing with the events stream")
	g.dataFlag(cmd)
	return cmd
}

func printReport(out io.Writer, rep store.Report, key *record.Key) {
	stream := "not compared with the stream"
	if rep.StreamChecked {
		stream = fmt.Sprintf("compared with the stream's seq %d-%d", rep.StreamFirst, rep.StreamLast)
		if rep.Pending > 0 {
			stream += fmt.Sprintf(", %d event(s) not written yet", rep.Pending)
		}
	}
	start := "from its genesis"
	if rep.PrunedBefore > 0 {
		start = fmt.Sprintf("from seq %d (earlier months dropped, as an audit_pruned row records)", rep.PrunedBefore)
	}
	if rep.OK {
		fmt.Fprintf(out, "OK: %d rows verified with key %s (seq %d-%d, chain %s), %s; head %s\n", rep.Count, key.ID(), rep.FirstSeq, rep.LastSeq, start, stream, rep.Head)
		return
	}
	fmt.Fprintf(out, "NOT OK: %d problem(s) in %d rows (key %s, %s):\n", rep.ProblemCount, rep.Count, key.ID(), stream)
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "  %-8s seq %d: %s\n", p.Kind, p.Seq, escape.Terminal(p.Detail))
	}
	if rep.ProblemCount > uint64(len(rep.Problems)) {
		fmt.Fprintf(out, "  ... and %d more (--json lists the first %d)\n", rep.ProblemCount-uint64(len(rep.Problems)), len(rep.Problems))
	}
}

func newAuditKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Write a new random audit key (mode 0600) for audit.key_file",
		Long: `The audit service seals every row with this key (HMAC-SHA256) and
` + "`airlock audit verify`" + ` checks rows with it. Give it to the audit service and to
whoever verifies, never to ClickHouse. An existing file is never overwritten:
rows sealed with a lost key can no longer be verified.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErr(cmd, "--out is required: the file to write the key to")
			}
			if err := audit.WriteKeyFile(out); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote a new audit key to %s; set audit.key_file: %s\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write (created with mode 0600)")
	return cmd
}

func newAuditDropBeforeCmd(g *globals) *cobra.Command {
	a := auditFlags{write: true}
	var yes bool
	var by string
	cmd := &cobra.Command{
		Use:   "drop-before YYYY-MM",
		Short: "Drop whole months of the ClickHouse audit trail before a month, recorded as an audit_pruned event",
		Long: `Drops the ClickHouse partitions (months) of the events table stored before
the given month. It first publishes an audit_pruned event naming the months,
the rows and the first kept row with its link, so the trail says what is gone
and ` + "`airlock audit verify`" + ` accepts the first kept row as the chain's start.
Without --yes it only prints the plan. The events stream keeps its own
retention (stream.max_age).`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			before, err := time.Parse("2006-01", args[0])
			if err != nil {
				return usageErr(cmd, "month %q: write it as YYYY-MM, e.g. 2026-01", args[0])
			}
			st, cfg, err := a.writer(ctx, g, "drop-before drops months of the trail stored in ClickHouse",
				"and there is nothing stored to drop (the stream keeps its own retention, stream.max_age)")
			if err != nil {
				return err
			}
			defer st.Close()
			plan, err := st.PlanDrop(ctx, before)
			if err != nil {
				return err
			}
			if len(plan.Partitions) == 0 {
				fmt.Printf("nothing stored before %s: nothing to drop\n", before.Format("2006-01"))
				return nil
			}
			fmt.Printf("drop months %s: %d rows (seq up to %d); the chain continues at seq %d\n", strings.Join(plan.Partitions, ", "), plan.Rows, plan.LastDrop, plan.FirstKept)
			if !yes {
				fmt.Println("(a plan only: add --yes to drop them)")
				return nil
			}
			if by, err = operatorName(by); err != nil {
				return usageErr(cmd, "%v (nothing was dropped)", err)
			}
			nc, js, err := g.connect(ctx, cfg)
			if err != nil {
				return fmt.Errorf("the drop is recorded as an event first, but connecting to NATS failed: %w (then run it again; nothing was dropped)", err)
			}
			defer nc.Close()
			ev := &airlockv1.Event{
				EventId: callref.System{Kind: callref.SystemRetention, ID: fmt.Sprintf("%s-%d", before.Format("200601"), plan.FirstKept)}.EventID(subject.AuditPruned),
				AgentId: subject.SystemAgent, CallId: subject.AuditCall,
				Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: by, Channel: "cli"},
				Body: &airlockv1.Event_AuditPruned{AuditPruned: &airlockv1.AuditPruned{Partitions: plan.Partitions, Rows: plan.Rows,
					FirstKeptSeq: plan.FirstKept, AnchorHash: plan.Anchor, LastDroppedSeq: plan.LastDrop, Before: before.Format("2006-01")}},
			}
			if _, err := bus.NewPublisher(js, "airlock/cli").Publish(ctx, ev, ""); err != nil {
				return fmt.Errorf("record the drop as an audit_pruned event: %w (nothing was dropped)", err)
			}
			if err := st.Drop(ctx, plan); err != nil {
				return err
			}
			fmt.Printf("dropped %d month(s); recorded as audit_pruned\n", len(plan.Partitions))
			return nil
		},
	}
	a.addStoreDSN(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "drop (without it, only print the plan)")
	cmd.Flags().StringVar(&by, "by", "", "operator recorded as the actor (default $USER, else the account this runs as)")
	g.dataFlag(cmd)
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
	g.dataFlag(cmd)
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
	g.dataFlag(cmd)
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", escape.Terminal(t.Tool), t.Allowed, t.Denied, t.Asked, t.Approved, t.Rejected, t.ChangesRequested, t.Expired, rate)
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d (%.0f%%)\t%s\t%s\n", escape.Terminal(r.ID), r.Decisions, r.Approvals, r.FastApprovals, 100*r.FastShare, secs(r.MedianSeconds), flag)
	}
	tw.Flush()
	fmt.Fprintln(out, "\nmost asked about:")
	for i, t := range a.MostAsked {
		fmt.Fprintf(out, "  %d. %s (%d)\n", i+1, escape.Terminal(t.Tool), t.Asked)
	}
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
