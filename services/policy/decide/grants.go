package decide

import (
	"slices"
	"strings"
	"time"

	"github.com/gobwas/glob"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// UseKey is how a call revision is recorded in StandingGrant.used_by:
// its callref key, which includes the agent.
func UseKey(call *airlockv1.ToolCall) string { return callref.Of(call).Key() }

// GrantApplies reports whether grant g may turn an ask about call into an
// allow at time now: not revoked, not expired, the same agent, server and
// tool, made for the grant's person when it has one, every argument glob
// and command prefix matching, every pinned argument value equal, every
// ranged argument a number within its range (grant.InRange), no
// argument the grant does not name when it says so, the exact arguments
// when it is pinned to them, the call no riskier (as the policy rates it in
// d) than the grant was made for (GrantMaxRisk), and a use left — or this
// very call revision already spent one (a redelivery).
func GrantApplies(g *airlockv1.StandingGrant, call *airlockv1.ToolCall, d *airlockv1.Decision, now time.Time) bool {
	if g == nil || g.Revoked {
		return false
	}
	// A grant made for routine calls never answers for a riskier one in
	// its scope (a key file in an approved directory): a person decides.
	if d.GetRisk() > GrantMaxRisk(g) {
		return false
	}
	// A grant answers one rule's ask for one approver; it never stands in
	// for a quorum, for another rule, or for the grantor's own calls.
	if g.RuleId != d.GetRuleId() || d.GetQuorum() > 1 {
		return false
	}
	// The grantor's own calls: only under a rule that asks the requester to
	// confirm their own calls, whose remembered decision it then is.
	if by := g.GetCreatedBy().GetId(); by != "" && by == call.GetOnBehalfOf() && !calls.RequesterMayDecide(call, d, by) {
		return false
	}
	// A requester's remembered decision allows only their own calls.
	if g.OnBehalfOf != "" && g.OnBehalfOf != call.GetOnBehalfOf() {
		return false
	}
	if grant.Expired(g, now) {
		return false
	}
	if g.AgentId != call.GetAgentId() || g.Server != call.GetServer() || g.Tool != call.GetTool() {
		return false
	}
	for ptr, pattern := range g.ArgumentGlobs {
		if !argMatches(call.GetArguments(), ptr, pattern) {
			return false
		}
	}
	for ptr, want := range g.ArgumentValues {
		if got := calls.Arg(call.GetArguments(), ptr); got == nil || !proto.Equal(got, want) {
			return false
		}
	}
	for ptr, r := range g.ArgumentRanges {
		if !grant.InRange(r, calls.Arg(call.GetArguments(), ptr)) {
			return false
		}
	}
	if g.OnlyListedArguments && !onlyListed(call.GetArguments(), g) {
		return false
	}
	for ptr, prefix := range g.CommandPrefixes {
		v, ok := calls.StringArg(call.GetArguments(), ptr)
		if !ok || !calls.CommandHasPrefix(v, prefix) {
			return false
		}
	}
	if g.ArgumentsDigest != "" {
		if d, err := canon.Digest(call.GetArguments()); err != nil || d != g.ArgumentsDigest {
			return false
		}
	}
	if slices.Contains(g.UsedBy, UseKey(call)) {
		return true
	}
	return grant.Live(g, now)
}

// CompareGrants orders standing grants as the policy service tries them on
// an ask: unlimited ones first (a limited grant's uses are kept for what
// only it answers), then by id (key, given apart: a grant may have been
// stored without its id), so every replica, and a replay, picks the same.
func CompareGrants(a, b *airlockv1.StandingGrant, keyA, keyB string) int {
	if a.GetLimitedUses() != b.GetLimitedUses() {
		if a.GetLimitedUses() {
			return 1
		}
		return -1
	}
	return strings.Compare(keyA, keyB)
}

// GrantMaxRisk is the highest risk of call g may answer: its max_risk, or
// for a grant made before grants recorded it, medium — the policy's default
// risk, so such a grant keeps answering the routine calls it was made for
// and never a call a rule rates high or critical.
func GrantMaxRisk(g *airlockv1.StandingGrant) airlockv1.Risk {
	if r := g.GetMaxRisk(); r != airlockv1.Risk_RISK_UNSPECIFIED {
		return r
	}
	return airlockv1.Risk_RISK_MEDIUM
}

// argMatches applies the same rule as the Rego policy to an allow rule's
// argument: the value at the JSON pointer is a string with no "." or ".."
// segments, not ending in a separator (the directory itself is not under
// it), matching the glob with "/" as separator.
func argMatches(args *structpb.Struct, ptr, pattern string) bool {
	v := calls.Arg(args, ptr)
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok || !calls.CleanPath(s.StringValue) || calls.EndsInSeparator(s.StringValue) {
		return false
	}
	g, err := compileGlob(pattern, []rune{'/'})
	return err == nil && g.Match(s.StringValue)
}

// onlyListed reports whether every top-level argument of args is named by
// one of g's constraints (the first token of its pointer).
func onlyListed(args *structpb.Struct, g *airlockv1.StandingGrant) bool {
	named := map[string]bool{}
	name := func(ptr string) { named[calls.PointerTokens(ptr)[0]] = true }
	for ptr := range g.ArgumentGlobs {
		name(ptr)
	}
	for ptr := range g.ArgumentValues {
		name(ptr)
	}
	for ptr := range g.CommandPrefixes {
		name(ptr)
	}
	for ptr := range g.ArgumentRanges {
		name(ptr)
	}
	for _, ptr := range g.AnyArguments {
		name(ptr)
	}
	for k := range args.GetFields() {
		if !named[k] {
			return false
		}
	}
	return true
}

func compileGlob(pattern string, sep []rune) (*glob.Pattern, error) {
	return glob.Compile(pattern, sep...)
}
