package store

import (
	"strings"
	"testing"
)

func TestMigrationsTakeTheirClusterForm(t *testing.T) {
	tests := []struct {
		name, sql, want, err string
	}{
		{"a_replacing_table_becomes_replicated_on_every_replica",
			"CREATE TABLE IF NOT EXISTS events (\n    seq UInt64\n) ENGINE = ReplacingMergeTree()\nORDER BY seq",
			"CREATE TABLE IF NOT EXISTS airlock.events ON CLUSTER prod (\n    seq UInt64\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/airlock.events', '{replica}')\nORDER BY seq", ""},
		{"a_version_column_is_kept",
			"CREATE TABLE IF NOT EXISTS t (v UInt32) ENGINE = ReplacingMergeTree(v) ORDER BY v",
			"CREATE TABLE IF NOT EXISTS airlock.t ON CLUSTER prod (v UInt32) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/airlock.t', '{replica}', v) ORDER BY v", ""},
		{"an_alter_runs_on_every_replica",
			"ALTER TABLE events ADD COLUMN x String AFTER y",
			"ALTER TABLE airlock.events ON CLUSTER prod ADD COLUMN x String AFTER y", ""},
		{"a_table_of_another_engine_is_refused", "CREATE TABLE IF NOT EXISTS t (v UInt32) ENGINE = MergeTree() ORDER BY v", "", "only ReplacingMergeTree"},
		{"another_statement_is_refused", "DROP TABLE events", "", "has no cluster form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clustered(tt.sql, "airlock", "prod")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("clustered(%q) = %q, %v; want an error saying %q", tt.sql, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("clustered(%q)\n got %q, %v\nwant %q", tt.sql, got, err, tt.want)
			}
		})
	}
}

func TestEveryShippedMigrationHasAClusterForm(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := clustered(m.sql, "airlock", "prod"); err != nil {
			t.Errorf("migration %03d_%s: %v", m.version, m.name, err)
		}
	}
}

func TestTheClusterParameterIsTheStoresNotTheDrivers(t *testing.T) {
	tests := []struct {
		name, dsn, rest, cluster, err string
	}{
		{"a_single_server", "clickhouse://h:9000/airlock", "clickhouse://h:9000/airlock", "", ""},
		{"replicas_and_a_cluster", "clickhouse://a:9000,b:9000/airlock?dial_timeout=2s&cluster=prod", "clickhouse://a:9000,b:9000/airlock?dial_timeout=2s", "prod", ""},
		{"the_cluster_alone", "clickhouse://a:9000/airlock?cluster=prod", "clickhouse://a:9000/airlock", "prod", ""},
		{"a_cluster_name_that_is_not_a_name", "clickhouse://a:9000/airlock?cluster=x%20y", "", "", "letters, digits and _"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rest, cluster, err := cutCluster(tt.dsn)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("cutCluster(%q) error %v, want one saying %q", tt.dsn, err, tt.err)
				}
				return
			}
			if err != nil || rest != tt.rest || cluster != tt.cluster {
				t.Fatalf("cutCluster(%q) = %q, %q, %v; want %q, %q", tt.dsn, rest, cluster, err, tt.rest, tt.cluster)
			}
		})
	}
	if _, _, err := parseDSN("clickhouse://a:9000/bad-db?cluster=prod"); err == nil || !strings.Contains(err.Error(), "name the database") {
		t.Fatalf("a database name unfit for a ZooKeeper path was accepted: %v", err)
	}
	opts, _, err := parseDSN("clickhouse://a:9000,b:9000/airlock?cluster=prod")
	if err != nil || len(opts.Addr) != 2 || opts.Settings["cluster"] != nil {
		t.Fatalf("parseDSN of two replicas: %+v, %v; want both addresses and no cluster setting", opts, err)
	}
}
