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
}

func defaultAudit() Audit {
	return Audit{BatchSize: 10000, FlushInterval: 500 * time.Millisecond, FastApproval: 5 * time.Second}
}
