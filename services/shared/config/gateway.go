package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Gateway configures the MCP gateway: each endpoint is an MCP server that
// any MCP client can use, bound by this configuration (and nothing the
// client or the model sends) to one agent identity, one profile and the
// person the calls act for.
type Gateway struct {
	Endpoints []GatewayEndpoint `yaml:"endpoints"`
	// Heartbeat is how often a tools/call waiting for a person tells its
	// client it is still alive (a progress notification when the client
	// gave a progress token, else a ping on the call's stream); default
	// 15s, at most 30s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// SessionTimeout closes an HTTP session without requests for that long
	// (default 1h); the client then starts a new one. A client told to
	// call again gets the call's outcome within about as long after the
	// call ended; later, the same call is a new call.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// MaxSessions bounds the live HTTP sessions of one endpoint (one bearer
	// token; default 64). A new session past it closes the endpoint's
	// session that has gone longest without a request, if none is in
	// flight in it; when every one is busy, the new one is refused.
	MaxSessions int `yaml:"max_sessions"`
	// MaxRequests bounds the HTTP requests (POSTs) one endpoint serves at
	// once, in both protocol eras (default 256): a waiting tools/call holds
	// its request until the call ends, and the 2026-07-28 protocol has no
	// sessions for MaxSessions to count. Past it a request is refused
	// (HTTP 503, Retry-After) and the client tries again later.
	MaxRequests int `yaml:"max_requests"`
	// RunCodeMaxRunning bounds the run_code scripts the whole gateway runs
	// at once, over all its endpoints (each runs in a child process with
	// its own memory and CPU limits); default 8, or one per agent with
	// run_code when there are more. The places are shared fairly: each
	// agent with run_code is sure of RunCodeMaxRunning / agents of them,
	// and borrows more only while the others' unused shares stay free, so
	// no agent's scripts can leave another's none.
	RunCodeMaxRunning int `yaml:"run_code_max_running"`
}

// DefaultRunCodeMaxRunning is Gateway.RunCodeMaxRunning when it is not set
// (and there are at most as many agents with run_code).
const DefaultRunCodeMaxRunning = 8

// ScriptsAtOnce is RunCodeMaxRunning with its default.
func (g Gateway) ScriptsAtOnce() int {
	if g.RunCodeMaxRunning <= 0 {
		return max(DefaultRunCodeMaxRunning, len(g.RunCodeAgents()))
	}
	return g.RunCodeMaxRunning
}

// RunCodeAgents are the agents of the endpoints with run_code enabled,
// each once, in the order of the endpoints.
func (g Gateway) RunCodeAgents() []string {
	var out []string
	for _, e := range g.Endpoints {
		if e.RunCode.Enabled && !slices.Contains(out, e.Agent) {
			out = append(out, e.Agent)
		}
	}
	return out
}

func defaultGateway() Gateway {
	return Gateway{Heartbeat: 15 * time.Second, SessionTimeout: time.Hour, MaxSessions: 64, MaxRequests: 256}
}

// GatewayEndpoint is one MCP endpoint of the gateway.
type GatewayEndpoint struct {
	// Name is [A-Za-z0-9_-]{1,64}: `airlock gateway --stdio --endpoint NAME`.
	Name string `yaml:"name"`
	// Path is the HTTP path of the endpoint (default /mcp/<name>).
	Path string `yaml:"path"`
	// Agent is the agent id every call of the endpoint is submitted as.
	Agent string `yaml:"agent"`
	// Profile (seed 001) the agent is bound to; the policy service applies
	// it to every call of the agent (it becomes policy.profiles[agent]), and
	// tools/list leaves out the tools it denies outright.
	Profile string `yaml:"profile"`
	// OnBehalfOf is the person the endpoint's calls act for, vouched for by
	// the gateway: they cannot approve its calls, except where a rule names
	// "requester" as approver (self-confirmation), when they confirm them
	// through MCP elicitation.
	OnBehalfOf string `yaml:"on_behalf_of"`
	// Token authenticates HTTP clients (Authorization: Bearer <token>);
	// prefer TokenFile. An endpoint with neither is served over stdio only.
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	// ElicitationFallback is what happens to a call its person could
	// confirm when the client cannot ask them (no elicitation support):
	// "deny" (default) cancels the call; "wait" leaves it to the other
	// channels (console, Slack).
	ElicitationFallback string `yaml:"elicitation_fallback"`
	// AnswerWithin bounds how long a tools/call waiting for a person is
	// held open (default 45s, below the 60 s most MCP clients wait): then
	// the client is answered that the call waits for approval, and the
	// same call repeated in the same session returns its outcome.
	AnswerWithin time.Duration `yaml:"answer_within"`
	// AbandonAfter cancels a call still waiting for a person when no
	// client has waited for it for this long (0, the default: it stays
	// pending until its deadline, and a reviewer sees that nobody waits).
	AbandonAfter time.Duration `yaml:"abandon_after"`
	// RunCode offers the endpoint's client the run_code tool (code mode,
	// seed 001): a script calling the endpoint's tools, each call decided by
	// policy as if the client made it. Off unless enabled.
	RunCode RunCode `yaml:"run_code"`
}

// RunCode configures an endpoint's run_code tool; zero limits take the
// sandbox's defaults (10m timeout, 5s busy, 50 calls, 16 KiB script (at most: the audit records a script whole),
// 64 KiB output, 128 MiB memory growth, 4 scripts running at once).
type RunCode struct {
	Enabled bool `yaml:"enabled"`
	// Timeout bounds a whole run, waits for people included; Busy the time
	// the script itself runs between its awaits.
	Timeout time.Duration `yaml:"timeout"`
	Busy    time.Duration `yaml:"busy"`
	// MaxCalls bounds the tool calls of one run.
	MaxCalls       int `yaml:"max_calls"`
	MaxScriptBytes int `yaml:"max_script_bytes"`
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxMemoryMB bounds how much the heap may grow while a script runs.
	MaxMemoryMB int `yaml:"max_memory_mb"`
	// MaxRunning bounds the scripts the endpoint runs at once (each in a
	// child process with its own memory); more are refused until one ends.
	MaxRunning int `yaml:"max_running"`
}

// DefaultMaxRunning is RunCode.MaxRunning when it is not set.
const DefaultMaxRunning = 4

// Running is MaxRunning with its default.
func (r RunCode) Running() int {
	if r.MaxRunning <= 0 {
		return DefaultMaxRunning
	}
	return r.MaxRunning
}

// DefaultAnswerWithin is AnswerWithin when it is not set.
const DefaultAnswerWithin = 45 * time.Second

// AnswerBound is AnswerWithin with its default.
func (e GatewayEndpoint) AnswerBound() time.Duration {
	if e.AnswerWithin == 0 {
		return DefaultAnswerWithin
	}
	return e.AnswerWithin
}

// Elicitation fallbacks.
const (
	FallbackDeny = "deny"
	FallbackWait = "wait"
)

// HTTPPath is the endpoint's HTTP path.
func (e GatewayEndpoint) HTTPPath() string {
	if e.Path != "" {
		return e.Path
	}
	return "/mcp/" + e.Name
}

// Fallback is ElicitationFallback with its default.
func (e GatewayEndpoint) Fallback() string {
	if e.ElicitationFallback == "" {
		return FallbackDeny
	}
	return e.ElicitationFallback
}

// Endpoint returns the endpoint named name.
func (g Gateway) Endpoint(name string) (GatewayEndpoint, bool) {
	for _, e := range g.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return GatewayEndpoint{}, false
}

// Names lists the endpoints' names.
func (g Gateway) Names() []string {
	out := make([]string, 0, len(g.Endpoints))
	for _, e := range g.Endpoints {
		out = append(out, e.Name)
	}
	return out
}

var (
	gatewayName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	gatewayPath = regexp.MustCompile(`^/[A-Za-z0-9_./-]*$`)
)

func (g Gateway) validate() []error {
	var errs []error
	if g.Heartbeat <= 0 || g.Heartbeat > 30*time.Second {
		errs = append(errs, fmt.Errorf("gateway.heartbeat is %s: set a positive duration of at most 30s, or clients close streams that stay quiet", g.Heartbeat))
	}
	if g.SessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("gateway.session_timeout is %s: set a positive duration such as 1h", g.SessionTimeout))
	}
	if g.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("gateway.max_sessions is %d: set how many HTTP sessions one endpoint may hold at once, such as 64", g.MaxSessions))
	}
	if g.MaxRequests < 1 {
		errs = append(errs, fmt.Errorf("gateway.max_requests is %d: set how many requests one endpoint may serve at once, such as 256", g.MaxRequests))
	}
	if agents := g.RunCodeAgents(); g.RunCodeMaxRunning > 0 && g.RunCodeMaxRunning < len(agents) {
		errs = append(errs, fmt.Errorf("gateway.run_code_max_running is %d, fewer than the %d agents whose endpoints enable run_code: set it to at least %d (each agent is sure of a share of the places, so one agent's scripts never leave another's none)",
			g.RunCodeMaxRunning, len(agents), len(agents)))
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for i, e := range g.Endpoints {
		where := fmt.Sprintf("gateway.endpoints[%d] (%s)", i, e.Name)
		switch {
		case !gatewayName.MatchString(e.Name):
			errs = append(errs, fmt.Errorf("%s: name must be 1-64 characters from A-Z a-z 0-9 _ -", where))
		case names[e.Name]:
			errs = append(errs, fmt.Errorf("%s: the name is used by another endpoint", where))
		}
		names[e.Name] = true
		if p := e.HTTPPath(); !gatewayPath.MatchString(p) || strings.Contains(p, "..") || paths[p] {
			errs = append(errs, fmt.Errorf("%s: path %q must start with / and be unique, from A-Z a-z 0-9 _ . / -", where, p))
		} else {
			paths[p] = true
		}
		if !gatewayName.MatchString(e.Agent) || strings.HasPrefix(e.Agent, "_") {
			errs = append(errs, fmt.Errorf("%s: agent %q must be an agent id (1-64 characters from A-Z a-z 0-9 _ -, not starting with _)", where, e.Agent))
		}
		if e.Token != "" && e.TokenFile != "" {
			errs = append(errs, fmt.Errorf("%s: set token or token_file, not both", where))
		}
		if e.Token != "" && len(e.Token) < 16 {
			errs = append(errs, fmt.Errorf("%s: the token is too short to be secret: use at least 16 random characters (e.g. `openssl rand -hex 24`)", where))
		}
		if e.AnswerWithin < 0 || e.AnswerWithin > 10*time.Minute {
			errs = append(errs, fmt.Errorf("%s: answer_within is %s: set a duration between 1s and 10m, below the time your MCP clients wait for an answer (most wait 60s)", where, e.AnswerWithin))
		}
		if e.AbandonAfter < 0 {
			errs = append(errs, fmt.Errorf("%s: abandon_after is %s: set 0 (keep a call nobody waits for pending until its deadline) or a positive duration such as 30m", where, e.AbandonAfter))
		}
		if f := e.ElicitationFallback; f != "" && f != FallbackDeny && f != FallbackWait {
			errs = append(errs, fmt.Errorf("%s: elicitation_fallback is %q: use deny or wait", where, f))
		}
	}
	return errs
}

// ApplyGatewayBindings makes the gateway's endpoints part of the policy's
// configuration: an endpoint's profile binds its agent (policy.profiles),
// so the policy service applies it to every call of the agent, by whatever
// route the call comes. A conflicting binding is an error: an agent has one
// profile. Load calls it; code that builds a Config by hand calls it too.
func (c *Config) ApplyGatewayBindings() error {
	var errs []error
	for _, e := range c.Gateway.Endpoints {
		if e.Profile == "" {
			continue
		}
		if old, ok := c.Policy.Profiles[e.Agent]; ok && old != e.Profile {
			errs = append(errs, fmt.Errorf("gateway endpoint %s binds agent %s to profile %q, but policy.profiles (or another endpoint) binds it to %q: an agent has one profile; give the endpoint its own agent",
				e.Name, e.Agent, e.Profile, old))
			continue
		}
		if c.Policy.Profiles == nil {
			c.Policy.Profiles = map[string]string{}
		}
		c.Policy.Profiles[e.Agent] = e.Profile
	}
	for _, e := range c.Gateway.Endpoints {
		if p, ok := c.Policy.OnBehalfOf[e.Agent]; ok && p != "" && e.OnBehalfOf != "" && p != e.OnBehalfOf {
			errs = append(errs, fmt.Errorf("gateway endpoint %s acts for %q, but policy.on_behalf_of binds agent %s to %q (which wins): make them agree, or give the endpoint its own agent",
				e.Name, e.OnBehalfOf, e.Agent, p))
		}
	}
	return errors.Join(errs...)
}
