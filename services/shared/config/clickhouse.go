package config

// ClickHouse is where the audit trail is stored.
type ClickHouse struct {
	// DSN such as clickhouse://127.0.0.1:9000/airlock; empty means no ClickHouse
	// (the audit trail is then read from the stream).
	DSN string `yaml:"dsn"`
}

func defaultClickHouse() ClickHouse { return ClickHouse{} }
