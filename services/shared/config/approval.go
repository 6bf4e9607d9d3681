package config

import "time"

// Approval configures the approval service.
type Approval struct {
	// DefaultTimeout applies when the policy names none.
	DefaultTimeout time.Duration `yaml:"default_timeout"`
	// SweepInterval is how often deadlines, reminders and escalations are checked.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// Groups maps a group name to its member principals, for approvers like "group:oncall".
	// Console users' groups (console.users[].groups) are added to these.
	Groups map[string][]string `yaml:"groups"`
	// DefaultApprovers decide calls whose policy decision names no approvers.
	DefaultApprovers []string `yaml:"default_approvers"`
	// DefaultNotify are the channels told about a pending call whose policy
	// decision names none.
	DefaultNotify []string `yaml:"default_notify"`
	// NotifyTimeout bounds one delivery to one notification channel, so a
	// slow channel delays nobody else.
	NotifyTimeout time.Duration `yaml:"notify_timeout"`
	// LogNotifier writes every announcement and outcome to the log (a channel named "log").
	LogNotifier bool `yaml:"log_notifier"`
	// Workers handle approval_requested/started/completed/failed events concurrently.
	Workers int `yaml:"workers"`
	// MaxPendingPerAgent is how many of one agent's calls may wait for a
	// person at once; past it a call is canceled at once with a reason the
	// agent reads (intake.max_pending_per_agent bounds those waiting for
	// the policy service).
	MaxPendingPerAgent int `yaml:"max_pending_per_agent"`
	// NotifyBurst is how many of one agent's pending calls a channel
	// announces one by one at once; past it, one more each NotifyRefill,
	// and the others are coalesced into one digest message per
	// NotifyRefill ("agent bot has 12 more calls waiting"): they stay
	// pending in the console, with no card, mail, page or push of their own.
	NotifyBurst int `yaml:"notify_burst"`
	// NotifyRefill is how often an agent past its NotifyBurst gets one more
	// call announced on a channel, and how often that channel gets a digest
	// of the calls it did not announce.
	NotifyRefill time.Duration `yaml:"notify_refill"`
	// PreviewTimeout is how long the approval service waits for a call's
	// preview (asked of the executor) before putting the call to reviewers
	// with "no preview": a slow or failing preview never holds a call up longer.
	PreviewTimeout time.Duration `yaml:"preview_timeout"`
	// EndedRetention is how long an ended call's record stays in the
	// approvals bucket after its last change; then the NATS server removes
	// it (a per-key TTL), so ended calls cannot fill the disk. An older
	// call is read from the events stream and the audit
	// (`airlock audit query --call`).
	EndedRetention time.Duration `yaml:"ended_retention"`
	// MaxBytes bounds the approvals bucket (its MaxBytes, which the NATS
	// server enforces), shared by every agent's records. Past
	// ApprovalRefusalMark of it a new call that would wait for a person is
	// canceled at once with a reason the agent reads, so that the room
	// left still takes every decision on a call already waiting.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxBytesPerAgent bounds the bytes of one agent's records in the
	// approvals bucket (waiting and ended, until they expire): at it the
	// agent's new calls are refused, so one agent cannot bring the bucket
	// to its refusal mark for every other. 0: Config.ApprovalBytesPerAgent.
	MaxBytesPerAgent int64 `yaml:"max_bytes_per_agent"`
	// MaxInDoubtPerAgent is how many open "did it happen?" tasks of one
	// agent's calls the in-doubt bucket keeps. An agent can end calls in
	// doubt at will (a webhook that answers 5xx to its arguments), and only
	// a person closes a task, so past it the agent's next call that ends in
	// doubt gets no task: its failed event still says indeterminate, and
	// the approval service logs and counts it
	// (airlock_in_doubt_untracked_total). Answered tasks count toward no
	// share: they grow only as people answer, and leave after
	// EndedRetention.
	MaxInDoubtPerAgent int `yaml:"max_in_doubt_per_agent"`
	// TakeoverAfter is how long the replica a pending call's record names
	// its announcer must stay off the bus (every ping of it answered "no
	// responders") before another replica announces the call: longer than
	// a reconnect (a NATS server restarting in a rolling upgrade, a network
	// blip), so that a replica alive but cut off for a moment is not taken
	// for gone and the call announced twice.
	TakeoverAfter time.Duration `yaml:"takeover_after"`
}

// ApprovalBytesPerAgent is one agent's share of the approvals bucket in
// bytes: approval.max_bytes_per_agent, or when unset approval.max_bytes /
// DefaultApprovalAgentsSharing, yet room for at least
// MinApprovalAgentRequests of the largest call (within approval.max_bytes).
func (c Config) ApprovalBytesPerAgent() int64 {
	if c.Approval.MaxBytesPerAgent > 0 {
		return c.Approval.MaxBytesPerAgent
	}
	share := max(c.Approval.MaxBytes/DefaultApprovalAgentsSharing, MinApprovalAgentRequests*int64(c.Limits.MaxRequestBytes))
	return min(share, c.Approval.MaxBytes)
}

// DefaultApprovalAgentsSharing is how many agents at their share fill
// approval.max_bytes when approval.max_bytes_per_agent is unset.
const DefaultApprovalAgentsSharing = 16

// MinApprovalAgentRequests is how many of the largest call
// (limits.max_request_bytes) an agent's share of the approvals bucket
// holds at least, so that an agent asking with large arguments still has
// a few calls waiting.
const MinApprovalAgentRequests = 4

// ApprovalRefusalMark is the share of approval.max_bytes past which the
// approval service puts no new call to reviewers: the rest is headroom for
// what the calls already waiting still write (channel references, votes, a
// decision, an edit), none of which may fail half-way.
const ApprovalRefusalMark = 0.9

// MinApprovalBytesPerRequest is how many of the largest call
// (limits.max_request_bytes) approval.max_bytes must hold at least, so that
// the headroom past ApprovalRefusalMark takes at least one more such record.
const MinApprovalBytesPerRequest = 16

func defaultApproval() Approval {
	return Approval{
		DefaultTimeout:     5 * time.Minute,
		SweepInterval:      time.Second,
		DefaultApprovers:   []string{"group:reviewers"},
		DefaultNotify:      []string{"console"},
		NotifyTimeout:      10 * time.Second,
		LogNotifier:        true,
		Workers:            8,
		MaxPendingPerAgent: 100,
		MaxInDoubtPerAgent: 256,
		PreviewTimeout:     4 * time.Second,
		NotifyBurst:        10,
		NotifyRefill:       10 * time.Second,
		EndedRetention:     7 * 24 * time.Hour,
		MaxBytes:           1 << 30,
		TakeoverAfter:      30 * time.Second,
	}
}
