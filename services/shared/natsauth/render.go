package natsauth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ids"
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
// the server's bound on connections in all (limits.bus_connections). It
// refuses agents whose connections (limits.agent_connections each) would
// not fit beside limits.service_connections under that bound (FitAgents).
func Accounts(spec Spec) (string, error) {
	if err := FitAgents(spec.Config, len(spec.Agents)); err != nil {
		return "", err
	}
	var b strings.Builder
	lim := AgentLimits(spec.Config)
	b.WriteString("# Connections in all, services' included: keep it under the server\n")
	b.WriteString("# process's open file limit (limits.bus_connections). Every agent's\n")
	fmt.Fprintf(&b, "# account admits %d (limits.agent_connections); agents times that plus\n", lim.MaxConnections)
	fmt.Fprintf(&b, "# %d for services (limits.service_connections) must fit in it.\n", spec.Config.Limits.ServiceConnections)
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
	b.WriteString("    ]\n")
	agents := append([]User(nil), spec.Agents...)
	sort.Slice(agents, func(i, j int) bool { return agents[i].Agent < agents[j].Agent })
	if len(agents) > 0 {
		b.WriteString("    # Each agent's own subjects, to its own account alone.\n    exports: [\n")
		for _, u := range agents {
			acc := q(AgentAccount(u.Agent))
			svcs, streams := agentImports(u.Agent, spec.Config)
			for _, s := range svcs {
				fmt.Fprintf(&b, "      { service: %s, accounts: [%s] }\n", q(s), acc)
			}
			for _, s := range streams {
				fmt.Fprintf(&b, "      { stream: %s, accounts: [%s] }\n", q(s), acc)
			}
		}
		b.WriteString("    ]\n")
	}
	b.WriteString("  }\n")
	for _, u := range agents {
		fmt.Fprintf(&b, "  # Agent %s alone: no JetStream, only its own requests and outcomes. Its\n", u.Agent)
		b.WriteString("  # connections (limits.agent_connections) are its own, so no other agent\n")
		b.WriteString("  # can take them; each publishes at most limits.max_request_bytes and its\n")
		b.WriteString("  # headers, and holds at most limits.agent_subscriptions subscriptions.\n")
		fmt.Fprintf(&b, "  %s {\n    limits: { max_connections: %d, max_payload: %d, max_subscriptions: %d }\n    users: [\n",
			q(AgentAccount(u.Agent)), lim.MaxConnections, lim.MaxPayload, lim.MaxSubscriptions)
		writeUser(&b, "agent "+u.Agent, u.NKey, Agent(u.Agent, spec.Config))
		b.WriteString("    ]\n    imports: [\n")
		svcs, streams := agentImports(u.Agent, spec.Config)
		for _, s := range svcs {
			fmt.Fprintf(&b, "      { service: { account: %s, subject: %s } }\n", AccountAirlock, q(s))
		}
		for _, s := range streams {
			fmt.Fprintf(&b, "      { stream: { account: %s, subject: %s } }\n", AccountAirlock, q(s))
		}
		b.WriteString("    ]\n  }\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// FitAgents refuses agents agents when their connections
// (limits.agent_connections each) and the services'
// (limits.service_connections) do not fit under limits.bus_connections:
// past it, agents at their bound could leave a service, or another agent,
// without a connection.
func FitAgents(cfg config.Config, agents int) error {
	l := cfg.Limits
	if need := agents*l.AgentConnections + l.ServiceConnections; need > l.BusConnections {
		return fmt.Errorf("%d agents of %d NATS connections each (limits.agent_connections) and %d for services (limits.service_connections) need %d connections, over limits.bus_connections (%d), which admits %d agents: "+
			"raise limits.bus_connections (within the NATS server's open file limit), lower limits.agent_connections, or remove an agent",
			agents, l.AgentConnections, l.ServiceConnections, need, l.BusConnections, MaxAgents(cfg))
	}
	return nil
}

// MaxAgents is how many agents FitAgents admits.
func MaxAgents(cfg config.Config) int {
	l := cfg.Limits
	if l.AgentConnections < 1 || l.BusConnections < l.ServiceConnections {
		return 0
	}
	return (l.BusConnections - l.ServiceConnections) / l.AgentConnections
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
	byVar := map[string]string{}
	for _, a := range agents {
		if err := ids.ValidateAgent(a); err != nil {
			return "", err
		}
		// AgentEnvVar folds case and "-" into "_": two agents it folds alike
		// would share one key, and nats-server refuses a key used twice.
		v := AgentEnvVar(a)
		if other, ok := byVar[v]; ok {
			return "", fmt.Errorf("agents %s and %s would both read their public key from %s (environment variables fold case and '-' into '_'): rename one of them", other, a, v)
		}
		byVar[v] = a
		spec.Agents = append(spec.Agents, User{Agent: a, NKey: v})
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
# each agent in an account of its own (AGENT_<agent>), confined to its own
# calls and bounded on its own (SPEC §6, ARCHITECTURE.md "Trust boundaries").
#
# GENERATED by ` + "`go tool task generate`" + ` from services/shared/natsauth: edit
# that package, not this file (a test checks they agree).
#
# Public keys come from the environment ($AIRLOCK_<ROLE>_NKEY), so this file
# holds no secrets. ` + "`airlock nats keys DIR`" + ` writes a seed file per role and
# prints the variables to set. Add an agent by rendering this file for your
# agents (` + "`airlock nats config --agent NAME ...`" + `), or by copying the
# "AGENT_bot" account and bot's exports in AIRLOCK, and reloading the server
# (SIGHUP). Cluster and TLS settings go in cluster.conf.

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

// Limits are what nats-server enforces on an agent's own account: its
// connections, and each connection's largest publish and subscriptions.
// Config-file users have no limits of their own (nats-server reads
// per-user limits only from JWTs), so the account, which holds that agent
// alone, carries them.
type Limits struct {
	MaxConnections, MaxPayload, MaxSubscriptions int
}

// AgentLimits sizes every agent's account. The largest publish an agent
// has a use for is its largest request, limits.max_request_bytes and its
// headers (config.AgentPublishBytes; the SDKs refuse a larger request
// before publishing, saying why); the server answers anything larger by
// closing the connection, before the intake stores it or any service
// reads it. It was intake.max_msg_size (1 MiB), so that one agent could
// queue a GiB of requests the policy would refuse for their size (R9 F0).
func AgentLimits(cfg config.Config) Limits {
	return Limits{
		MaxConnections:   cfg.Limits.AgentConnections,
		MaxPayload:       cfg.AgentPublishBytes(),
		MaxSubscriptions: cfg.Limits.AgentSubscriptions,
	}
}
