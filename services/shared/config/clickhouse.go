package config

// ClickHouse is where the audit trail is stored.
type ClickHouse struct {
	// DSN such as clickhouse://127.0.0.1:9000/airlock (user and password as
	// clickhouse://user:pass@host:9000/airlock); empty means no ClickHouse:
	// the audit trail is then read from the events stream, and the sink
	// back-fills from the stream once a DSN is configured.
	DSN string `yaml:"dsn"`
	// StartLocal lets `airlock dev` start a private clickhouse-server under
	// its data dir (when one is installed and DSN is empty).
	StartLocal bool `yaml:"start_local"`
}

func defaultClickHouse() ClickHouse { return ClickHouse{} }
