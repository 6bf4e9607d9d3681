package config

// Policy configures the policy service.
type Policy struct {
	// Dir holds the .rego files (and data.json); empty means the built-in default policy.
	Dir string `yaml:"dir"`
	// Profiles binds agents to named profiles (seed 001): agent id → profile.
	// The binding is configuration; nothing an agent sends can change it.
	Profiles map[string]string `yaml:"profiles"`
	// Replicas of the decision consumer in this process.
	Workers int `yaml:"workers"`
}

func defaultPolicy() Policy { return Policy{Workers: 4} }
