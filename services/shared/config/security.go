package config

// Security holds the keys that authenticate what crosses a trust boundary
// on the bus (see package seal). Each key is given as a file (mode 0600) or,
// for injection from a secret store, as hex; `airlock dev` generates both
// under its data dir.
type Security struct {
	// DecisionKey seals `allowed` and `approved` events. The policy and
	// approval services need it to issue decisions, the executor to check them.
	DecisionKey     string `yaml:"decision_key"`
	DecisionKeyFile string `yaml:"decision_key_file"`
	// FrontendKey seals the requests of front-ends (console, Slack, REST,
	// MCP gateway). Front-ends need it to act for a person or an agent they
	// authenticated; the approval and policy services to check those requests.
	FrontendKey     string `yaml:"frontend_key"`
	FrontendKeyFile string `yaml:"frontend_key_file"`
}

// Intake is the stream agents write their requests to, apart from the
// events stream that only services write.
type Intake struct {
	Name string `yaml:"name"`
	// MaxBytes bounds what agents can store while the policy service is
	// behind; past it new requests are refused, old ones are never dropped.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxMsgSize is the largest message the intake stream stores at all;
	// requests over limits.max_request_bytes but under it, which only a
	// service can publish (an agent's credential publishes at most
	// Config.AgentPublishBytes), get an `invalid` event saying why.
	MaxMsgSize int32 `yaml:"max_msg_size"`
	// MaxPendingPerAgent is how many of one agent's requests may wait for
	// the policy service at once; past it the agent's publish is refused
	// (its other calls, and every other agent, are unaffected). At the
	// largest request (Config.AgentPublishBytes) they must fit in
	// MaxBytes / IntakeAgentsSharing, so that a few agents cannot fill the
	// intake: the stream bounds each agent's count, not its bytes.
	MaxPendingPerAgent int64 `yaml:"max_pending_per_agent"`
}

func defaultIntake() Intake {
	return Intake{Name: "AIRLOCK_REQUESTS", MaxBytes: 1 << 30, MaxMsgSize: 1 << 20, MaxPendingPerAgent: 250}
}
