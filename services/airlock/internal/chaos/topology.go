// Package chaos is `airlock chaos`: it starts airlock's production layout on
// loopback — a 3-node NATS cluster with the shipped accounts and per-service
// users, R3 streams and buckets provisioned by the admin, two replicas of
// every service as separate `airlock serve` processes each holding only its
// own NATS seed and seal keys, a private ClickHouse, a webhook tool server and
// a fake of Slack's Web API — drives a bounded mixed load through agents (the
// Go SDK), MCP clients (through the gateway replicas), reviewers (the
// console's REST API with personal tokens, signed Slack interaction posts)
// and calls left to expire, while a seeded fault
// schedule kills, pauses and restarts the pieces; then it checks from the
// stream, ClickHouse and the tool server that nothing was lost or run twice,
// and prints a report.
package chaos

import "github.com/airlock-gate/airlock/services/shared/natsauth"

// Service is one airlock service as production deploys it: the NATS user it
// connects as, how many replicas run, and which secrets it holds. The same
// list drives `airlock chaos` and is what deploy/ (Kubernetes manifests and
// the compose file) must match; a test keeps them in step.
type Service struct {
	// Name is the argument of `airlock serve`.
	Name string
	// Role is its NATS user (natsauth); its seed file is <role>.nk.
	Role     string
	Replicas int
	// DecisionKey and FrontendKey: which seal key files it is given.
	DecisionKey, FrontendKey bool
	// AuditKey: the audit chain's key file (audit.key_file).
	AuditKey bool
	// ClickHouse: it is given the ClickHouse DSN.
	ClickHouse bool
	// SlackBot: the Slack bot token (posts and updates cards);
	// SlackSigning: the signing secret (serves /slack/interactions).
	SlackBot, SlackSigning bool
	// ToolSecrets: the secrets of the tool registry's webhooks.
	ToolSecrets bool
}

// Topology is every service of the production layout.
func Topology() []Service {
	return []Service{
		{Name: "policy", Role: natsauth.RolePolicy, Replicas: 2, DecisionKey: true, FrontendKey: true},
		{Name: "approval", Role: natsauth.RoleApproval, Replicas: 2, DecisionKey: true, FrontendKey: true, SlackBot: true},
		{Name: "executor", Role: natsauth.RoleExecutor, Replicas: 2, DecisionKey: true, ToolSecrets: true},
		{Name: "audit", Role: natsauth.RoleAudit, Replicas: 2, ClickHouse: true, AuditKey: true},
		{Name: "console", Role: natsauth.RoleConsole, Replicas: 2, FrontendKey: true, SlackBot: true, SlackSigning: true},
		// Its endpoints' bearer token files are named by the configuration
		// (gateway.endpoints[].token_file) and given to it alone.
		{Name: "gateway", Role: natsauth.RoleGateway, Replicas: 2, FrontendKey: true},
	}
}

// service is the named service of the topology.
func service(name string) Service {
	for _, s := range Topology() {
		if s.Name == name {
			return s
		}
	}
	panic("no service " + name)
}

// NATSNodes is the size of the NATS cluster; streams and buckets are R3.
const NATSNodes = 3

// File names of the secrets, the same in the run directory's keys/ and in
// deploy/ (Secrets in Kubernetes, secrets in compose).
const (
	DecisionKeyFile = "decision.key"
	FrontendKeyFile = "frontend.key"
	AuditKeyFile    = "audit.key"
)

// SeedFile is the nkey seed file name of a role.
func SeedFile(role string) string { return role + ".nk" }
