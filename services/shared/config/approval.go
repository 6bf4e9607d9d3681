package config

import "time"

// Approval configures the approval service.
type Approval struct {
	// DefaultTimeout applies when the policy names none.
	DefaultTimeout time.Duration `yaml:"default_timeout"`
	// SweepInterval is how often deadlines, reminders and escalations are checked.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// Groups maps a group name to its member principals, for approvers like "group:oncall".
	Groups map[string][]string `yaml:"groups"`
}

func defaultApproval() Approval {
	return Approval{DefaultTimeout: 5 * time.Minute, SweepInterval: time.Second}
}
