// Package config is airlock's configuration: one YAML file plus environment
// overrides, with a working default for every setting.
//
// Every setting can be overridden by an environment variable named after its
// YAML path: nats.url → AIRLOCK_NATS_URL, clickhouse.dsn → AIRLOCK_CLICKHOUSE_DSN,
// stream.max_age → AIRLOCK_STREAM_MAX_AGE. Lists take comma-separated values.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole configuration. Each service reads its own section.
type Config struct {
	NATS       NATS       `yaml:"nats"`
	Stream     Stream     `yaml:"stream"`
	Intake     Intake     `yaml:"intake"`
	Security   Security   `yaml:"security"`
	Buckets    Buckets    `yaml:"buckets"`
	Dev        Dev        `yaml:"dev"`
	HTTP       HTTP       `yaml:"http"`
	Log        Log        `yaml:"log"`
	Limits     Limits     `yaml:"limits"`
	Policy     Policy     `yaml:"policy"`
	Approval   Approval   `yaml:"approval"`
	Executor   Executor   `yaml:"executor"`
	ClickHouse ClickHouse `yaml:"clickhouse"`
	Audit      Audit      `yaml:"audit"`
	Console    Console    `yaml:"console"`
	Slack      Slack      `yaml:"slack"`
	Teams      Teams      `yaml:"teams"`
	Email      Email      `yaml:"email"`
	Webhooks   []Webhook  `yaml:"webhooks"`
	PagerDuty  PagerDuty  `yaml:"pagerduty"`
	Gateway    Gateway    `yaml:"gateway"`
	Runtime    Runtime    `yaml:"runtime"`
	Hooks      Hooks      `yaml:"hooks"`
}

// NATS is how services reach the bus.
type NATS struct {
	// URL of the NATS server or a comma-separated list of cluster URLs.
	URL string `yaml:"url"`
	// Credentials is a .creds file (JWT + nkey); empty for none.
	Credentials string `yaml:"credentials"`
	// NkeySeedFile authenticates with an nkey (the file holds the seed,
	// "SU..."); the server's configuration lists the public key with the
	// permissions of this service. Empty for none.
	NkeySeedFile string `yaml:"nkey_seed_file"`
	// Name shown in the server's connection list.
	Name string `yaml:"name"`
	// ReconnectWait between reconnect attempts; services reconnect forever.
	ReconnectWait time.Duration `yaml:"reconnect_wait"`
	// PingInterval: how often the connection checks the server answers. A
	// server that misses two pings in a row (hung, paused, partitioned — its
	// TCP connection still open) is left for another node of the cluster;
	// with the client library's default of 2 minutes a paused node held
	// every connection to it for minutes.
	PingInterval time.Duration `yaml:"ping_interval"`
	// DrainTimeout bounds the graceful drain on shutdown.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// ProvisionWait bounds how long provisioning waits for a cluster that
	// has just started: until it has a JetStream meta leader that knows
	// enough peers to place every stream and bucket with its replicas.
	ProvisionWait time.Duration `yaml:"provision_wait"`
	// TLS secures the connection: a tls:// URL or a CA file turns it on.
	TLS TLS `yaml:"tls"`
}

// TLS is how a client verifies the NATS server and, where the server
// requires mutual TLS, proves who it is. Verification is never skipped: a
// server whose certificate no trusted CA signed is refused.
type TLS struct {
	// CAFile (PEM) holds the CA that signed the server's certificate, for
	// a private CA; empty trusts the system's CAs. Setting it turns TLS on
	// even with a nats:// URL.
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`
	// CertFile and KeyFile (PEM) are the client's certificate and its
	// private key, for a server that requires mutual TLS (verify: true).
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file" json:"key_file,omitempty"`
}

// On reports whether the settings ask for TLS.
func (t TLS) On() bool { return t != TLS{} }

// Validate checks that a certificate comes with its key. name is where
// the settings are read from ("nats.tls"). It reads no file: a file that
// is missing or does not parse is reported when the connection is made.
func (t TLS) Validate(name string) error {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return fmt.Errorf("%s.cert_file is set without %s.key_file: give the private key of the client certificate too", name, name)
	case t.KeyFile != "" && t.CertFile == "":
		return fmt.Errorf("%s.key_file is set without %s.cert_file: give the client certificate the key belongs to", name, name)
	}
	return nil
}

// Stream is the events stream every lifecycle event is stored in.
type Stream struct {
	Name string `yaml:"name"`
	// Storage is "file" or "memory".
	Storage string `yaml:"storage"`
	// Replicas: 1 for a single server, 3 for a production cluster.
	Replicas int `yaml:"replicas"`
	// MaxAge is how long events are retained (the audit back-fill horizon
	// when ClickHouse is added later).
	MaxAge time.Duration `yaml:"max_age"`
	// DuplicateWindow during which a re-published Nats-Msg-Id is stored once (≥ 2 min).
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxMsgSize is the largest message the stream stores.
	MaxMsgSize int32 `yaml:"max_msg_size"`
	// MaxBytes bounds what the stream stores (default 16 GiB, within the
	// shipped 20 GiB NATS volume with the intake's 1 GiB and the approvals
	// bucket's 1 GiB, approval.max_bytes). At the bound
	// new events are refused, never old ones dropped: every event is
	// audit trail, and the executor's exactly-once check reads a call's
	// own earlier events. airlock then decides no new call until events
	// age out (max_age) or the bound is raised.
	MaxBytes int64 `yaml:"max_bytes"`
}

// Buckets are the JetStream KV buckets that hold mutable state.
type Buckets struct {
	Approvals  string `yaml:"approvals"`
	Executions string `yaml:"executions"`
	Policy     string `yaml:"policy"`
	Grants     string `yaml:"grants"`
	Console    string `yaml:"console"` // console users created at run time, sessions, API tokens
	SlackSeen  string `yaml:"slack_seen"`
	// ClientWaits: the MCP gateway's calls whose client was told to call
	// again (rejoin entries) and whether a client still waits for each.
	ClientWaits string `yaml:"client_waits"`
	// ClientWaitsMaxBytes bounds the client-waits bucket (default 128 MiB,
	// DefaultClientWaitsMaxBytes). Full, the gateway's writes there fail and
	// it degrades: a client is not told to call again but keeps waiting.
	ClientWaitsMaxBytes int64  `yaml:"client_waits_max_bytes"`
	TeamsSeen           string `yaml:"teams_seen"`
	// InDoubt: calls that ended in doubt (failed, outcome indeterminate)
	// and whether a person says they happened.
	InDoubt string `yaml:"in_doubt"`
	// InDoubtMaxBytes bounds the in-doubt bucket (default 64 MiB,
	// DefaultInDoubtMaxBytes). Each agent keeps at most
	// approval.max_in_doubt_per_agent tasks there, and answered tasks leave
	// after approval.ended_retention.
	InDoubtMaxBytes int64  `yaml:"in_doubt_max_bytes"`
	Storage         string `yaml:"storage"`
	Replicas        int    `yaml:"replicas"`
	// History kept per key (1–64); more helps forensics, costs space.
	History uint8 `yaml:"history"`
}

// DefaultClientWaitsMaxBytes is Buckets.ClientWaitsMaxBytes by default:
// about 75,000 calls waiting for a person at the ~1.7 KB each one keeps
// there (rejoin entry, offer, presence; measured, R9 F8) — 750 agents each
// at approval.max_pending_per_agent (100) — and a small part of the 2 GiB
// the shipped 20 GiB NATS volume leaves beside the events stream (16 GiB),
// the intake and the approvals bucket (1 GiB each). The gateway removes
// what ended calls leave an hour later (gateway.session_timeout), so
// only calls still waiting, or ended within that hour, count.
const DefaultClientWaitsMaxBytes = 128 << 20

// MinClientWaitsMaxBytes is the least Buckets.ClientWaitsMaxBytes.
const MinClientWaitsMaxBytes = 1 << 20

// DefaultInDoubtMaxBytes is Buckets.InDoubtMaxBytes by default: an open
// task is under 1 KB unless its failure message is long (at most 4 KiB;
// an answer adds a person's note, as much again), so the 90% of 64 MiB
// open tasks may take holds about 230 agents at their
// approval.max_in_doubt_per_agent (256) of typical tasks, or about 50 at
// that many of the longest.
const DefaultInDoubtMaxBytes = 64 << 20

// InDoubtRefusalMark is the share of buckets.in_doubt_max_bytes past which
// no new in-doubt task is made: the rest is kept for people's answers,
// which grow a task (a full bucket refuses them too).
const InDoubtRefusalMark = 0.9

// MinInDoubtMaxBytes is the least Buckets.InDoubtMaxBytes.
const MinInDoubtMaxBytes = 1 << 20

// Dev configures the embedded NATS server that `airlock dev` starts.
type Dev struct {
	DataDir  string `yaml:"data_dir"`
	NATSHost string `yaml:"nats_host"`
	NATSPort int    `yaml:"nats_port"`
	// Sync is the JetStream fsync policy: "always" fsyncs every write before
	// acknowledging it (an OS crash loses nothing acknowledged, writes are
	// about 10× slower); a duration such as "1s" fsyncs at that interval (an
	// OS crash can lose up to that much acknowledged work; a process crash
	// loses nothing). See ARCHITECTURE.md "Durability".
	Sync string `yaml:"sync"`
}

// HTTP is the listener for the console, the REST API, /healthz and /metrics.
type HTTP struct {
	Addr string `yaml:"addr"`
	// PublicURL is how people reach the console (links in Slack messages, mail, webhooks).
	PublicURL string `yaml:"public_url"`
	// ReadTimeout is how long a client may take to send a whole request
	// (its headers within 10 s of it): a client that sends a Content-Length
	// and then trickles or stops is cut off, so it cannot hold a connection
	// and its goroutine for ever. Long-polls, live feeds and MCP calls
	// waiting for a person are not limited by it: it ends with the request's
	// body, and nothing bounds how long an answer takes.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout is how long one write of an answer may wait for the
	// client to read: a client that stops reading (or pipelines requests
	// and reads no answer) is cut off, so it cannot hold its connection.
	// It is set afresh at each write: answers may take as long as they need.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a kept-alive connection with no request for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections bounds the HTTP connections the process holds at once
	// (reviewers' pages and feeds, REST long-polls, MCP clients, webhooks);
	// past it a new connection waits to be accepted until one ends, so no
	// client can take the file descriptors NATS and the services need.
	MaxConnections int `yaml:"max_connections"`
}

// Log configures log/slog output.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// Hooks are the coding-agent hooks' settings (`airlock hook`, `airlock
// undo`), read from the hook's --config.
type Hooks struct {
	Snapshots HookSnapshots `yaml:"snapshots"`
}

// HookSnapshots bound what the hook saves before an allowed call that may
// change files, for `airlock undo`, on the machine the agent runs on.
type HookSnapshots struct {
	// MaxBytes bounds the bytes one snapshot copies outside git (and the
	// untracked files a whole-tree git snapshot adds); files past it are
	// left out, and the snapshot says so.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxTotalBytes bounds the snapshots on disk: when the next one is
	// taken, the oldest are removed until the rest fit.
	MaxTotalBytes int64 `yaml:"max_total_bytes"`
	// Keep is how long a snapshot is kept: older ones are removed when the
	// next is taken.
	Keep time.Duration `yaml:"keep"`
}

// Runtime tunes the Go runtime of a process that runs airlock's services.
type Runtime struct {
	// GCPercent is the garbage collector's target (Go's GOGC) in a process
	// running services: a collection starts once the heap has grown this
	// many percent over what the last one left live. Services allocate a
	// little per message and keep a small live heap, so at Go's default of
	// 100 the collector took 8-11% of an auto-allowed call's CPU, at 400
	// 5-6% (ARCHITECTURE.md "Hot paths"), for a heap that may
	// reach five times the live one between collections: the approval
	// service holding 100,000 pending calls (about 105 MB live) may grow
	// to about 525 MB. In a container with a memory limit and no
	// GOMEMLIMIT, services set Go's memory limit to 90% of the
	// container's, so the collector works harder before the container is
	// killed. Lower it (or set GOMEMLIMIT) where memory is tight. 0 or a
	// negative value leaves Go's own setting (100, or GOGC's): it does not
	// turn the collector off, as GOGC=off does. A GOGC environment
	// variable always wins.
	GCPercent int `yaml:"gc_percent"`
}

// Limits bound what agents may send.
type Limits struct {
	// MaxRequestBytes is the largest request accepted; larger ones become `invalid`.
	MaxRequestBytes int `yaml:"max_request_bytes"`
	// MaxArgumentDepth bounds how deeply a request's arguments nest (every
	// object or list is a level, the arguments object included); deeper
	// ones become `invalid`. At most 128.
	MaxArgumentDepth int `yaml:"max_argument_depth"`
	// BusConnections is the NATS server's connections in all (services,
	// agents, operators: nats-server max_connections), so no client can
	// take the server process's file descriptors. Every agent's
	// AgentConnections and ServiceConnections must fit in it, so that no
	// agent, nor all of them at once, leaves a service or another agent
	// without a connection (ARCHITECTURE.md "Trust boundaries"). `airlock
	// dev` lowers it to fit the process's open file limit.
	BusConnections int `yaml:"bus_connections"`
	// AgentConnections is how many NATS connections one agent may hold at
	// once (nats-server max_connections of the agent's own account): the
	// SDK holds one per process, and a coding agent's hook one per tool
	// call while it waits for a person (up to 5 minutes), so parallel tool
	// calls and test runs need several.
	AgentConnections int `yaml:"agent_connections"`
	// ServiceConnections is the part of BusConnections no agent may take:
	// the services' connections (each replica's), the operator CLI's and
	// the MCP gateways' (`airlock gateway --stdio` holds one per client).
	ServiceConnections int `yaml:"service_connections"`
	// AgentSubscriptions bounds the subscriptions of one agent connection.
	// The SDKs hold at most SDKSubscriptions on one: the calls they await
	// share one subscription (the Go SDK's Follows, the TypeScript
	// client's follow), a Watcher one per event type. nats-server bounds
	// subscriptions per connection only, and every one on the same
	// subject gets its own copy of each message there, so an agent can make
	// the server hold one event limits.agent_connections times this many
	// times over (R9 F2): keep it near what the SDKs need.
	AgentSubscriptions int `yaml:"agent_subscriptions"`
	// AgentCallsPerMinute and AgentRequestBytesPerMinute are one agent's
	// budget at the policy's intake: the requests (and reports) it may have
	// decided and recorded in the events stream in a minute, and their
	// bytes, as a token bucket holding a minute's worth. They keep one agent
	// from filling the shared events stream (stream.max_bytes), where every
	// agent's calls stop being decided: a flood of calls the policy denies
	// is held by no max_pending bound. Each request is counted twice, as the
	// stream stores it twice (the request and the decision event carrying
	// the whole call); the completed result, up to 64 KiB, is not counted
	// (R9 F6). At the defaults (600 calls, 64 MiB a minute) one agent fills
	// the default 16 GiB in about 2 h 40 min at the fastest, N times faster
	// with N policy replicas.
	// A request over the budget is refused with a small `invalid` event
	// saying so; past as many refusals in a minute, further ones are dropped,
	// nothing stored. Every request over the budget is also answered with a
	// notice that is not stored (core NATS, ingress.OverBudget), up to
	// max(intake.max_pending_per_agent, AgentCallsPerMinute) notices an agent
	// a minute. Each policy replica keeps its own budget in memory: with
	// N replicas an agent gets up to N times it, and a restart refills it.
	AgentCallsPerMinute        int `yaml:"agent_calls_per_minute"`
	AgentRequestBytesPerMinute int `yaml:"agent_request_bytes_per_minute"`
}

// MinBusConnections leaves room for every service's connections and a few
// agents.
const MinBusConnections = 64

// Default returns a configuration in which every setting has a working value:
// a laptop running `airlock dev`.
func Default() Config {
	return Config{
		NATS: NATS{
			URL:           "nats://127.0.0.1:4222",
			Name:          "airlock",
			ReconnectWait: 500 * time.Millisecond,
			PingInterval:  2 * time.Second,
			DrainTimeout:  10 * time.Second,
			ProvisionWait: 2 * time.Minute,
		},
		Stream: Stream{
			Name:            "AIRLOCK_EVENTS",
			Storage:         "file",
			Replicas:        1,
			MaxAge:          90 * 24 * time.Hour,
			DuplicateWindow: 2 * time.Minute,
			MaxMsgSize:      1 << 20,
			MaxBytes:        16 << 30,
		},
		Buckets: Buckets{
			Approvals:           "airlock_approvals",
			Executions:          "airlock_executions",
			Policy:              "airlock_policy",
			Grants:              "airlock_grants",
			Console:             "airlock_console",
			SlackSeen:           "airlock_slack_seen",
			ClientWaits:         "airlock_client_waits",
			ClientWaitsMaxBytes: DefaultClientWaitsMaxBytes,
			TeamsSeen:           "airlock_teams_seen",
			InDoubt:             "airlock_in_doubt",
			InDoubtMaxBytes:     DefaultInDoubtMaxBytes,
			Storage:             "file",
			Replicas:            1,
			History:             5,
		},
		Dev: Dev{
			DataDir:  ".airlock",
			NATSHost: "127.0.0.1",
			NATSPort: 4222,
			Sync:     "1s",
		},
		Intake:     defaultIntake(),
		HTTP:       HTTP{Addr: "127.0.0.1:8080", PublicURL: "http://127.0.0.1:8080", ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxConnections: 1024},
		Log:        Log{Level: "info", Format: "text"},
		Runtime:    Runtime{GCPercent: 400},
		Hooks:      Hooks{Snapshots: HookSnapshots{MaxBytes: 64 << 20, MaxTotalBytes: 1 << 30, Keep: 7 * 24 * time.Hour}},
		Limits:     Limits{MaxRequestBytes: 256 << 10, MaxArgumentDepth: 32, BusConnections: 4096, AgentConnections: 64, ServiceConnections: 256, AgentSubscriptions: 2 * SDKSubscriptions, AgentCallsPerMinute: 600, AgentRequestBytesPerMinute: 64 << 20},
		Policy:     defaultPolicy(),
		Approval:   defaultApproval(),
		Executor:   defaultExecutor(),
		ClickHouse: defaultClickHouse(),
		Audit:      defaultAudit(),
		Console:    defaultConsole(),
		Slack:      defaultSlack(),
		Teams:      defaultTeams(),
		Email:      defaultEmail(),
		PagerDuty:  defaultPagerDuty(),
		Gateway:    defaultGateway(),
	}
}

// Load reads path (if non-empty) over the defaults, then applies
// environment overrides from env (os.Environ form), then validates.
// A missing file named explicitly is an error; unknown keys are errors so
// that a typo does not silently fall back to a default.
func Load(path string, env []string) (Config, error) {
	cfg := Default()
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("read config %s: %w", path, err)
		}
		if err := decodeStrict(raw, &cfg); err != nil {
			return cfg, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, env); err != nil {
		return cfg, err
	}
	if err := cfg.ApplyGatewayBindings(); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func decodeStrict(raw []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return explainUnknownFields(err)
	}
	return nil
}

// unknownField is how yaml.v3 says a key names no field.
var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)

// explainUnknownFields turns yaml's "field adr not found in type
// config.HTTP" (a Go type a person never wrote) into the setting's section
// and the keys that section takes, so a typo is seen at once.
func explainUnknownFields(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	sections := settingSections()
	lines := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		lines[i] = e
		m := unknownField.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		sec, ok := sections[m[3]]
		switch {
		case !ok:
		case sec.path == "":
			lines[i] = fmt.Sprintf("line %s: there is no top-level setting %q (a typo? the top level has %s)", m[1], m[2], strings.Join(sec.keys, ", "))
		default:
			lines[i] = fmt.Sprintf("line %s: %s has no setting %q (a typo? it has %s)", m[1], sec.path, m[2], strings.Join(sec.keys, ", "))
		}
	}
	return errors.New(strings.Join(lines, "; "))
}

// section is where a configuration struct sits (its YAML path) and the keys
// it takes.
type section struct {
	path string
	keys []string
}

// settingSections maps each configuration struct's Go type name, as yaml
// names it, to its section.
func settingSections() map[string]section {
	out := map[string]section{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			if t.Kind() != reflect.Map {
				path += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeOf(Config{}).PkgPath() {
			return
		}
		if _, seen := out[t.String()]; seen {
			return
		}
		sec := section{path: path}
		for i := range t.NumField() {
			f := t.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || key == "-" || key == "" {
				continue
			}
			sec.keys = append(sec.keys, key)
			walk(f.Type, strings.TrimPrefix(path+"."+key, "."))
		}
		out[t.String()] = sec
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// EventHeadroom is what an event adds to the call it carries (its other
// fields, the decision, headers and the seal), with room to spare.
const EventHeadroom = 16 << 10

// RequestHeadroom is what a request's NATS headers add to its body, which
// limits.max_request_bytes bounds: the SDKs' requests carry six
// CloudEvents headers and a content type, under 500 bytes with the longest
// agent and call ids (natsauth TestAnAgentsLargestRequestIsStored), with
// room to spare.
const RequestHeadroom = 4 << 10

// AgentPublishBytes is the largest message an agent's credential may
// publish (its NATS account's max_payload): the largest request airlock
// accepts and its headers. Anything larger the policy would refuse for its
// size, so the server refuses it first and the intake never stores it.
func (c Config) AgentPublishBytes() int { return c.Limits.MaxRequestBytes + RequestHeadroom }

// SDKSubscriptions is the most subscriptions the Go and TypeScript SDKs
// hold on one agent connection, with room: the request inbox, the
// over-budget notices, one for every call they follow, and a Watcher's
// (the TypeScript client's do) one per event that ends a call — 12 — and
// a watcher's WatchAlso types. limits.agent_subscriptions is at least this.
const SDKSubscriptions = 16

// IntakeAgentsSharing is how many agents, each with its intake share full
// of the largest requests (intake.max_pending_per_agent times
// AgentPublishBytes), fit in intake.max_bytes at least: fewer could fill
// the intake, and every agent's requests would be refused.
const IntakeAgentsSharing = 16

// Validate checks settings that would otherwise fail later and obscurely.
func (c Config) Validate() error {
	var errs []error
	if c.Stream.DuplicateWindow < 2*time.Minute {
		errs = append(errs, fmt.Errorf("stream.duplicate_window is %s: it must be at least 2m so a retried publish is stored once", c.Stream.DuplicateWindow))
	}
	if c.Stream.Storage != "file" && c.Stream.Storage != "memory" {
		errs = append(errs, fmt.Errorf("stream.storage is %q: use file or memory", c.Stream.Storage))
	}
	if c.Buckets.Storage != "file" && c.Buckets.Storage != "memory" {
		errs = append(errs, fmt.Errorf("buckets.storage is %q: use file or memory", c.Buckets.Storage))
	}
	if c.Stream.Replicas < 1 || c.Stream.Replicas > 5 || c.Buckets.Replicas < 1 || c.Buckets.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas must be between 1 and 5 (stream %d, buckets %d)", c.Stream.Replicas, c.Buckets.Replicas))
	}
	if c.Limits.MaxRequestBytes <= 0 || int64(c.Limits.MaxRequestBytes)+EventHeadroom > int64(c.Stream.MaxMsgSize) {
		errs = append(errs, fmt.Errorf("limits.max_request_bytes (%d) must be positive and at least %d bytes under stream.max_msg_size (%d), so that every event carrying the call fits", c.Limits.MaxRequestBytes, EventHeadroom, c.Stream.MaxMsgSize))
	}
	if c.Stream.MaxBytes < 64*int64(c.Stream.MaxMsgSize) {
		errs = append(errs, fmt.Errorf("stream.max_bytes (%d) must be at least 64 times stream.max_msg_size (%d): it bounds every event airlock keeps (16 GiB by default)", c.Stream.MaxBytes, c.Stream.MaxMsgSize))
	}
	if c.Buckets.ClientWaitsMaxBytes < MinClientWaitsMaxBytes {
		errs = append(errs, fmt.Errorf("buckets.client_waits_max_bytes (%d) must be at least %d (1 MiB): it bounds what the MCP gateway keeps about calls waiting for a person (128 MiB by default)", c.Buckets.ClientWaitsMaxBytes, MinClientWaitsMaxBytes))
	}
	if c.Buckets.InDoubtMaxBytes < MinInDoubtMaxBytes {
		errs = append(errs, fmt.Errorf("buckets.in_doubt_max_bytes (%d) must be at least %d (1 MiB): it bounds the \"did it happen?\" tasks of calls that ended in doubt (64 MiB by default)", c.Buckets.InDoubtMaxBytes, MinInDoubtMaxBytes))
	}
	if c.Intake.MaxMsgSize < int32(c.Limits.MaxRequestBytes) {
		errs = append(errs, fmt.Errorf("intake.max_msg_size (%d) must be at least limits.max_request_bytes (%d), so that an oversized request is told why", c.Intake.MaxMsgSize, c.Limits.MaxRequestBytes))
	}
	if c.Approval.EndedRetention < time.Second {
		errs = append(errs, fmt.Errorf("approval.ended_retention (%s) must be at least 1s: it is how long an ended call's record is kept before the server removes it", c.Approval.EndedRetention))
	}
	if minBytes := MinApprovalBytesPerRequest * int64(c.Limits.MaxRequestBytes); c.Approval.MaxBytes < minBytes {
		errs = append(errs, fmt.Errorf("approval.max_bytes (%d) must be at least %d (%d times limits.max_request_bytes): it bounds the approvals bucket every agent's waiting and recently ended calls share (1 GiB by default), and past %d%% of it new calls are refused so that decisions on waiting ones still fit; raise it, or lower limits.max_request_bytes",
			c.Approval.MaxBytes, minBytes, MinApprovalBytesPerRequest, int(ApprovalRefusalMark*100)))
	}
	if share, least := c.Approval.MaxBytesPerAgent, MinApprovalAgentRequests*int64(c.Limits.MaxRequestBytes); share != 0 && (share < least || share > c.Approval.MaxBytes) {
		errs = append(errs, fmt.Errorf("approval.max_bytes_per_agent (%d) must be between %d (%d times limits.max_request_bytes) and approval.max_bytes (%d): it is how many bytes of the approvals bucket one agent's waiting and recently ended calls may hold before its new calls are refused; set it in that range, or leave it unset for approval.max_bytes / %d",
			share, least, MinApprovalAgentRequests, c.Approval.MaxBytes, DefaultApprovalAgentsSharing))
	}
	if c.Approval.MaxPendingPerAgent < 1 {
		errs = append(errs, fmt.Errorf("approval.max_pending_per_agent (%d) must be at least 1: it is how many of one agent's calls may wait for a person", c.Approval.MaxPendingPerAgent))
	}
	if c.Approval.MaxInDoubtPerAgent < 1 {
		errs = append(errs, fmt.Errorf("approval.max_in_doubt_per_agent (%d) must be at least 1: it is how many open \"did it happen?\" tasks of one agent's calls the in-doubt bucket keeps", c.Approval.MaxInDoubtPerAgent))
	}
	if c.Approval.NotifyBurst < 1 {
		errs = append(errs, fmt.Errorf("approval.notify_burst (%d) must be at least 1: it is how many of one agent's calls a channel announces one by one before coalescing the rest into a digest", c.Approval.NotifyBurst))
	}
	if c.Limits.MaxArgumentDepth < 1 || c.Limits.MaxArgumentDepth > 128 {
		errs = append(errs, fmt.Errorf("limits.max_argument_depth (%d) must be between 1 and 128: it is how deeply a request's arguments may nest", c.Limits.MaxArgumentDepth))
	}
	if c.HTTP.ReadTimeout <= 0 || c.HTTP.WriteTimeout <= 0 || c.HTTP.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("http.read_timeout (%s), http.write_timeout (%s) and http.idle_timeout (%s) must be positive: without them a client that stops sending or reading holds its connection for ever", c.HTTP.ReadTimeout, c.HTTP.WriteTimeout, c.HTTP.IdleTimeout))
	}
	if c.HTTP.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("http.max_connections (%d) must be at least 1: it is how many HTTP connections the process holds at once", c.HTTP.MaxConnections))
	}
	if c.Limits.AgentCallsPerMinute < 1 {
		errs = append(errs, fmt.Errorf("limits.agent_calls_per_minute (%d) must be at least 1: it is how many requests one agent may have decided in a minute", c.Limits.AgentCallsPerMinute))
	}
	if c.Limits.AgentRequestBytesPerMinute < c.Limits.MaxRequestBytes {
		errs = append(errs, fmt.Errorf("limits.agent_request_bytes_per_minute (%d) must be at least limits.max_request_bytes (%d), so that one agent's largest request fits its budget", c.Limits.AgentRequestBytesPerMinute, c.Limits.MaxRequestBytes))
	}
	if c.Limits.BusConnections < MinBusConnections {
		errs = append(errs, fmt.Errorf("limits.bus_connections (%d) must be at least %d: it is how many NATS connections the server admits in all, services' included", c.Limits.BusConnections, MinBusConnections))
	}
	if c.Limits.AgentConnections < 1 {
		errs = append(errs, fmt.Errorf("limits.agent_connections (%d) must be at least 1: it is how many NATS connections one agent may hold at once", c.Limits.AgentConnections))
	}
	if c.Limits.ServiceConnections < 1 {
		errs = append(errs, fmt.Errorf("limits.service_connections (%d) must be at least 1: it is how many NATS connections the server keeps for services and operators, which no agent may take", c.Limits.ServiceConnections))
	}
	if c.Limits.AgentConnections >= 1 && c.Limits.ServiceConnections >= 1 && c.Limits.AgentConnections+c.Limits.ServiceConnections > c.Limits.BusConnections {
		errs = append(errs, fmt.Errorf("limits.bus_connections (%d) must hold limits.service_connections (%d) and at least one agent's limits.agent_connections (%d): raise it or lower those", c.Limits.BusConnections, c.Limits.ServiceConnections, c.Limits.AgentConnections))
	}
	if sn := c.Hooks.Snapshots; sn.MaxBytes < 1 || sn.MaxTotalBytes < sn.MaxBytes || sn.Keep < time.Minute {
		errs = append(errs, fmt.Errorf("hooks.snapshots (max_bytes %d, max_total_bytes %d, keep %s) must keep at least one snapshot: max_bytes at least 1, max_total_bytes at least max_bytes, keep at least 1m", sn.MaxBytes, sn.MaxTotalBytes, sn.Keep))
	}
	if c.Limits.AgentSubscriptions < SDKSubscriptions {
		errs = append(errs, fmt.Errorf("limits.agent_subscriptions (%d) must be at least %d: that many subscriptions is what the SDKs hold on one connection (the calls they await share one, a watcher holds one per event type)", c.Limits.AgentSubscriptions, SDKSubscriptions))
	}
	if c.Intake.MaxPendingPerAgent < 1 {
		errs = append(errs, fmt.Errorf("intake.max_pending_per_agent (%d) must be at least 1: it is how many of one agent's requests may wait for the policy service", c.Intake.MaxPendingPerAgent))
	}
	if share, most := c.Intake.MaxPendingPerAgent*int64(c.AgentPublishBytes()), c.Intake.MaxBytes/IntakeAgentsSharing; c.Intake.MaxPendingPerAgent >= 1 && share > most {
		errs = append(errs, fmt.Errorf("intake.max_pending_per_agent (%d) requests of up to %d bytes (limits.max_request_bytes and its headers) let one agent hold %d bytes of the intake, over intake.max_bytes / %d (%d): %d such agents would fill it and every agent's requests would be refused; lower intake.max_pending_per_agent or limits.max_request_bytes, or raise intake.max_bytes",
			c.Intake.MaxPendingPerAgent, c.AgentPublishBytes(), share, IntakeAgentsSharing, most, c.Intake.MaxBytes/max(share, 1)))
	}
	if c.NATS.PingInterval <= 0 {
		errs = append(errs, fmt.Errorf("nats.ping_interval is %s: set a positive duration such as 2s", c.NATS.PingInterval))
	}
	if err := c.NATS.TLS.Validate("nats.tls"); err != nil {
		errs = append(errs, err)
	}
	if c.NATS.ProvisionWait <= 0 {
		errs = append(errs, fmt.Errorf("nats.provision_wait is %s: set a positive duration such as 2m", c.NATS.ProvisionWait))
	}
	if c.Policy.ReloadInterval <= 0 {
		errs = append(errs, fmt.Errorf("policy.reload_interval is %s: set a positive duration such as 1s", c.Policy.ReloadInterval))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"approval.default_timeout", c.Approval.DefaultTimeout}, {"approval.sweep_interval", c.Approval.SweepInterval},
		{"approval.notify_timeout", c.Approval.NotifyTimeout}, {"executor.ack_wait", c.Executor.AckWait},
		{"approval.preview_timeout", c.Approval.PreviewTimeout}, {"approval.notify_refill", c.Approval.NotifyRefill}, {"executor.preview_timeout", c.Executor.PreviewTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s is %s: set a positive duration such as 5m", d.name, d.v))
		}
	}
	if c.Approval.TakeoverAfter < 2*c.NATS.ReconnectWait {
		errs = append(errs, fmt.Errorf("approval.takeover_after is %s: set at least twice nats.reconnect_wait (%s), such as 30s, so that a replica reconnecting to NATS is not taken for gone and its calls announced twice", c.Approval.TakeoverAfter, 2*c.NATS.ReconnectWait))
	}
	if c.Approval.PreviewTimeout > 20*time.Second {
		errs = append(errs, fmt.Errorf("approval.preview_timeout is %s: keep it at most 20s, well under the 30s a pending call's event may take before it is handled again", c.Approval.PreviewTimeout))
	}
	if c.Executor.MaxPreviewBytes < 1024 || c.Executor.MaxPreviewBytes > MaxPreviewBytesLimit {
		errs = append(errs, fmt.Errorf("executor.max_preview_bytes (%d) must be between 1024 and %d (256 KiB): it bounds the text of a call's preview, which is stored in the call's pending record, and a record must stay under the bus's 1 MiB message size; set it to at most %d", c.Executor.MaxPreviewBytes, MaxPreviewBytesLimit, MaxPreviewBytesLimit))
	}
	if len(c.Approval.DefaultApprovers) == 0 {
		errs = append(errs, fmt.Errorf("approval.default_approvers is empty: name who decides calls whose rule names nobody, e.g. [group:reviewers]"))
	}
	if c.Approval.Workers <= 0 || c.Executor.Workers <= 0 || c.Policy.Workers <= 0 {
		errs = append(errs, fmt.Errorf("approval.workers, executor.workers and policy.workers must be at least 1"))
	}
	if _, err := ParseSync(c.Dev.Sync); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Slack.validate()...)
	errs = append(errs, c.Teams.validate()...)
	errs = append(errs, c.Email.validate()...)
	errs = append(errs, validateWebhooks(c.Webhooks)...)
	errs = append(errs, c.PagerDuty.validate()...)
	errs = append(errs, c.Console.OIDC.validate()...)
	errs = append(errs, c.Gateway.validate()...)
	return errors.Join(errs...)
}

// SyncText says how often a sync setting (dev.sync) writes to disk, for people.
func SyncText(s string) string {
	if s == "always" {
		return "every write"
	}
	return "every " + s
}

// ParseSync reads dev.sync: "always" → (0, nil) meaning fsync every write,
// otherwise a positive duration.
func ParseSync(s string) (time.Duration, error) {
	if s == "always" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("dev.sync is %q: use \"always\" or a duration such as \"1s\"", s)
	}
	return d, nil
}
