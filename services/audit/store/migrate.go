package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Migrations holds the DDL, one file per version (NNN_name.sql, one
// statement each). deploy/clickhouse/migrations is a copy for operators.
//
//go:embed migrations/*.sql
var Migrations embed.FS

type migration struct {
	version uint32
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: name it NNN_name.sql", e.Name())
		}
		raw, err := fs.ReadFile(Migrations, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: uint32(v), name: name, sql: stripComments(string(raw))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

func stripComments(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			keep = append(keep, l)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// Migrate creates the database (when missing) and applies every migration
// not yet recorded in schema_migrations, in order. It is idempotent: each
// statement is CREATE ... IF NOT EXISTS (or checks before it alters), and
// a version is recorded only after it applied, so running it again — or
// from several replicas at once — changes nothing.
//
// On a cluster every statement runs ON CLUSTER in its replicated form
// (Replicated); schema_migrations is replicated too, so a sink failing over
// to another replica finds the versions already applied.
func (c *ClickHouse) Migrate(ctx context.Context) error {
	ddl, err := c.ddl("CREATE TABLE IF NOT EXISTS schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = ReplacingMergeTree() ORDER BY version")
	if err != nil {
		return err
	}
	if err := c.conn.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create schema_migrations in %s: %w", c.db, err)
	}
	done := map[uint32]bool{}
	rows, err := c.conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done[v] = true
	}
	rows.Close()
	ms, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		ddl, err := c.ddl(m.sql)
		if err != nil {
			return fmt.Errorf("migration %03d_%s: %w", m.version, m.name, err)
		}
		if err := c.conn.Exec(ctx, ddl); err != nil && !alreadyApplied(m.sql, err) {
			return fmt.Errorf("apply migration %03d_%s: %w", m.version, m.name, err)
		}
		b, err := c.conn.PrepareBatch(ctx, "INSERT INTO schema_migrations (version, name, applied_at)")
		if err != nil {
			return fmt.Errorf("record migration %03d: %w", m.version, err)
		}
		if err := b.Append(m.version, m.name, nowUTC()); err != nil {
			_ = b.Abort()
			return fmt.Errorf("record migration %03d: %w", m.version, err)
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("record migration %03d: %w", m.version, err)
		}
	}
	return nil
}

// alreadyApplied recognises an ALTER TABLE ... ADD COLUMN that failed because
// an earlier run added the column and stopped before recording the version
// (18.16 has no ADD COLUMN IF NOT EXISTS).
func alreadyApplied(sql string, err error) bool {
	return strings.HasPrefix(sql, "ALTER TABLE") && strings.Contains(sql, "ADD COLUMN") && strings.Contains(err.Error(), "already exists")
}

// ddl is a migration statement as this store runs it: unchanged on one
// server, its cluster form on a cluster (see clustered).
func (c *ClickHouse) ddl(sql string) (string, error) {
	if c.cluster == "" {
		return sql, nil
	}
	return clustered(sql, c.db, c.cluster)
}

var (
	createTable = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+) \(`)
	alterTable  = regexp.MustCompile(`^ALTER TABLE (\w+) `)
	replacing   = regexp.MustCompile(`ENGINE = ReplacingMergeTree\(([^)]*)\)`)
)

// clustered rewrites a single-server migration for a replicated cluster:
// the table named in db, ON CLUSTER cluster, and ReplacingMergeTree(v)
// as ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db.table',
// '{replica}', v), the macros each replica's config defines. A statement
// of another form is refused rather than run on one replica only: give it
// a cluster form here.
func clustered(sql, db, cluster string) (string, error) {
	if m := createTable.FindStringSubmatch(sql); m != nil {
		table := m[1]
		engine := replacing.FindStringSubmatch(sql)
		if engine == nil {
			return "", fmt.Errorf("CREATE TABLE %s: only ReplacingMergeTree tables have a replicated form here", table)
		}
		args := "'/clickhouse/tables/{shard}/" + db + "." + table + "', '{replica}'"
		if strings.TrimSpace(engine[1]) != "" {
			args += ", " + engine[1]
		}
		sql = strings.Replace(sql, engine[0], "ENGINE = ReplicatedReplacingMergeTree("+args+")", 1)
		return strings.Replace(sql, m[0], "CREATE TABLE IF NOT EXISTS "+db+"."+table+" ON CLUSTER "+cluster+" (", 1), nil
	}
	if m := alterTable.FindStringSubmatch(sql); m != nil {
		return strings.Replace(sql, m[0], "ALTER TABLE "+db+"."+m[1]+" ON CLUSTER "+cluster+" ", 1), nil
	}
	first, _, _ := strings.Cut(sql, "\n")
	return "", fmt.Errorf("%q has no cluster form: write it as CREATE TABLE IF NOT EXISTS name (...) ENGINE = ReplacingMergeTree(...) or ALTER TABLE name ...", first)
}
