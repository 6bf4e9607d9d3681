// Package store reads and writes the audit trail. ClickHouse is the store
// (Open / OpenWriter); Stream reads the same rows straight from the events
// stream when no ClickHouse is configured. Both implement Reader, which is
// what the CLI and the console use: Query, Each, Analytics, Verify, and
// Export on top of them.
package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Row, Filter and the analytics types are the record package's; they are
// repeated here so a reader needs one import.
type (
	Row              = record.Row
	Filter           = record.Filter
	Analytics        = record.Analytics
	AnalyticsOptions = record.AnalyticsOptions
	ToolStats        = record.ToolStats
	Reviewer         = record.Reviewer
	Problem          = record.Problem
	Report           = record.Report
)

// Reader is the read side of the audit trail; *ClickHouse and *Stream implement it.
type Reader interface {
	// Query returns rows matching f in stream order (f.Limit caps them).
	Query(ctx context.Context, f Filter) ([]Row, error)
	// Each calls fn for every row matching f, in stream order, without
	// holding them all in memory; an error from fn stops it and is returned.
	Each(ctx context.Context, f Filter, fn func(Row) error) error
	// Analytics computes approval rates, time to decide, rubber-stampers and most-asked tools.
	Analytics(ctx context.Context, opt AnalyticsOptions) (Analytics, error)
	// Source names where rows come from ("clickhouse" or "stream").
	Source() string
	Close() error
}

// ClickHouse is the audit store. Every read uses FINAL, so a row written
// twice is returned once.
type ClickHouse struct {
	conn driver.Conn
	db   string
	// cluster names the remote_servers cluster of a replicated ClickHouse
	// (the DSN's cluster parameter): migrations then run ON CLUSTER and
	// create Replicated tables. Empty: a single server.
	cluster string
}

// columns in insert and select order.
var columns = []string{"seq", "event_id", "ts", "ts_ms", "type", "agent_id", "thread_id", "call_id", "revision",
	"server", "tool", "actor_type", "actor_id", "actor_channel", "decision", "reason", "risk", "rule_id",
	"policy_revision", "decision_id", "args_digest", "payload", "latency_ms", "decided_by", "grant_id", "prev_hash", "hash"}

// Open connects to the ClickHouse at dsn (clickhouse://user:pass@host:9000/db)
// for reading. It neither creates nor migrates anything, so the read-only
// auditor user can use it.
//
// A replicated ClickHouse is named by every replica's address and the
// cluster: clickhouse://h1:9000,h2:9000/db?cluster=NAME. Connections open
// to the first replica that answers, in the order given, so when one dies
// the next query or insert goes to the next (see OpenWriter).
func Open(ctx context.Context, dsn string) (*ClickHouse, error) {
	opts, cluster, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return connect(ctx, opts, cluster, dsn)
}

// OpenWriter connects for the sink: it creates the database if missing
// and applies the migrations. With a cluster in the DSN it creates them on
// every replica (ON CLUSTER; every replica must be up for that, the first
// time) as Replicated tables, so an insert committed on one replica reaches
// the others, and the sink fails over to the next replica by retrying.
func OpenWriter(ctx context.Context, dsn string) (*ClickHouse, error) {
	opts, cluster, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db := opts.Auth.Database
	if db != "" && db != "default" {
		admin := *opts
		admin.Auth.Database = "default"
		c, err := connect(ctx, &admin, cluster, dsn)
		if err != nil {
			return nil, err
		}
		err = c.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(db)+c.onCluster())
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("create database %s: %w", db, err)
		}
	}
	if cluster != "" {
		// One connection: the sink's check that a replica holds the head
		// (Holds) and its insert then go to the same replica.
		opts.MaxOpenConns, opts.MaxIdleConns = 1, 1
	}
	c, err := connect(ctx, opts, cluster, dsn)
	if err != nil {
		return nil, err
	}
	if err := c.Migrate(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// parseDSN parses dsn into the driver's options and the cluster it names
// (its own parameter, which the driver would pass to the server as a
// setting). Replicas listed in the host part are tried in order (the
// driver's default, connection_open_strategy=in_order), so readers see the
// replica the sink writes to while it is up.
func parseDSN(dsn string) (*clickhouse.Options, string, error) {
	if dsn == "" {
		return nil, "", errors.New("no ClickHouse DSN: set clickhouse.dsn, AIRLOCK_CLICKHOUSE_DSN or --clickhouse (e.g. clickhouse://127.0.0.1:9000/airlock)")
	}
	rest, cluster, err := cutCluster(dsn)
	if err != nil {
		return nil, "", err
	}
	opts, err := clickhouse.ParseDSN(rest)
	if err != nil {
		return nil, "", fmt.Errorf("ClickHouse DSN %q: %w (expected e.g. clickhouse://127.0.0.1:9000/airlock, or clickhouse://h1:9000,h2:9000/airlock?cluster=NAME for replicas)", redactDSN(dsn), err)
	}
	if opts.Auth.Database == "" {
		opts.Auth.Database = "default"
	}
	if opts.DialTimeout == 0 || opts.DialTimeout > 5*time.Second {
		opts.DialTimeout = 5 * time.Second
	}
	// Old servers (18.16) make the driver warn on every connection; the
	// features used here work there, so keep its logging quiet.
	opts.Debug = false
	if cluster != "" && !ident.MatchString(opts.Auth.Database) {
		return nil, "", fmt.Errorf("ClickHouse DSN %q: with a cluster, name the database with letters, digits and _ only (it is part of each table's ZooKeeper path)", redactDSN(dsn))
	}
	return opts, cluster, nil
}

// ident is a name used unquoted: a cluster, or a database in a ZooKeeper path.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// cutCluster removes the cluster parameter from dsn's query and returns it.
func cutCluster(dsn string) (rest, cluster string, err error) {
	base, query, ok := strings.Cut(dsn, "?")
	if !ok {
		return dsn, "", nil
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "cluster" {
			keep = append(keep, kv)
			continue
		}
		if !ident.MatchString(v) {
			return "", "", fmt.Errorf("ClickHouse DSN %q: cluster %q: name the remote_servers cluster with letters, digits and _ only", redactDSN(dsn), v)
		}
		cluster = v
	}
	if len(keep) == 0 {
		return base, cluster, nil
	}
	return base + "?" + strings.Join(keep, "&"), cluster, nil
}

// onCluster is the ON CLUSTER clause of a replicated store's DDL ("" for one server).
func (c *ClickHouse) onCluster() string {
	if c.cluster == "" {
		return ""
	}
	return " ON CLUSTER " + c.cluster
}

// Cluster is the cluster the DSN named, "" for a single server.
func (c *ClickHouse) Cluster() string { return c.cluster }

func connect(ctx context.Context, opts *clickhouse.Options, cluster, dsn string) (*ClickHouse, error) {
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to ClickHouse %s: %w", redactDSN(dsn), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ClickHouse %s is not reachable: %w (is clickhouse-server running? check the DSN)", redactDSN(dsn), err)
	}
	return &ClickHouse{conn: conn, db: opts.Auth.Database, cluster: cluster}, nil
}

// redactDSN hides a password in a DSN shown in an error.
func redactDSN(dsn string) string {
	if at := strings.Index(dsn, "@"); at > 0 {
		if scheme := strings.Index(dsn, "://"); scheme >= 0 && scheme < at {
			user := dsn[scheme+3 : at]
			if u, _, ok := strings.Cut(user, ":"); ok {
				return dsn[:scheme+3] + u + ":***" + dsn[at:]
			}
		}
	}
	return dsn
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Second) }

// Source implements Reader.
func (c *ClickHouse) Source() string { return "clickhouse" }

// Close implements Reader.
func (c *ClickHouse) Close() error { return c.conn.Close() }

// Conn exposes the driver connection (tests, benchmarks, ad-hoc SQL).
func (c *ClickHouse) Conn() driver.Conn { return c.conn }

// Head returns the sequence and hash of the row with the highest sequence,
// whatever wrote it, or (0, GenesisHash) for an empty table. The sink does
// not extend the chain from it (see TrustedHead); tools and tests use it to
// see how far ClickHouse has got.
func (c *ClickHouse) Head(ctx context.Context) (uint64, string, error) {
	rows, err := c.conn.Query(ctx, "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
	if err != nil {
		return 0, "", fmt.Errorf("read the audit chain head: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, record.GenesisHash, rows.Err()
	}
	var seq uint64
	var hash string
	if err := rows.Scan(&seq, &hash); err != nil {
		return 0, "", fmt.Errorf("read the audit chain head: %w", err)
	}
	return seq, hash, nil
}

// Holds reports whether the replica this connection reaches holds the row
// seq with hash (true for seq 0, the chain's start).
func (c *ClickHouse) Holds(ctx context.Context, seq uint64, hash string) (bool, error) {
	if seq == 0 {
		return true, nil
	}
	var n uint64
	if err := c.conn.QueryRow(ctx, "SELECT count() FROM events WHERE seq = ? AND hash = ?", seq, hash).Scan(&n); err != nil {
		return false, fmt.Errorf("check the audit chain head %d: %w", seq, err)
	}
	return n > 0, nil
}

// Untrusted describes a row TrustedHead passed over.
type Untrusted struct {
	Seq     uint64
	EventID string
	Why     string
}

// TrustedHead returns the row the chain continues from: the authentic row
// (its hash is the key's) with the highest sequence not beyond limit, the
// last sequence the stream has issued. Rows beyond limit, or whose hash
// the key does not produce, are skipped and returned in skipped, so a row
// planted by someone who can write ClickHouse never moves the head. An
// empty (or wholly untrusted) table gives (0, GenesisHash).
func (c *ClickHouse) TrustedHead(ctx context.Context, key *record.Key, limit uint64) (seq uint64, hash string, skipped []Untrusted, err error) {
	sealer := key.Sealer()
	var beyond uint64
	if err := c.conn.QueryRow(ctx, "SELECT count() FROM events WHERE seq > ?", limit).Scan(&beyond); err != nil {
		return 0, "", nil, fmt.Errorf("read the audit chain head: %w", err)
	}
	if beyond > 0 {
		skipped = append(skipped, Untrusted{Seq: limit + 1, Why: fmt.Sprintf("%d row(s) beyond seq %d, the last event the stream has issued: planted", beyond, limit)})
	}
	const page = 256
	upper := limit
	for {
		var found *Row
		n := 0
		err := c.each(ctx, " WHERE seq <= ? ORDER BY seq DESC LIMIT "+fmt.Sprint(page), []any{upper}, func(r Row) error {
			n++
			upper = r.Seq
			if found != nil {
				return nil
			}
			if sealer.Check(&r) {
				found = &r
				return nil
			}
			skipped = append(skipped, Untrusted{Seq: r.Seq, EventID: r.EventID, Why: "its hash is not the audit key's (altered or forged)"})
			return nil
		})
		if err != nil {
			return 0, "", skipped, fmt.Errorf("read the audit chain head: %w", err)
		}
		if found != nil {
			return found.Seq, found.Hash, skipped, nil
		}
		if n < page || upper == 0 {
			return 0, record.GenesisHash, skipped, nil
		}
		upper-- // the next page starts below the lowest row seen (rows sharing it were all untrusted)
	}
}

// Insert writes rows (already sealed) in one batch insert. It returns only
// after ClickHouse committed them. Inserting rows that are already there
// adds nothing visible: reads use FINAL.
func (c *ClickHouse) Insert(ctx context.Context, rows []Row) error {
	return c.InsertInto(ctx, "events", rows)
}

// insertBlockRows is how many rows an insert sends per block.
const insertBlockRows = 2048

// InsertInto is Insert into another table of the same shape (benchmarks).
func (c *ClickHouse) InsertInto(ctx context.Context, table string, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	if c.cluster != "" {
		// A replicated table drops a block identical to one it registered
		// before, even when only a dead replica holds that block's part: the
		// sink re-writing rows the survivor never fetched would be dropped.
		// Duplicates are the Replacing engine's to remove (reads use FINAL).
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_deduplicate": 0}))
	}
	b, err := c.conn.PrepareBatch(ctx, "INSERT INTO "+quoteIdent(table)+" ("+strings.Join(columns, ", ")+", ingested_at)")
	if err != nil {
		return fmt.Errorf("prepare audit insert: %w", err)
	}
	failed := func(err error) error {
		_ = b.Abort()
		return fmt.Errorf("audit insert of %d rows (seq %d-%d): %w", len(rows), rows[0].Seq, rows[len(rows)-1].Seq, err)
	}
	cols := insertColumnsPool.Get().(*insertColumns)
	defer insertColumnsPool.Put(cols)
	now := nowUTC()
	// Column by column, a block at a time: one conversion per column
	// instead of one per value, and the driver appends each block into the
	// column buffers the previous one used (Flush sends it as a block of
	// the same INSERT) instead of growing them to the whole batch.
	for lo := 0; lo < len(rows); lo += insertBlockRows {
		hi := min(lo+insertBlockRows, len(rows))
		if lo > 0 {
			if err := b.Flush(); err != nil {
				return failed(err)
			}
		}
		for i, v := range cols.fill(rows[lo:hi], now) {
			if err := b.Column(i).Append(v); err != nil {
				return failed(fmt.Errorf("column %s: %w", append(columns, "ingested_at")[i], err))
			}
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("audit insert of %d rows (seq %d-%d): %w", len(rows), rows[0].Seq, rows[len(rows)-1].Seq, err)
	}
	return nil
}

// insertColumns hold a block of rows column by column, in insert order
// (columns, then ingested_at); used again for the next block.
type insertColumns struct {
	seq      []uint64
	ts       []time.Time
	tsMS     []uint16
	revision []uint32
	latency  []*float64
	now      []time.Time
	strs     [22][]string // the string columns, in insert order
}

var insertColumnsPool = sync.Pool{New: func() any { return &insertColumns{} }}

// fill sets c to rows and returns each column's values, in insert order.
func (c *insertColumns) fill(rows []Row, now time.Time) []any {
	c.seq, c.ts, c.tsMS, c.revision, c.latency, c.now = c.seq[:0], c.ts[:0], c.tsMS[:0], c.revision[:0], c.latency[:0], c.now[:0]
	for i := range c.strs {
		c.strs[i] = c.strs[i][:0]
	}
	for i := range rows {
		r := &rows[i]
		t := r.Time.UTC()
		c.seq = append(c.seq, r.Seq)
		c.ts = append(c.ts, t.Truncate(time.Second))
		c.tsMS = append(c.tsMS, uint16(t.Nanosecond()/1e6))
		c.revision = append(c.revision, r.Revision)
		c.latency = append(c.latency, r.LatencyMS)
		c.now = append(c.now, now)
		for j, v := range [len(c.strs)]string{r.EventID, r.Type, r.Agent, r.Thread, r.Call, r.Server, r.Tool,
			r.ActorType, r.ActorID, r.ActorChannel, r.Decision, r.Reason, r.Risk, r.RuleID, r.PolicyRevision,
			r.DecisionID, r.ArgsDigest, r.Payload, r.DecidedBy, r.GrantID, r.PrevHash, r.Hash} {
			c.strs[j] = append(c.strs[j], v)
		}
	}
	s := &c.strs
	return []any{c.seq, s[0], c.ts, c.tsMS, s[1], s[2], s[3], s[4], c.revision,
		s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13],
		s[14], s[15], s[16], s[17], c.latency, s[18], s[19], s[20], s[21], c.now}
}

// where builds the WHERE clause and its bound arguments for f.
func where(f Filter) (string, []any) {
	var conds []string
	var args []any
	eq := func(col, v string) {
		if v != "" {
			conds = append(conds, col+" = ?")
			args = append(args, v)
		}
	}
	eq("call_id", f.Call)
	eq("thread_id", f.Thread)
	eq("agent_id", f.Agent)
	eq("actor_id", f.Actor)
	eq("type", f.Type)
	eq("decision", f.Decision)
	eq("grant_id", f.Grant)
	if f.DecidedBy != "" {
		conds = append(conds, "decision != '' AND (decided_by = ? OR startsWith(decided_by, ?))") // decisions only (record.Filter)
		args = append(args, f.DecidedBy, f.DecidedBy+":")
	}
	if f.Tool != "" {
		// (agent, call): call ids are the agent's own.
		conds = append(conds, "(agent_id, call_id) IN (SELECT agent_id, call_id FROM events WHERE tool != '' AND (tool = ? OR concat(server, '__', tool) = ?))")
		args = append(args, f.Tool, f.Tool)
	}
	if !f.Since.IsZero() {
		conds = append(conds, "ts >= toDateTime(?) AND toUInt64(ts) * 1000 + ts_ms >= ?")
		args = append(args, f.Since.Unix(), uint64(f.Since.UnixMilli()))
	}
	if !f.Until.IsZero() {
		conds = append(conds, "toUInt64(ts) * 1000 + ts_ms < ?")
		args = append(args, uint64(f.Until.UnixMilli()))
	}
	if f.AfterSeq != 0 {
		conds = append(conds, "seq > ?")
		args = append(args, f.AfterSeq)
	}
	if n := len(f.ExcludeAgents); n > 0 {
		conds = append(conds, "agent_id NOT IN ("+strings.TrimSuffix(strings.Repeat("?, ", n), ", ")+")")
		for _, a := range f.ExcludeAgents {
			args = append(args, a)
		}
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Each implements Reader.
func (c *ClickHouse) Each(ctx context.Context, f Filter, fn func(Row) error) error {
	w, args := where(f)
	q := w + " ORDER BY seq"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return c.each(ctx, q, args, fn)
}

// each reads rows with the given WHERE/ORDER/LIMIT tail.
func (c *ClickHouse) each(ctx context.Context, tail string, args []any, fn func(Row) error) error {
	rows, err := c.conn.Query(ctx, "SELECT "+strings.Join(columns, ", ")+" FROM events FINAL"+tail, args...)
	if err != nil {
		return fmt.Errorf("query audit events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r Row
		var ts time.Time
		var ms uint16
		if err := rows.Scan(&r.Seq, &r.EventID, &ts, &ms, &r.Type, &r.Agent, &r.Thread, &r.Call, &r.Revision,
			&r.Server, &r.Tool, &r.ActorType, &r.ActorID, &r.ActorChannel, &r.Decision, &r.Reason, &r.Risk, &r.RuleID,
			&r.PolicyRevision, &r.DecisionID, &r.ArgsDigest, &r.Payload, &r.LatencyMS, &r.DecidedBy, &r.GrantID, &r.PrevHash, &r.Hash); err != nil {
			return fmt.Errorf("read audit row: %w", err)
		}
		r.Time = ts.UTC().Add(time.Duration(ms) * time.Millisecond)
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Query implements Reader.
func (c *ClickHouse) Query(ctx context.Context, f Filter) ([]Row, error) {
	var out []Row
	err := c.Each(ctx, f, func(r Row) error { out = append(out, r); return nil })
	return out, err
}

// Count returns how many distinct rows match f.
func (c *ClickHouse) Count(ctx context.Context, f Filter) (uint64, error) {
	w, args := where(f)
	var n uint64
	if err := c.conn.QueryRow(ctx, "SELECT count() FROM events FINAL"+w, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count audit events: %w", err)
	}
	return n, nil
}

// Analytics implements Reader: ClickHouse narrows the rows to decision
// events, and record.Analyze computes the figures (the same code the
// stream reader uses, so both agree).
func (c *ClickHouse) Analytics(ctx context.Context, opt AnalyticsOptions) (Analytics, error) {
	var rows []Row
	for _, typ := range record.AnalyticsTypes {
		f := Filter{Type: typ}
		if !opt.Since.IsZero() && typ != subject.Approved && typ != subject.Rejected && typ != subject.ChangesRequested && typ != subject.Expired && typ != subject.Canceled {
			f.Since = opt.Since
		}
		if err := c.Each(ctx, f, func(r Row) error { r.Payload = ""; rows = append(rows, r); return nil }); err != nil {
			return Analytics{}, fmt.Errorf("audit analytics: %w", err)
		}
	}
	sortBySeq(rows)
	return record.Analyze(rows, opt), nil
}
