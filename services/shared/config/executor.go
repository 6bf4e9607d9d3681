package config

import "time"

// Executor configures the executor and its tool registry.
type Executor struct {
	// ToolsFile is the tool registry (tools.yaml); empty means the built-in demo tools only.
	ToolsFile string `yaml:"tools_file"`
	// Sandbox is the directory the demo file tools are confined to; empty means <data dir>/sandbox.
	Sandbox string `yaml:"sandbox"`
	// DefaultTimeout per tool call.
	DefaultTimeout time.Duration `yaml:"default_timeout"`
	// MaxResultBytes: larger results are truncated with a marker.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// Workers running calls concurrently in this process.
	Workers int `yaml:"workers"`
}

func defaultExecutor() Executor {
	return Executor{DefaultTimeout: 30 * time.Second, MaxResultBytes: 64 << 10, Workers: 8}
}
