package config

import "time"

// Audit configures the audit sink and the audit analytics.
type Audit struct {
	// BatchSize is the most events written in one insert. ClickHouse wants
	// few, large inserts (each makes a part to merge): 10000 keeps a
	// 100k events/s burst at about 10 inserts/s, with at most three batches
	// (a few tens of MB) in memory.
	BatchSize int `yaml:"batch_size"`
	// FlushInterval bounds how long an event waits for its batch.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// FastApproval: analytics count an approval quicker than this as "fast";
	// reviewers whose decisions are mostly fast approvals are flagged as
	// rubber-stampers.
	FastApproval time.Duration `yaml:"fast_approval"`
	// KeyFile holds the secret the audit chain is keyed with (HMAC-SHA256):
	// 64 hex characters (32 random bytes) on one line, readable only by the
	// audit service and whoever runs `airlock audit verify`. ClickHouse
	// never sees it, so nobody who can only write ClickHouse can forge a
	// row. `airlock dev` generates <data dir>/audit.key (mode 0600).
	KeyFile string `yaml:"key_file"`
	// Key is the same secret given directly (AIRLOCK_AUDIT_KEY); it wins over KeyFile.
	Key string `yaml:"key"`
}

func defaultAudit() Audit {
	return Audit{BatchSize: 10000, FlushInterval: 500 * time.Millisecond, FastApproval: 5 * time.Second}
}
