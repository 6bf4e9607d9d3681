package config

import "time"

// Audit configures the audit sink.
type Audit struct {
	// BatchSize is the most events written in one insert.
	BatchSize int `yaml:"batch_size"`
	// FlushInterval bounds how long an event waits for its batch.
	FlushInterval time.Duration `yaml:"flush_interval"`
}

func defaultAudit() Audit { return Audit{BatchSize: 5000, FlushInterval: 500 * time.Millisecond} }
