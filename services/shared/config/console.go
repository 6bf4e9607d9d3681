package config

// Console configures the web console and REST API.
type Console struct {
	// Users who may sign in.
	Users []User `yaml:"users"`
}

// User is a local console account.
type User struct {
	Name string `yaml:"name"`
	// PasswordHash is a bcrypt hash (airlock users hash-password prints one).
	PasswordHash string   `yaml:"password_hash"`
	Roles        []string `yaml:"roles"`
	Groups       []string `yaml:"groups"`
}

func defaultConsole() Console { return Console{} }
