// Package grant holds what every surface says about a standing grant
// ("always allow"): whether it can still allow a call, its status in words,
// and its scope in words. The policy service applies grants, the approval
// service creates and revokes them; the console, the CLI and Slack describe
// them with this package so that all of them agree on when a grant stops
// applying and on what it allows.
package grant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// Live reports whether g can still allow a call at now: not revoked, not
// expired (a grant expires at its expiry instant), and with a use left when
// its uses are limited. A call revision that already spent a use of g is a
// redelivery and is the policy's concern, not this.
func Live(g *airlockv1.StandingGrant, now time.Time) bool {
	_, live := Status(g, now)
	return live
}

// Expired reports whether g's expiry has come: a grant expires at its
// expiry instant.
func Expired(g *airlockv1.StandingGrant, now time.Time) bool {
	return g.GetExpiresAt() != nil && !now.Before(g.GetExpiresAt().AsTime())
}

// Status is g's state in words ("active", "revoked by bob", "expired",
// "used up") and whether it is live.
func Status(g *airlockv1.StandingGrant, now time.Time) (string, bool) {
	switch {
	case g == nil:
		return "missing", false
	case g.GetRevoked():
		if by := g.GetRevokedBy().GetId(); by != "" {
			return "revoked by " + by, false
		}
		return "revoked", false
	case Expired(g, now):
		return "expired", false
	case g.GetLimitedUses() && g.GetUsesLeft() == 0:
		return "used up", false
	}
	return "active", true
}

// Tool is the grant's tool as "server__tool".
func Tool(g *airlockv1.StandingGrant) string { return calls.ToolName(g.GetServer(), g.GetTool()) }

// Constraint is one argument condition of a grant, for display.
type Constraint struct {
	// Pointer is the JSON pointer of the argument ("/path").
	Pointer string
	// Exact is true when the value must equal Value exactly; Any when it
	// may be anything; otherwise Glob is the pattern a string must match.
	Exact, Any bool
	Value      string // the pinned value as JSON, when Exact
	Glob       string
	// Prefix: the argument is a plain shell command starting with these
	// words.
	Prefix string
	// Range: the argument is a number within this closed range.
	Range *airlockv1.NumberRange
}

// Text is the constraint in words: `/path is exactly "notes.txt"`.
func (c Constraint) Text() string {
	if c.Exact {
		return c.Pointer + " is exactly " + c.Value
	}
	if c.Any {
		return c.Pointer + " may be any value"
	}
	if c.Prefix != "" {
		return c.Pointer + " is a plain command starting with " + strconv.Quote(c.Prefix)
	}
	if c.Range != nil {
		return fmt.Sprintf("%s is a number from %s to %s", c.Pointer, Number(c.Range.GetMin()), Number(c.Range.GetMax()))
	}
	return c.Pointer + " matches " + c.Glob
}

// Number is a number as a person reads it: the shortest form that is
// exactly the value (3, 0.5, 1e+21).
func Number(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// MaxExactInteger is the largest magnitude up to which every integer is a
// distinct JSON number once decoded (2^53): a range end beyond it could not
// tell a call's value from its neighbours.
const MaxExactInteger = 1 << 53

// CheckRange says what is wrong with r as a grant's range, in a sentence,
// or "" when its ends are finite, within ±MaxExactInteger and in order.
func CheckRange(r *airlockv1.NumberRange) string {
	lo, hi := r.GetMin(), r.GetMax()
	switch {
	case r == nil:
		return "it has no ends: give min and max"
	case math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0):
		return "its ends must be finite numbers"
	case math.Abs(lo) > MaxExactInteger || math.Abs(hi) > MaxExactInteger:
		return fmt.Sprintf("its ends must lie within ±%d, where every integer is still exact", int64(MaxExactInteger))
	case lo > hi:
		return fmt.Sprintf("its min %s is above its max %s: give them in order", Number(lo), Number(hi))
	}
	return ""
}

// InRange reports whether v is a JSON number within r, both ends included.
// Only a number matches: a string that reads as one ("5"), a bool, null, a
// missing argument and a non-finite number never do, and neither does
// anything when r itself is not a range CheckRange accepts.
func InRange(r *airlockv1.NumberRange, v *structpb.Value) bool {
	n, ok := v.GetKind().(*structpb.Value_NumberValue)
	if !ok || CheckRange(r) != "" || math.IsNaN(n.NumberValue) || math.IsInf(n.NumberValue, 0) {
		return false
	}
	return r.GetMin() <= n.NumberValue && n.NumberValue <= r.GetMax()
}

// Constraints lists g's argument conditions sorted by pointer.
func Constraints(g *airlockv1.StandingGrant) []Constraint {
	var out []Constraint
	for ptr, v := range g.GetArgumentValues() {
		out = append(out, Constraint{Pointer: ptr, Exact: true, Value: ValueJSON(v)})
	}
	for ptr, glob := range g.GetArgumentGlobs() {
		out = append(out, Constraint{Pointer: ptr, Glob: glob})
	}
	for _, ptr := range g.GetAnyArguments() {
		out = append(out, Constraint{Pointer: ptr, Any: true})
	}
	for ptr, prefix := range g.GetCommandPrefixes() {
		out = append(out, Constraint{Pointer: ptr, Prefix: prefix})
	}
	for ptr, r := range g.GetArgumentRanges() {
		out = append(out, Constraint{Pointer: ptr, Range: r})
	}
	slices.SortFunc(out, func(a, b Constraint) int { return strings.Compare(a.Pointer, b.Pointer) })
	return out
}

// ValueJSON is a pinned value as compact JSON, as a person compares it
// (quotes, escapes and all, so that "a\nb" and "a b" read differently).
// A value JSON cannot hold (a non-finite number) is named, not hidden.
func ValueJSON(v *structpb.Value) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // shown to people, escaped where it is shown
	if err := enc.Encode(v.AsInterface()); err != nil {
		return fmt.Sprintf("(a value JSON cannot show: %v)", err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// Describe is the grant's scope in one sentence, e.g.
// `agent bot may run demo__write_file without asking when /path is exactly
// "notes.txt" and no other argument is given; 10 uses; until 2026-01-02 15:04 UTC`.
func Describe(g *airlockv1.StandingGrant) string {
	var b strings.Builder
	agent := g.GetAgentId()
	if agent == "" {
		agent = "any agent"
	} else {
		agent = "agent " + agent
	}
	fmt.Fprintf(&b, "%s may run %s without asking", agent, Tool(g))
	if p := g.GetOnBehalfOf(); p != "" {
		fmt.Fprintf(&b, " on behalf of %s only", p)
	}
	if d := g.GetArgumentsDigest(); d != "" {
		fmt.Fprintf(&b, " with exactly the arguments it was made from (digest %s)", calls.Cut(d, 12))
	}
	cs := Constraints(g)
	switch {
	case len(cs) == 0 && g.GetArgumentsDigest() != "":
	case len(cs) == 0 && g.GetOnlyListedArguments():
		b.WriteString(" with no arguments at all")
	case len(cs) == 0:
		b.WriteString(" with any arguments")
	default:
		texts := make([]string, len(cs))
		for i, c := range cs {
			texts[i] = c.Text()
		}
		b.WriteString(" when " + strings.Join(texts, " and "))
		if g.GetOnlyListedArguments() {
			b.WriteString(" and no other argument is given")
		} else {
			b.WriteString("; any other argument may take any value")
		}
	}
	if r := g.GetMaxRisk(); r != airlockv1.Risk_RISK_UNSPECIFIED {
		fmt.Fprintf(&b, "; calls the policy rates %s risk at most", calls.RiskName(r))
	}
	if g.GetLimitedUses() {
		fmt.Fprintf(&b, "; %d use(s)", g.GetUsesLeft())
	} else {
		b.WriteString("; unlimited uses")
	}
	if g.GetExpiresAt() != nil {
		fmt.Fprintf(&b, "; until %s", g.GetExpiresAt().AsTime().UTC().Format("2006-01-02 15:04 UTC"))
	} else {
		b.WriteString("; never expires")
	}
	return b.String()
}
