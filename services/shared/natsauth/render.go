package natsauth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// User is one NATS user: a service role or an agent, and the public nkey it
// authenticates with. NKey may be a reference to a configuration variable
// ("$AIRLOCK_POLICY_NKEY"), which nats-server resolves from the environment.
type User struct {
	// Role is a service role; empty for an agent.
	Role string
	// Agent is the agent id; empty for a service.
	Agent string
	NKey  string
}

// Spec is everything a rendering needs.
type Spec struct {
	Config   config.Config
	Services []User
	Agents   []User
}

// Accounts renders the accounts block of a nats-server configuration, and
// the server's bound on connections in all (limits.bus_connections).
func Accounts(spec Spec) (string, error) {
	var b strings.Builder
	b.WriteString("# Connections in all, services' included: keep it under the server\n")
	b.WriteString("# process's open file limit (limits.bus_connections; ARCHITECTURE.md\n")
	b.WriteString("# \"Trust boundaries\": one agent can still hold all of them).\n")
	fmt.Fprintf(&b, "max_connections: %d\n", spec.Config.Limits.BusConnections)
	b.WriteString("accounts {\n")
	fmt.Fprintf(&b, "  # Services and all JetStream state. Each service user has only what it needs.\n")
	fmt.Fprintf(&b, "  %s {\n    jetstream: enabled\n    users: [\n", AccountAirlock)
	for _, u := range spec.Services {
		p, err := Service(u.Role, spec.Config)
		if err != nil {
			return "", err
		}
		writeUser(&b, "role "+u.Role, u.NKey, p)
	}
	b.WriteString("    ]\n    exports: [\n")
	svcs, streams := exports(spec.Config)
	for _, s := range svcs {
		fmt.Fprintf(&b, "      { service: %s, accounts: [%s] }\n", q(s), AccountAgents)
	}
	for _, s := range streams {
		fmt.Fprintf(&b, "      { stream: %s, accounts: [%s] }\n", q(s), AccountAgents)
	}
	b.WriteString("    ]\n  }\n")
	agents := append([]User(nil), spec.Agents...)
	lim := AgentLimits(spec.Config)
	fmt.Fprintf(&b, "  # Agents: no JetStream; each agent only its own requests and outcomes.\n")
	fmt.Fprintf(&b, "  # Each agent connection publishes at most intake.max_msg_size and holds at\n")
	fmt.Fprintf(&b, "  # most limits.agent_subscriptions subscriptions. The account sets no\n")
	fmt.Fprintf(&b, "  # max_connections: shared by its agents, one agent could take them all\n")
	fmt.Fprintf(&b, "  # and lock the others out (ARCHITECTURE.md \"Trust boundaries\").\n")
	fmt.Fprintf(&b, "  %s {\n    limits: { max_payload: %d, max_subscriptions: %d }\n    users: [\n",
		AccountAgents, lim.MaxPayload, lim.MaxSubscriptions)
	sort.Slice(agents, func(i, j int) bool { return agents[i].Agent < agents[j].Agent })
	for _, u := range agents {
		writeUser(&b, "agent "+u.Agent, u.NKey, Agent(u.Agent, spec.Config))
	}
	b.WriteString("    ]\n    imports: [\n")
	for _, s := range svcs {
		fmt.Fprintf(&b, "      { service: { account: %s, subject: %s } }\n", AccountAirlock, q(s))
	}
	for _, s := range streams {
		fmt.Fprintf(&b, "      { stream: { account: %s, subject: %s } }\n", AccountAirlock, q(s))
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String(), nil
}

func writeUser(b *strings.Builder, comment, nkey string, p Permissions) {
	fmt.Fprintf(b, "      # %s\n", comment)
	key := q(nkey)
	if strings.HasPrefix(nkey, "$") {
		key = nkey // a variable, resolved by nats-server (from the environment)
	}
	if p.Unrestricted {
		fmt.Fprintf(b, "      { nkey: %s }\n", key)
		return
	}
	fmt.Fprintf(b, "      { nkey: %s, permissions: {\n", key)
	if len(p.PublishDeny) > 0 {
		fmt.Fprintf(b, "          publish: { allow: %s, deny: %s }\n", list(p.PublishAllow), list(p.PublishDeny))
	} else {
		fmt.Fprintf(b, "          publish: { allow: %s }\n", list(p.PublishAllow))
	}
	fmt.Fprintf(b, "          subscribe: { allow: %s }\n", list(p.SubscribeAllow))
	if p.AllowResponses {
		b.WriteString("          allow_responses: true\n")
	}
	b.WriteString("      } }\n")
}

func list(subjects []string) string {
	if len(subjects) == 0 {
		return "[]"
	}
	qs := make([]string, len(subjects))
	for i, s := range subjects {
		qs[i] = q(s)
	}
	return "[" + strings.Join(qs, ", ") + "]"
}

func q(s string) string { return `"` + s + `"` }

// EnvVar is the environment variable the shipped configuration reads a
// service role's public nkey from, e.g. AIRLOCK_POLICY_NKEY.
func EnvVar(role string) string { return "$AIRLOCK_" + strings.ToUpper(role) + "_NKEY" }

// AgentEnvVar is the same for an agent, e.g. AIRLOCK_AGENT_BOT_NKEY.
func AgentEnvVar(agent string) string {
	return "$AIRLOCK_AGENT_" + strings.ToUpper(strings.NewReplacer("-", "_").Replace(agent)) + "_NKEY"
}

// Shipped renders deploy/nats/airlock.conf: the server settings of a
// production node plus the accounts, with every public key read from the
// environment and one example agent, "bot".
func Shipped(cfg config.Config) (string, error) { return ShippedFor(cfg, "bot") }

// ShippedFor is Shipped with these agents instead of the example one, each
// agent's public key read from AgentEnvVar(agent): what an operator deploys
// once they have added their agents (and what `airlock chaos` runs).
func ShippedFor(cfg config.Config, agents ...string) (string, error) {
	spec := Spec{Config: cfg}
	for _, a := range agents {
		spec.Agents = append(spec.Agents, User{Agent: a, NKey: AgentEnvVar(a)})
	}
	spec.Services = append(spec.Services, User{Role: RoleAdmin, NKey: EnvVar(RoleAdmin)})
	for _, r := range ServiceRoles {
		spec.Services = append(spec.Services, User{Role: r, NKey: EnvVar(r)})
	}
	acc, err := Accounts(spec)
	if err != nil {
		return "", err
	}
	return shippedHeader + acc, nil
}

const shippedHeader = `# nats-server configuration for airlock: JetStream in the AIRLOCK account
# with one nkey user per service holding the least permissions it needs, and
# the agents in their own AGENTS account, each confined to its own calls
# (SPEC §6, ARCHITECTURE.md "Trust boundaries").
#
# GENERATED by ` + "`go tool task generate`" + ` from services/shared/natsauth: edit
# that package, not this file (a test checks they agree).
#
# Public keys come from the environment ($AIRLOCK_<ROLE>_NKEY), so this file
# holds no secrets. ` + "`airlock nats keys DIR`" + ` writes a seed file per role and
# prints the variables to set. Add an agent by copying the "agent bot" block
# (or render a configuration with ` + "`airlock nats config`" + `) and reloading the
# server (SIGHUP). Cluster and TLS settings go in cluster.conf.

port: 4222
jetstream {
  store_dir: /data/jetstream
  # Acknowledged writes survive a coordinated OS crash only with fsync on
  # every write; see ARCHITECTURE.md "Durability".
  sync_interval: always
  # JetStream's disk limit: size it to the volume you give JetStream. Left
  # out, NATS takes 75% of the disk free at boot, and on a fuller disk the
  # streams' reservations (stream.max_bytes, intake.max_bytes) are refused.
  max_file_store: 64G
}

`

// Limits are what nats-server enforces on each connection of the agents'
// account: its largest publish and its subscriptions. Config-file users
// have no limits of their own (nats-server reads per-user limits only from
// JWTs), so the account carries them. It carries no connection count: an
// account's is shared by all its agents, so one agent could take the
// others' (limits.bus_connections bounds the server's instead).
type Limits struct {
	MaxPayload, MaxSubscriptions int
}

// AgentLimits sizes each connection of the AGENTS account. The largest
// publish an agent has a use for is a request the intake stream stores
// (intake.max_msg_size; the Go SDK refuses one over
// limits.max_request_bytes before publishing); the server answers anything
// larger by closing the connection, before any service reads it.
func AgentLimits(cfg config.Config) Limits {
	return Limits{
		MaxPayload:       int(cfg.Intake.MaxMsgSize),
		MaxSubscriptions: cfg.Limits.AgentSubscriptions,
	}
}
