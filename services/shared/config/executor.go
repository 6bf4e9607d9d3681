package config

import (
	"path/filepath"
	"time"
)

// MaxPreviewBytesLimit is the largest executor.max_preview_bytes: a preview
// is stored in its call's pending record beside the arguments, and the
// record must fit one bus message (nats-server's max_payload, 1 MiB by
// default), so a quarter of it leaves room for the rest.
const MaxPreviewBytesLimit = 256 << 10

// Executor configures the executor and its tool registry.
type Executor struct {
	// ToolsFile is the tool registry (tools.yaml); empty means the built-in demo tools only.
	ToolsFile string `yaml:"tools_file"`
	// Sandbox is the directory the demo file tools are confined to; empty means <data dir>/sandbox.
	Sandbox string `yaml:"sandbox"`
	// DefaultTimeout per tool call, for tools whose registry entry sets none.
	DefaultTimeout time.Duration `yaml:"default_timeout"`
	// MaxResultBytes: larger results are truncated with a marker.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// Workers running calls concurrently in this process.
	Workers int `yaml:"workers"`
	// AckWait is how long the executor's consumer waits for a message to be
	// acknowledged before redelivering it. While a tool runs the executor keeps
	// extending it and heartbeats its claim every AckWait/4, so AckWait bounds
	// how quickly another replica takes over a call whose executor died
	// (about 1.5 × AckWait). Shorter means faster recovery and more keep-alive traffic.
	AckWait time.Duration `yaml:"ack_wait"`
	// UpstreamTimeout bounds every operation on an MCP server other than a
	// tool call (which its tool timeout bounds): starting it with its
	// initialize handshake and tools/list, a liveness ping, closing it. A
	// server that exceeds it fails its calls and is started again.
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
	// PreviewTimeout bounds computing one call's preview (a diff, a dry-run
	// tool, a preview endpoint), both when a call comes to wait for a
	// person and when the executor checks its precondition before running it.
	PreviewTimeout time.Duration `yaml:"preview_timeout"`
	// MaxPreviewBytes bounds a preview's text: a longer one is cut and
	// marked. At most MaxPreviewBytesLimit.
	MaxPreviewBytes int `yaml:"max_preview_bytes"`
}

// DemoServer is the name of the executor's built-in demo server, whose file
// tools work inside SandboxDir.
const DemoServer = "demo"

// SandboxDir is the directory the demo file tools are confined to.
func (c Config) SandboxDir() string {
	if c.Executor.Sandbox != "" {
		return c.Executor.Sandbox
	}
	return filepath.Join(c.Dev.DataDir, "sandbox")
}

func defaultExecutor() Executor {
	return Executor{DefaultTimeout: 30 * time.Second, MaxResultBytes: 64 << 10, Workers: 32, AckWait: 10 * time.Second, UpstreamTimeout: 10 * time.Second,
		PreviewTimeout: 3 * time.Second, MaxPreviewBytes: 32 << 10}
}
