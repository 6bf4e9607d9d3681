package config

import "time"

// Policy configures the policy service.
type Policy struct {
	// Dir holds the .rego files (and data.json); empty means the built-in default policy.
	// Changes to the files are picked up without a restart (see ReloadInterval).
	Dir string `yaml:"dir"`
	// Profiles binds agents to named profiles (seed 001): agent id → profile;
	// "*" binds every agent without a binding of its own.
	// The binding is configuration; nothing an agent sends can change it.
	Profiles map[string]string `yaml:"profiles"`
	// OnBehalfOf binds agents to the person they act for: agent id →
	// principal. A bound agent's calls always act for that principal,
	// whatever the agent sends; an unbound agent's own claim only ever
	// restricts (that person cannot approve) and never lets anyone confirm
	// their own call.
	OnBehalfOf map[string]string `yaml:"on_behalf_of"`
	// Suggest tunes the suggestions learned from people's decisions.
	Suggest Suggest `yaml:"suggest"`
	// Replicas of the decision consumer in this process (default 32). A
	// decision takes microseconds of CPU but waits a stream round trip for
	// its PubAck, so many more workers than cores keep the CPU busy.
	Workers int `yaml:"workers"`
	// ReloadInterval is how often Dir is checked for changed files (default 1s).
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

func defaultPolicy() Policy { return Policy{Workers: 32, ReloadInterval: time.Second} }
