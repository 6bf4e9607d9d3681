package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// RegistryFile is the tool registry (tools.yaml): which servers exist, how
// to reach them, and per-tool timeouts and idempotency.
//
//	servers:
//	  fs:                       # tools are called as fs__<tool>
//	    mcp:
//	      command: npx          # stdio: a command and its arguments
//	      args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/files"]
//	    timeout: 10s
//	    tools:
//	      read_text_file: {idempotent: true}
//	      write_file: {preview_tool: write_file_dry_run}  # a companion dry-run tool
//	  search:
//	    mcp: {url: "http://127.0.0.1:3001/mcp"}   # streamable HTTP
//	  billing:
//	    webhook:
//	      url: https://billing.internal/airlock   # POST <url>/<tool> unless the tool sets url
//	      secret_env: BILLING_WEBHOOK_SECRET       # HMAC-SHA256 key, from the environment
//	    idempotent: true
//	    tools:
//	      refund: {}
//	      charge: {idempotent: false, timeout: 1m, preview_url: https://billing.internal/airlock/charge/preview}
type RegistryFile struct {
	// BuiltinDemo enables the demo server (demo__echo, demo__read_file,
	// demo__write_file) confined to the sandbox directory; default true.
	BuiltinDemo *bool                  `yaml:"builtin_demo"`
	Servers     map[string]ServerEntry `yaml:"servers"`
}

// ServerEntry configures one server; exactly one of MCP and Webhook is set.
type ServerEntry struct {
	MCP     *MCPConfig     `yaml:"mcp"`
	Webhook *WebhookConfig `yaml:"webhook"`
	// Timeout for each call of this server's tools (default executor.default_timeout).
	Timeout time.Duration `yaml:"timeout"`
	// Trusted marks the server's tool annotations (readOnlyHint,
	// destructiveHint, ...) as believable: the MCP gateway then tells the
	// policy they are trusted. The MCP spec says not to base decisions on
	// annotations from servers you do not trust; default false.
	Trusted bool `yaml:"trusted"`
	// Idempotent declares that every tool of the server may safely run twice
	// with the same idempotency key; a call whose executor died mid-run is then
	// retried instead of ending indeterminate.
	Idempotent bool `yaml:"idempotent"`
	// Tools overrides per tool. For webhooks it is also the list of tools
	// that exist; MCP servers list their own tools.
	Tools map[string]ToolEntry `yaml:"tools"`
}

// ToolEntry overrides a server's settings for one tool.
type ToolEntry struct {
	Timeout    time.Duration `yaml:"timeout"`
	Idempotent *bool         `yaml:"idempotent"`
	// URL of a webhook tool, when not <server url>/<tool>.
	URL string `yaml:"url"`
	// PreviewTool names an MCP server's companion dry-run tool: called with
	// the same arguments, its text says what the tool would do (the call's
	// preview, shown to reviewers).
	PreviewTool string `yaml:"preview_tool"`
	// PreviewURL is a webhook tool's preview endpoint: POSTed (and signed)
	// like the tool, with X-Airlock-Preview: 1, it answers what the tool
	// would do, as text or as {"preview": "...", "precondition": "..."}.
	PreviewURL string `yaml:"preview_url"`
}

// MCPConfig reaches an MCP server over stdio (Command) or streamable HTTP (URL).
type MCPConfig struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	Dir     string            `yaml:"dir"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

// WebhookConfig reaches tools that are HTTP endpoints.
type WebhookConfig struct {
	URL string `yaml:"url"`
	// Secret signs each body (HMAC-SHA256); prefer SecretEnv so the file holds no secret.
	Secret    string            `yaml:"secret"`
	SecretEnv string            `yaml:"secret_env"`
	Headers   map[string]string `yaml:"headers"`
}

// Tool is one resolved registry entry.
type Tool struct {
	// Name is "server__tool".
	Name       string
	Server     string
	Tool       string
	Adapter    Adapter
	Timeout    time.Duration
	Idempotent bool
}

// Registry resolves "server__tool" names to adapters. It is safe for
// concurrent use and owns the adapters: Close closes them all.
type Registry struct {
	servers         map[string]registered
	defaultTimeout  time.Duration
	upstreamTimeout time.Duration
}

type registered struct {
	adapter Adapter
	entry   ServerEntry
}

var serverName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// ParseRegistryFile reads a tools.yaml body strictly: unknown keys are
// errors, so a typo does not silently drop a setting.
func ParseRegistryFile(raw []byte) (RegistryFile, error) {
	var f RegistryFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, err
	}
	for name, s := range f.Servers {
		if !serverName.MatchString(name) || strings.Contains(name, "__") {
			return f, fmt.Errorf("server %q: names are 1-128 characters from A-Z a-z 0-9 _ . : - without \"__\"", name)
		}
		if name == DemoServer && f.demoEnabled() {
			return f, fmt.Errorf("server %q is the built-in demo server: pick another name or set builtin_demo: false", name)
		}
		if (s.MCP == nil) == (s.Webhook == nil) {
			return f, fmt.Errorf("server %q: set exactly one of mcp or webhook", name)
		}
		if s.MCP != nil && (s.MCP.Command == "") == (s.MCP.URL == "") {
			return f, fmt.Errorf("server %q: mcp needs exactly one of command (stdio) or url (streamable HTTP)", name)
		}
		for tool, t := range s.Tools {
			if t.PreviewTool != "" && s.MCP == nil {
				return f, fmt.Errorf("server %q tool %q: preview_tool names a dry-run tool of an MCP server; a webhook sets preview_url", name, tool)
			}
			if t.PreviewURL != "" && s.Webhook == nil {
				return f, fmt.Errorf("server %q tool %q: preview_url is a webhook's preview endpoint; an MCP server sets preview_tool", name, tool)
			}
		}
		if s.Webhook != nil {
			if len(s.Tools) == 0 {
				return f, fmt.Errorf("server %q: a webhook server must list its tools under tools:", name)
			}
			for tool, t := range s.Tools {
				if s.Webhook.URL == "" && t.URL == "" {
					return f, fmt.Errorf("server %q tool %q: set webhook.url or the tool's url", name, tool)
				}
			}
			if s.Webhook.Secret == "" && s.Webhook.SecretEnv == "" {
				return f, fmt.Errorf("server %q: a webhook needs secret_env (or secret) to sign its requests", name)
			}
		}
	}
	return f, nil
}

func (f RegistryFile) demoEnabled() bool { return f.BuiltinDemo == nil || *f.BuiltinDemo }

// RegistryOptions are what NewRegistry needs besides the file.
type RegistryOptions struct {
	// Sandbox confines the demo file tools.
	Sandbox string
	// Config is the executor's configuration as loaded (every default
	// applied): its default_timeout applies to tools whose entry sets none,
	// its upstream_timeout bounds starting, listing, pinging and closing
	// each MCP server.
	Config config.Executor
	// Getenv resolves secret_env (os.Getenv when nil).
	Getenv func(string) string
	// Log receives upstream restarts and failures; nil discards them.
	Log *slog.Logger
	// OpenBackoff is each MCP server's MCPOptions.OpenBackoff (zero: its
	// default).
	OpenBackoff time.Duration
}

// NewRegistry builds the adapters of f. MCP servers are connected lazily,
// on their first call, so a server that is down does not stop the executor.
func NewRegistry(f RegistryFile, o RegistryOptions) (*Registry, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Config.DefaultTimeout <= 0 || o.Config.UpstreamTimeout <= 0 {
		return nil, fmt.Errorf("tool registry: executor.default_timeout (%s) and executor.upstream_timeout (%s) must be positive", o.Config.DefaultTimeout, o.Config.UpstreamTimeout)
	}
	r := &Registry{servers: map[string]registered{}, defaultTimeout: o.Config.DefaultTimeout, upstreamTimeout: o.Config.UpstreamTimeout}
	if f.demoEnabled() {
		demo, err := NewDemo(o.Sandbox)
		if err != nil {
			return nil, err
		}
		r.servers[DemoServer] = registered{adapter: demo, entry: ServerEntry{Tools: map[string]ToolEntry{}}}
	}
	for name, s := range f.Servers {
		var a Adapter
		switch {
		case s.MCP != nil:
			a = NewMCP(name, *s.MCP, MCPOptions{Timeout: o.Config.UpstreamTimeout, Log: o.Log, Conns: o.Config.Workers, OpenBackoff: o.OpenBackoff})
		case s.Webhook != nil:
			secret := s.Webhook.Secret
			if s.Webhook.SecretEnv != "" {
				secret = o.Getenv(s.Webhook.SecretEnv)
				if secret == "" {
					r.Close()
					return nil, fmt.Errorf("server %q: environment variable %s (webhook.secret_env) is empty: set it to the webhook's signing secret", name, s.Webhook.SecretEnv)
				}
			}
			urls, previews := map[string]string{}, map[string]string{}
			for tool, t := range s.Tools {
				if t.PreviewURL != "" {
					previews[tool] = t.PreviewURL
				}
				urls[tool] = t.URL
				if urls[tool] == "" {
					urls[tool] = strings.TrimSuffix(s.Webhook.URL, "/") + "/" + tool
				}
			}
			a = NewWebhook(WebhookOptions{Secret: []byte(secret), URLs: urls, PreviewURLs: previews, Headers: s.Webhook.Headers})
		}
		r.servers[name] = registered{adapter: a, entry: s}
	}
	return r, nil
}

// LoadRegistry reads path (empty: demo tools only) and builds the registry.
func LoadRegistry(path string, o RegistryOptions) (*Registry, error) {
	var f RegistryFile
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read tool registry %s: %w (set executor.tools_file to an existing tools.yaml)", path, err)
		}
		if f, err = ParseRegistryFile(raw); err != nil {
			return nil, fmt.Errorf("tool registry %s: %w", path, err)
		}
	}
	return NewRegistry(f, o)
}

// Lookup resolves a server and tool. ok is false when no such server is
// registered; whether the server has the tool is the adapter's to say
// (Has), since MCP servers list their own tools.
func (r *Registry) Lookup(server, tool string) (Tool, bool) {
	reg, ok := r.servers[server]
	if !ok {
		return Tool{}, false
	}
	t := Tool{Name: server + "__" + tool, Server: server, Tool: tool, Adapter: reg.adapter,
		Timeout: reg.entry.Timeout, Idempotent: reg.entry.Idempotent}
	if over, ok := reg.entry.Tools[tool]; ok {
		if over.Timeout > 0 {
			t.Timeout = over.Timeout
		}
		if over.Idempotent != nil {
			t.Idempotent = *over.Idempotent
		}
	}
	if t.Timeout <= 0 {
		t.Timeout = r.defaultTimeout
	}
	return t, true
}

// Has reports whether server__tool exists, asking the server when it lists
// its own tools. It takes no lock and waits at most for ctx and the
// server's upstream timeout (executor.upstream_timeout): a server that
// cannot be started or does not answer gives an error wrapping an
// *UpstreamError, at once while its back-off lasts.
func (r *Registry) Has(ctx context.Context, server, tool string) (bool, error) {
	reg, ok := r.servers[server]
	if !ok {
		return false, nil
	}
	tools, err := reg.adapter.Tools(ctx)
	if err != nil {
		return false, fmt.Errorf("list the tools of server %s: %w", server, err)
	}
	for _, t := range tools {
		if t == tool {
			return true, nil
		}
	}
	return false, nil
}

// Close closes every adapter, all at once: each is bounded by its own
// deadline, and a slow one does not delay the others.
func (r *Registry) Close() error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for name, reg := range r.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := reg.adapter.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("close %s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
