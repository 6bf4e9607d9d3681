// Package natsauth is airlock's NATS trust boundary written once: the
// accounts, the exports and imports between them, and the permissions of
// every service and agent user. `airlock dev` renders it with the keys it
// generates; deploy/nats/airlock.conf is the same rendering with the public
// keys left to the environment (a test keeps the two in step).
//
// Accounts:
//
//   - AIRLOCK holds JetStream (both streams, every bucket) and the services,
//     each with only the subjects it needs.
//   - Each agent has an account of its own, AGENT_<agent> (AgentAccount),
//     with no JetStream at all and its own limits (connections, payload,
//     subscriptions), so that no agent can use up what another needs. It
//     imports from AIRLOCK exactly four things, each narrowed to its own
//     agent token, and AIRLOCK exports each of them to that account alone:
//     publishing a request on airlock.req.<agent>.<call> (answered with the
//     intake stream's ack), cancelling one's own call, reading the last
//     stored events of one's own call (airlock.agent.<agent>.events, which
//     the approval service answers with literal Direct Gets: package
//     lastevents; no JetStream API, whose subjects NATS cannot keep from
//     wildcards), and the republished events on airlock.out.<agent>.>.
//     Because every reply to an agent
//     crosses the account boundary through the import, a reply subject an
//     agent chooses can never land a message in a stream, on a service
//     subject or in another agent's account.
package natsauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/lastevents"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// AccountAirlock holds JetStream and the services.
const AccountAirlock = "AIRLOCK"

// agentAccountPrefix starts the name of every agent's own account.
const agentAccountPrefix = "AGENT_"

// AgentAccount is the NATS account of agent alone, e.g. AGENT_bot. Agent
// ids are [A-Za-z0-9_-] (ids.ValidateAgent), so two agents never share one.
func AgentAccount(agent string) string { return agentAccountPrefix + agent }

// AgentOfAccount is the agent whose own account is named account, and
// false for any other account.
func AgentOfAccount(account string) (string, bool) {
	agent, ok := strings.CutPrefix(account, agentAccountPrefix)
	return agent, ok && agent != ""
}

// Roles of service users. RoleAdmin provisions and runs the operator CLI;
// RoleDev is `airlock dev`, every service in one process (and provisioning).
const (
	RoleAdmin    = "admin"
	RoleDev      = "dev"
	RolePolicy   = "policy"
	RoleApproval = "approval"
	RoleExecutor = "executor"
	RoleAudit    = "audit"
	RoleConsole  = "console"
	RoleGateway  = "gateway"
)

// ServiceRoles are the roles of the separately deployed services, in the
// order they are rendered.
var ServiceRoles = []string{RolePolicy, RoleApproval, RoleExecutor, RoleAudit, RoleConsole, RoleGateway}

// Permissions of one user. An empty allow list with Unrestricted false
// allows nothing.
type Permissions struct {
	Unrestricted   bool
	PublishAllow   []string
	PublishDeny    []string
	SubscribeAllow []string
	// AllowResponses lets the user reply to the requests it receives
	// without a publish permission on the reply subject.
	AllowResponses bool
}

// names the streams, buckets and durables permissions refer to.
type names struct {
	events, intake                                  string
	approvals, executions, policy, grants, console  string
	slackSeen, clientWaits, teamsSeen, inDoubt      string
	policyDurable, approvalDurable, executorDurable string
	auditDurable                                    string
}

func namesOf(cfg config.Config) names {
	return names{
		events: cfg.Stream.Name, intake: cfg.Intake.Name,
		approvals: cfg.Buckets.Approvals, executions: cfg.Buckets.Executions, policy: cfg.Buckets.Policy,
		grants: cfg.Buckets.Grants, console: cfg.Buckets.Console, slackSeen: cfg.Buckets.SlackSeen,
		clientWaits:   cfg.Buckets.ClientWaits,
		teamsSeen:     cfg.Buckets.TeamsSeen,
		inDoubt:       cfg.Buckets.InDoubt,
		policyDurable: "policy", approvalDurable: "approval", executorDurable: "executor", auditDurable: "audit",
	}
}

// durable is what a service needs to run one durable pull consumer.
func durable(stream, name string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + "." + name,
		"$JS.API.CONSUMER.CREATE." + stream + "." + name + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + "." + name,
		"$JS.API.CONSUMER.INFO." + stream + "." + name,
		"$JS.API.CONSUMER.MSG.NEXT." + stream + "." + name,
		"$JS.ACK." + stream + "." + name + ".>",
	}
}

// bucket is what a service needs to read, watch and write one KV bucket.
func bucket(name string) []string {
	s := "KV_" + name
	return []string{
		"$KV." + name + ".>",
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.DIRECT.GET." + s + ".>",
		"$JS.API.STREAM.MSG.GET." + s,
		"$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.DELETE." + s + ".>",
		"$JS.API.CONSUMER.INFO." + s + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + s + ".>",
	}
}

// consolePush is what the approval service's Web Push notifier needs of
// the console bucket: the devices (push.*: list, record a delivery, drop a
// gone one) and the roles of their owners (users.*, people.*: read only);
// no session, token or sign-in counter. Gets are allowed by key only as
// Direct Gets; on a replicated bucket (no Direct Get) the notifier reads
// through watches (bus.KeyedReads), whose consumers name the key.
func consolePush(name string) []string {
	s, k := "KV_"+name, "$KV."+name+"."
	return []string{
		k + "push.>",
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.DIRECT.GET." + s + "." + k + "push.>",
		"$JS.API.DIRECT.GET." + s + "." + k + "users.>",
		"$JS.API.DIRECT.GET." + s + "." + k + "people.>",
		"$JS.API.CONSUMER.CREATE." + s + ".*." + k + "push.>",
		"$JS.API.CONSUMER.DELETE." + s + ".>",
		"$JS.API.CONSUMER.INFO." + s + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + s + ".>",
	}
}

// clientPresence is what the approval service needs of the client-waits
// bucket: to read and watch whether MCP clients wait (c.*), to redraw
// cards; not the gateway's rejoin entries. On a replicated bucket it reads
// a presence through a watch (bus.ReadKey), never STREAM.MSG.GET, which
// cannot be limited to some keys.
func clientPresence(name string) []string {
	s, k := "KV_"+name, "$KV."+name+".c.>"
	return []string{
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.DIRECT.GET." + s + "." + k,
		"$JS.API.CONSUMER.CREATE." + s + ".*." + k,
		"$JS.API.CONSUMER.DELETE." + s + ".>",
		"$JS.API.CONSUMER.INFO." + s + ".>",
	}
}

// readBucket is what a service needs to read single keys of one KV bucket.
func readBucket(name string) []string {
	s := "KV_" + name
	return []string{"$JS.API.STREAM.INFO." + s, "$JS.API.DIRECT.GET." + s + ".>", "$JS.API.STREAM.MSG.GET." + s}
}

// events are publish permissions on event types of every agent's calls.
func events(types ...string) []string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		out = append(out, subject.OfType(t))
	}
	return out
}

// system are publish permissions on system-wide events of some types
// (airlock.evt._system.<id>.<type>).
func system(types ...string) []string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		out = append(out, subject.EventsPrefix+"."+subject.SystemAgent+".*."+t)
	}
	return out
}

// directGet lets a service read the last event of one type of any call.
func directGet(stream string, types ...string) []string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		out = append(out, subject.DirectGet(stream, subject.OfType(t)))
	}
	return out
}

// union is every type of lists once, in the order first named.
func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, t := range l {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// readAll lets a service read any range of a stream with short-lived
// ordered consumers (the console's timeline and feed, the audit back-fill).
func readAll(stream string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.API.DIRECT.GET." + stream + ".>",
	}
}

var (
	inbox    = []string{"_INBOX.>"}
	healthOf = []string{"$SRV.PING.>", "$SRV.PING", "$SRV.STATS"} // the Health page asks every service for its stats
)

// microOf is what a service needs to answer the discovery requests of its
// nats.go/micro service name ($SRV.PING, $SRV.INFO, $SRV.STATS, bare, by
// name and by instance) and no other's: a replica that answers another
// service's ping would pass for it (the approval service takes a replica
// whose ping finds no responder for gone, and announces its calls).
func microOf(name string) []string {
	return []string{"$SRV.PING", "$SRV.INFO", "$SRV.STATS", "$SRV.*." + name, "$SRV.*." + name + ".*"}
}

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Service returns the permissions of a service role. Unknown roles are an error.
func Service(role string, cfg config.Config) (Permissions, error) {
	n := namesOf(cfg)
	switch role {
	case RoleAdmin, RoleDev:
		return Permissions{Unrestricted: true}, nil
	case RolePolicy:
		return Permissions{
			PublishAllow: join(
				durable(n.intake, n.policyDurable),
				[]string{"$JS.API.STREAM.INFO." + n.events},
				events(subject.Requested, subject.Allowed, subject.Denied, subject.ApprovalRequested, subject.Invalid, subject.GrantUsed,
					// an agent's report of a gate-only call it ran, on the
					// call's execution ledger, and a refused report
					subject.Completed, subject.Failed, subject.UnauthorizedAttempt),
				system(subject.PolicyChanged, subject.UnauthorizedAttempt, subject.GrantExpired, subject.ShadowChanged, subject.ShadowDivergence),
				directGet(n.events, subject.Requested, subject.Allowed, subject.Denied, subject.ApprovalRequested, subject.ChangesRequested),
				// the sequence of a call's last event, for compare-and-append
				[]string{subject.DirectGet(n.events, subject.EventsPrefix+".*.*.>")},
				// the same read answered by the stream's leader, which the
				// sequencing of revisions decides on (bus.LastStoredLeader)
				[]string{"$JS.API.STREAM.MSG.GET." + n.events},
				bucket(n.policy), bucket(n.grants), healthOf,
				// the notice (core NATS, not stored) that answers a request
				// its agent's budget kept it from deciding; no other user
				// may publish it, so no agent can forge one
				[]string{subject.OverBudgetNotice("*", "*")},
			),
			SubscribeAllow: join(inbox, microOf(policyapi.Service), []string{subject.APIPrefix + ".policy.>"}),
			AllowResponses: true,
		}, nil
	case RoleApproval:
		return Permissions{
			PublishAllow: join(
				durable(n.events, n.approvalDurable),
				events(append(slices.Clone(subject.ApprovalOutcomes), subject.Notified, subject.UnauthorizedAttempt, subject.VoteCast, subject.DecisionRefused,
					subject.OutcomeResolved)...),
				system(subject.GrantCreated, subject.GrantRevoked, subject.GrantExpired),
				directGet(n.events, union(
					// the sweeper checks that a stored decision reached the stream
					[]string{subject.Approved, subject.Rejected, subject.ChangesRequested, subject.Expired, subject.Canceled},
					// the call of a run that ended in doubt, for its in-doubt task;
					// whether people answered it already, and why a call has none;
					// the call an agent withdraws before it was recorded
					[]string{subject.Allowed, subject.OutcomeResolved, subject.Failed, subject.ApprovalRequested},
					// the last stored events of an agent's call, which it asks
					// for on airlock.agent.<agent>.events (package lastevents)
					lastevents.Readable)...),
				// a call's last event, answered by the stream's leader, after
				// which an agent's withdrawal of a call the policy has not
				// decided is compare-and-appended (bus.LastStoredLeader)
				[]string{"$JS.API.STREAM.MSG.GET." + n.events},
				// how many requests the agent has waiting for the policy (the
				// intake's info, not its messages): only while some wait is
				// such a withdrawal written
				[]string{"$JS.API.STREAM.INFO." + n.intake},
				bucket(n.approvals), bucket(n.grants), bucket(n.inDoubt), bucket(n.slackSeen), bucket(n.teamsSeen), consolePush(n.console),
				clientPresence(n.clientWaits),
				[]string{subject.API("policy", "eval")},
				// a call's preview, asked of the executor when it comes to wait
				// for a person; no other user may ask or answer it
				[]string{subject.API("executor", "preview")}, healthOf,
			),
			SubscribeAllow: join(inbox, microOf(approvalapi.Service), []string{subject.APIPrefix + ".approval.>", subject.AgentCancel("*"), subject.AgentEvents("*")}),
			AllowResponses: true,
		}, nil
	case RoleExecutor:
		return Permissions{
			PublishAllow: join(
				durable(n.events, n.executorDurable),
				events(subject.Started, subject.Completed, subject.Failed, subject.UnauthorizedAttempt),
				directGet(n.events, subject.Started, subject.Completed, subject.Failed),
				// the ledger's last sequence (any executor event of the call),
				// which a compare-and-append follows after a redelivery or a take-over
				[]string{subject.DirectGet(n.events, subject.OfExecution("*", "*"))},
				// the ledger read from the stream's leader, which claims decide on
				// (bus.LastStoredLeader)
				[]string{"$JS.API.STREAM.MSG.GET." + n.events},
				bucket(n.executions),
				// the tools endpoint's change notices, for the MCP gateway and the console
				[]string{subject.ToolsChanged}, healthOf,
			),
			// the tools endpoint (airlock.api.executor.tools), for the MCP
			// gateway, and the preview endpoint, for the approval service
			SubscribeAllow: join(inbox, microOf(executorapi.Service), []string{subject.API("executor", "tools"), subject.API("executor", "preview")}),
			AllowResponses: true,
		}, nil
	case RoleAudit:
		return Permissions{
			// It releases its pinned pull on shutdown (UNPIN) so a standby
			// replica takes over at once.
			PublishAllow: join(durable(n.events, n.auditDurable), readAll(n.events),
				[]string{"$JS.API.CONSUMER.UNPIN." + n.events + "." + n.auditDurable}),
			SubscribeAllow: inbox,
		}, nil
	case RoleConsole:
		return Permissions{
			PublishAllow: join(
				[]string{subject.AllRequests, subject.APIPrefix + ".approval.>", subject.APIPrefix + ".policy.>",
					subject.AgentCancel("*"), // an agent token's cancel (REST)
					// the registry's tools, to warn of a pending call that cannot run
					subject.API("executor", "tools")},
				events(subject.UnauthorizedAttempt),
				system(subject.SignIn, subject.TokenCreated, subject.TokenRevoked),
				readAll(n.events),
				[]string{"$JS.API.STREAM.INFO." + n.intake, "$JS.API.STREAM.MSG.GET." + n.intake},
				bucket(n.console), bucket(n.slackSeen), readBucket(n.clientWaits), bucket(n.teamsSeen), healthOf,
			),
			// the executor's notices that the registry's tools changed (it
			// serves no micro service: the Health page's $SRV.STATS
			// answers come to its inbox)
			SubscribeAllow: join(inbox, []string{subject.AllOut, subject.ToolsChanged}),
		}, nil
	case RoleGateway:
		// The MCP gateway submits for the agents of its endpoints (sealed),
		// follows their calls, answers a self-confirmation as the endpoint's
		// person, cancels a call its client withdrew or cannot confirm, and
		// reads the registry's tools and the policy's dry run (profile
		// filtering of tools/list).
		return Permissions{
			PublishAllow: join(
				[]string{subject.AllRequests, subject.API("approval", "decide"), subject.API("approval", "get"),
					subject.AgentCancel("*"), subject.API("executor", "tools"), subject.API("policy", "eval")},
				[]string{subject.DirectGet(n.events, subject.AllEvents)},
				bucket(n.clientWaits),
			),
			SubscribeAllow: join(inbox, []string{subject.AllOut, subject.ToolsChanged}),
		}, nil
	}
	return Permissions{}, fmt.Errorf("unknown service role %q: use one of admin, dev, %v", role, ServiceRoles)
}

// Agent returns the permissions of agent id in its own account: its own
// requests, its own cancellations, its own calls' last stored events (asked
// of the approval service), its
// own republished events and its own inbox — what its account imports, and
// nothing else, in particular no JetStream API (the account has none) and
// no airlock.api.*.
func Agent(agent string, cfg config.Config) Permissions {
	services, streams := agentImports(agent, cfg)
	return Permissions{
		PublishAllow:   services,
		SubscribeAllow: append(streams, InboxPrefix(agent)+".>"),
	}
}

// InboxPrefix is the reply-subject prefix an agent's connection uses
// (nats.CustomInboxPrefix), so it can receive only its own replies.
func InboxPrefix(agent string) string { return "_INBOX_" + agent }

// agentImports are what AIRLOCK exports to agent's account alone, and
// what that account imports: services (requests answered across the
// boundary) and streams (messages delivered into the account).
func agentImports(agent string, cfg config.Config) (services, streams []string) {
	return []string{
			subject.AgentRequests(agent) + ".*",
			subject.AgentCancel(agent),
			subject.AgentEvents(agent),
		},
		[]string{subject.OutPrefix + "." + agent + ".>"}
}
