package config

// ClickHouse is where the audit trail is stored.
type ClickHouse struct {
	// DSN such as clickhouse://127.0.0.1:9000/airlock (user and password as
	// clickhouse://user:pass@host:9000/airlock); empty means no ClickHouse:
	// the audit trail is then read from the events stream, and the sink
	// back-fills from the stream once a DSN is configured.
	DSN string `yaml:"dsn"`
	// ReaderDSN, when set, is how the readers of the trail (the console's
	// audit pages, `airlock audit` but drop-before) log in: a read-only
	// user's DSN, so they cannot change what they show. Empty is DSN.
	ReaderDSN string `yaml:"reader_dsn"`
	// StartLocal lets `airlock dev` start a private clickhouse-server under
	// its data dir (when one is installed and DSN is empty).
	StartLocal bool `yaml:"start_local"`
}

func defaultClickHouse() ClickHouse { return ClickHouse{} }

// Reader is the DSN the readers of the trail use: ReaderDSN, else DSN.
func (c ClickHouse) Reader() string {
	if c.ReaderDSN != "" {
		return c.ReaderDSN
	}
	return c.DSN
}
