// Package suggest learns from what people decided: it groups the calls
// reviewers approved by agent, tool, asking rule and argument shape, and
// proposes for each group that was always approved the narrowest standing
// grant that covers it. A proposal is only a proposal: Prove replays it over
// the recorded history before anyone sees it, and a person adopts it (or
// not) through the approval service's grant machinery.
//
// Why a standing grant and not a run-time rule: a grant is pinned to one
// agent, one tool and the rule whose ask it answers, holds exact values of
// any JSON type, path globs, command prefixes and numeric ranges, and never
// stands in for a quorum or a stricter rule — so what is adopted can never
// reach further than the evidence, nor another agent.
//
// Propose is pure (no broker, no database); Load reads the audit store.
package suggest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	grantdesc "github.com/airlock-gate/airlock/services/shared/grant"
)

// Outcomes of a decided call, as Load reads them from the trail.
const (
	Approved         = "approved"          // approved as asked, without an edit
	Edited           = "edited"            // approved after a reviewer edited the arguments
	Rejected         = "rejected"          // a reviewer rejected it
	ChangesRequested = "changes_requested" // sent back for changes
	Expired          = "expired"           // nobody decided in time
	Canceled         = "canceled"          // withdrawn before a decision
	Denied           = "denied"            // the policy denied it
	Allowed          = "allowed"           // the policy (or a grant) allowed it: no person was asked
	Pending          = "pending"           // asked, not decided yet
)

// Config tunes Propose. The zero value takes the defaults.
type Config struct {
	// MinApprovals: approvals a group needs before anything is proposed (default 5).
	MinApprovals int
	// MinApprovers: distinct people among them (default 2). A group whose
	// every approval was the requester confirming their own call under a
	// rule that lets them counts as well (self-confirmation).
	MinApprovers int
	// Risks beyond low and medium that may be proposed ("high",
	// "critical"); none by default.
	AllowRisks []string
	// MaxAlternatives: a text argument that took at most this many values
	// is pinned to them (a glob {a,b}); more and the group is not
	// proposed, unless the argument holds free content (default 5).
	MaxAlternatives int
	// MinPathDepth: directories a directory must have before approved
	// paths in it are widened to a glob (default 2): /home/* is never
	// proposed, however many files under /home were approved.
	MinPathDepth int
	// MinPathsPerDirectory: distinct approved paths a directory must
	// directly hold before the grant allows any other file directly in it
	// (default 3). Paths in other directories stay exact values: a
	// directory that merely is the approved paths' common ancestor is never
	// widened to.
	MinPathsPerDirectory int
}

func (c Config) withDefaults() Config {
	if c.MinApprovals <= 0 {
		c.MinApprovals = 5
	}
	if c.MinApprovers <= 0 {
		c.MinApprovers = 2
	}
	if c.MaxAlternatives <= 0 {
		c.MaxAlternatives = 5
	}
	if c.MinPathDepth <= 0 {
		c.MinPathDepth = 2
	}
	if c.MinPathsPerDirectory <= 0 {
		c.MinPathsPerDirectory = 3
	}
	return c
}

// Call is one decided call revision as the trail recorded it.
type Call struct {
	Agent    string
	CallID   string
	Revision uint32
	Server   string
	Tool     string
	// Args are the arguments as the policy decided them (the audit copy).
	Args       *structpb.Struct
	OnBehalfOf string
	// Verified: on_behalf_of came from a binding airlock trusts.
	Verified bool
	// Decision of the policy when it asked (rule, risk, quorum, approvers, redact).
	Decision *airlockv1.Decision
	AskedAt  time.Time
	Outcome  string
	// DecidedAt: when the outcome was recorded.
	DecidedAt time.Time
	// Approvers: who approved it (the votes), for an approved call.
	Approvers []string
	// Redacted: the policy masked some argument in the audit copy.
	Redacted bool
}

// Key is the call revision's key, as the replay and every other service
// name it (callref).
func (c Call) Key() string { return callref.Ref{Agent: c.Agent, Call: c.CallID, Rev: c.Revision}.Key() }

// TimeToDecide is how long the call waited for its decision.
func (c Call) TimeToDecide() time.Duration {
	if c.AskedAt.IsZero() || c.DecidedAt.Before(c.AskedAt) {
		return 0
	}
	return c.DecidedAt.Sub(c.AskedAt)
}

// Evidence is one approval a suggestion stands on.
type Evidence struct {
	Call         string        `json:"call_id"`
	Revision     uint32        `json:"revision"`
	AskedAt      time.Time     `json:"asked_at"`
	Approvers    []string      `json:"approvers"`
	TimeToDecide time.Duration `json:"time_to_decide_ns"`
	// Args are the approved arguments as canonical JSON (agent-chosen text:
	// escape it wherever it is shown).
	Args string `json:"arguments"`
}

// Suggestion is a proposed standing grant and the evidence for it.
type Suggestion struct {
	// ID names the evidence: the group and the scope drawn from it. The
	// grant made from it is "grant_<ID>", so the trail ties the two.
	ID     string `json:"id"`
	Agent  string `json:"agent_id"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// RuleID is the rule whose ask the grant answers (and only that one).
	RuleID string `json:"rule_id"`
	Risk   string `json:"risk"`
	// Requester is set for a group of calls made for a person who may
	// confirm them (self-confirmation): only they may adopt it, so the grant
	// allows only calls made for them.
	Requester string `json:"requester,omitempty"`
	// Grant is the scope as it would be stored (no id, creator or time
	// yet); GrantJSON is the same as protojson, for the JSON report.
	Grant     *airlockv1.StandingGrant `json:"-"`
	GrantJSON json.RawMessage          `json:"grant"`
	// Scope is the grant in one sentence (grant.Describe).
	Scope string `json:"scope"`
	// Widened says, per argument, where the scope goes beyond the exact
	// approved values (a directory glob, a command prefix, free content).
	Widened   []string   `json:"widened,omitempty"`
	Approvals int        `json:"approvals"`
	Approvers []string   `json:"approvers"`
	Evidence  []Evidence `json:"evidence"`
	// MedianTimeToDecide of the approvals.
	MedianTimeToDecide time.Duration `json:"median_time_to_decide_ns"`
	// FromCall is the newest of the riskiest approved calls: adopting
	// creates the grant from it (so its max_risk is the group's highest).
	FromCall     string `json:"from_call_id"`
	FromRevision uint32 `json:"from_revision"`
	// Proof is the replay's verdict, set by Prove.
	Proof *Proof `json:"proof,omitempty"`
	// probes are calls like the approved ones at paths the grant must not
	// allow (probePaths); Prove asks the policy in force about each.
	probes []Probe
}

// Probe is a call Prove checks the grant does not allow: the first
// approved call's arguments with the path at Pointer replaced by Path.
type Probe struct {
	Pointer string           `json:"pointer"`
	Path    string           `json:"path"`
	Args    *structpb.Struct `json:"-"`
}

// probeCalls are the probes for the directories each path argument was
// widened to (probePaths), leaving out any path the grant rightly allows:
// an approved path, or a visible file directly in a widened directory.
func probeCalls(template *structpb.Struct, approved []Call, widenedTo map[string][]string) []Probe {
	var out []Probe
	for _, ptr := range slices.Sorted(maps.Keys(widenedTo)) {
		dirs := widenedTo[ptr]
		seen := map[string]bool{}
		for _, c := range approved {
			if v, ok := calls.StringArg(c.Args, ptr); ok {
				seen[v] = true
			}
		}
		for _, dir := range dirs {
			for _, p := range probePaths(dir) {
				if parent, file := splitPath(p); seen[p] || slices.Contains(dirs, parent) && !strings.HasPrefix(file, ".") {
					continue
				}
				seen[p] = true
				args := proto.Clone(template).(*structpb.Struct)
				args.Fields[calls.PointerTokens(ptr)[0]] = structpb.NewStringValue(p)
				out = append(out, Probe{Pointer: ptr, Path: p, Args: args})
			}
		}
	}
	return out
}

// Skipped is a group that was not proposed, and why.
type Skipped struct {
	Agent string `json:"agent_id"`
	Tool  string `json:"tool"`
	Calls int    `json:"calls"`
	Why   string `json:"why"`
}

// Propose groups the decided calls and proposes the narrowest grant for
// each group that qualifies (Config). A group is one agent's: no call of
// another agent ever counts toward it or falls under what it proposes.
// Suggestions come sorted by approvals, most first.
func Propose(decided []Call, cfg Config) ([]Suggestion, []Skipped) {
	cfg = cfg.withDefaults()
	groups := map[string][]Call{}
	var order []string
	for _, c := range decided {
		if c.Outcome == Allowed || c.Outcome == Pending || c.Decision.GetAction() != airlockv1.Action_ACTION_ASK {
			continue // no person was asked (yet): nothing to learn
		}
		k := groupKey(c)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	var out []Suggestion
	var skipped []Skipped
	for _, k := range order {
		g := groups[k]
		s, why := propose(g, cfg)
		if why != "" {
			skipped = append(skipped, Skipped{Agent: g[0].Agent, Tool: calls.ToolName(g[0].Server, g[0].Tool), Calls: len(g), Why: why})
			continue
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Approvals != out[j].Approvals {
			return out[i].Approvals > out[j].Approvals
		}
		return out[i].ID < out[j].ID
	})
	return out, skipped
}

// groupKey: agent, tool, the rule that asked, the requester when they
// confirmed it themselves, and the shape of the arguments (each top-level
// name with the kind of its value).
func groupKey(c Call) string {
	var shape []string
	for k, v := range c.Args.GetFields() {
		shape = append(shape, k+":"+kind(v))
	}
	sort.Strings(shape)
	self := ""
	if requesterMayConfirm(c) {
		self = c.OnBehalfOf
	}
	return strings.Join([]string{c.Agent, c.Server, c.Tool, c.Decision.GetRuleId(), self, strings.Join(shape, ",")}, "\x00")
}

func kind(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return "string"
	case *structpb.Value_NumberValue:
		return "number"
	case *structpb.Value_BoolValue:
		return "bool"
	case *structpb.Value_StructValue:
		return "object"
	case *structpb.Value_ListValue:
		return "list"
	}
	return "null"
}

// requesterMayConfirm: the rule that asked about c lets its verified
// requester confirm it themselves; such calls are grouped per requester, so
// one person's confirmations never count toward another's calls.
func requesterMayConfirm(c Call) bool {
	call := &airlockv1.ToolCall{OnBehalfOf: c.OnBehalfOf, OnBehalfOfVerified: c.Verified}
	return calls.RequesterMayDecide(call, c.Decision, c.OnBehalfOf)
}

func propose(all []Call, cfg Config) (Suggestion, string) {
	var g, refused []Call
	for _, c := range all {
		if c.Outcome == Approved {
			g = append(g, c)
		} else {
			refused = append(refused, c)
		}
		if c.Redacted || len(c.Decision.GetRedact()) > 0 {
			return Suggestion{}, "the policy redacts some of its arguments: nothing is proposed from values nobody can see"
		}
		if c.Decision.GetQuorum() > 1 {
			return Suggestion{}, fmt.Sprintf("its rule needs %d approvals: a grant never stands in for a quorum", c.Decision.GetQuorum())
		}
	}
	if len(g) == 0 {
		return Suggestion{}, "never approved as asked"
	}
	first := g[0]
	// Risk is each call's (the highest any matching rule assigns), not the
	// asking rule's: the group is as risky as its riskiest approval.
	highest := first.Decision.GetRisk()
	for _, c := range g {
		highest = max(highest, c.Decision.GetRisk())
	}
	risk := calls.RiskName(highest)
	if (risk == "high" || risk == "critical") && !slices.Contains(cfg.AllowRisks, risk) {
		return Suggestion{}, fmt.Sprintf("its risk is %s: such calls are not proposed unless configured", risk)
	}
	if len(g) < cfg.MinApprovals {
		return Suggestion{}, fmt.Sprintf("approved %d times; %d are needed", len(g), cfg.MinApprovals)
	}
	people := map[string]bool{}
	for _, c := range g {
		for _, a := range c.Approvers {
			people[a] = true
		}
	}
	requester := ""
	if requesterMayConfirm(first) {
		// The group is one requester's calls (groupKey), whoever else
		// approved some: only they may adopt it, and a grant they make
		// allows only calls made for them, never another requester's.
		requester = first.OnBehalfOf
	}
	if self := len(people) == 1 && people[requester]; !self && len(people) < cfg.MinApprovers {
		return Suggestion{}, fmt.Sprintf("approved by %d person; %d distinct people are needed", len(people), cfg.MinApprovers)
	}
	// The grant answers calls no riskier than the riskiest approval.
	grant := &airlockv1.StandingGrant{AgentId: first.Agent, Server: first.Server, Tool: first.Tool, RuleId: first.Decision.GetRuleId(), OnlyListedArguments: true,
		MaxRisk: highest}
	var widened []string
	widenedTo := map[string][]string{}
	names := make([]string, 0, len(first.Args.GetFields()))
	for k := range first.Args.GetFields() {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		values := make([]*structpb.Value, len(g))
		for i, c := range g {
			values[i] = c.Args.GetFields()[name]
		}
		w, why := scope(grant, first.Tool, name, values, cfg, widenedTo)
		if why != "" {
			return Suggestion{}, why
		}
		if w != "" {
			widened = append(widened, w)
		}
	}
	for _, c := range refused {
		if covers(grant, c.Args) {
			return Suggestion{}, fmt.Sprintf("call %s was %s and falls within what it would allow: nothing that reaches a refused call is proposed", c.CallID, strings.ReplaceAll(c.Outcome, "_", " "))
		}
	}
	probes := probeCalls(first.Args, g, widenedTo)
	for _, p := range probes {
		if covers(grant, p.Args) {
			return Suggestion{}, fmt.Sprintf("what it would allow reaches %s, which nobody approved anything like: nothing is proposed", p.Path)
		}
	}
	s := Suggestion{Agent: first.Agent, Server: first.Server, Tool: first.Tool, RuleID: grant.RuleId, Risk: risk,
		Requester: requester, Grant: grant, Widened: widened, Approvals: len(g), probes: probes}
	for p := range people {
		s.Approvers = append(s.Approvers, p)
	}
	sort.Strings(s.Approvers)
	var waits []time.Duration
	newest := first
	for _, c := range g {
		args, _ := canon.JSON(c.Args)
		s.Evidence = append(s.Evidence, Evidence{Call: c.CallID, Revision: c.Revision, AskedAt: c.AskedAt, Approvers: c.Approvers, TimeToDecide: c.TimeToDecide(), Args: string(args)})
		waits = append(waits, c.TimeToDecide())
		// Adopting makes the grant from this call, whose risk caps the
		// grant's: the newest of the riskiest approvals.
		if c.Decision.GetRisk() > newest.Decision.GetRisk() || c.Decision.GetRisk() == newest.Decision.GetRisk() && c.DecidedAt.After(newest.DecidedAt) {
			newest = c
		}
	}
	slices.Sort(waits)
	s.MedianTimeToDecide = waits[len(waits)/2]
	s.FromCall, s.FromRevision = newest.CallID, newest.Revision
	s.ID = suggestionID(s)
	s.GrantJSON, _ = protojson.Marshal(grant)
	s.Scope = grantdesc.Describe(grant)
	return s, ""
}

// suggestionID names the group and the scope drawn from it.
func suggestionID(s Suggestion) string {
	scope, _ := proto.MarshalOptions{Deterministic: true}.Marshal(s.Grant)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00", s.Agent, s.Server, s.Tool, s.RuleID, s.Requester)
	h.Write(scope)
	return "sg_" + hex.EncodeToString(h.Sum(nil))[:20]
}

// contentNames are arguments that carry content rather than choose what a
// call touches: when they vary they may take any value.
var contentNames = []string{"content", "contents", "text", "body", "message", "data", "comment", "description", "title", "note", "summary"}

// commandNames are arguments that hold a shell command.
var commandNames = []string{"command", "cmd", "script", "shell_command", "commandline", "command_line"}

// scope narrows grant to the values one argument took across the group:
// the exact value when it never varied, else the narrowest form that holds
// every approved value. It returns what it widened (in words) or why the
// group cannot be proposed.
//
// A path argument is widened only to a directory that itself directly
// holds enough approved paths, and then only to its files whose name does
// not start with "." (widenedTo[ptr] lists those directories).
func scope(grant *airlockv1.StandingGrant, tool, name string, values []*structpb.Value, cfg Config, widenedTo map[string][]string) (widened, why string) {
	ptr := "/" + calls.EscapePointer(name)
	same := true
	for _, v := range values[1:] {
		if !proto.Equal(v, values[0]) {
			same = false
			break
		}
	}
	if same {
		if grant.ArgumentValues == nil {
			grant.ArgumentValues = map[string]*structpb.Value{}
		}
		grant.ArgumentValues[ptr] = values[0]
		return "", ""
	}
	switch kind(values[0]) {
	case "bool":
		// Both values were approved: any value is no wider than the evidence.
		grant.AnyArguments = append(grant.AnyArguments, ptr)
		return "", ""
	case "number":
		// The range runs exactly from the lowest to the highest approved
		// number: never wider than what was approved.
		lo, hi := values[0].GetNumberValue(), values[0].GetNumberValue()
		for _, v := range values {
			lo, hi = min(lo, v.GetNumberValue()), max(hi, v.GetNumberValue())
		}
		r := &airlockv1.NumberRange{Min: lo, Max: hi}
		if why := grantdesc.CheckRange(r); why != "" {
			return "", fmt.Sprintf("argument %s varied from %s to %s, and no range fits it: %s", ptr, grantdesc.Number(lo), grantdesc.Number(hi), why)
		}
		if grant.ArgumentRanges == nil {
			grant.ArgumentRanges = map[string]*airlockv1.NumberRange{}
		}
		grant.ArgumentRanges[ptr] = r
		return fmt.Sprintf("%s: any number from %s to %s (the lowest and highest approved)", ptr, grantdesc.Number(lo), grantdesc.Number(hi)), ""
	case "string":
	default:
		return "", fmt.Sprintf("argument %s is %s and varied: only exact values of such arguments are proposed", ptr, kind(values[0]))
	}
	strs := make([]string, len(values))
	for i, v := range values {
		strs[i] = v.GetStringValue()
	}
	lname := strings.ToLower(name)
	switch {
	case slices.Contains(commandNames, lname) || isShellTool(tool):
		prefix, ok := commonCommandPrefix(strs)
		if !ok {
			return "", fmt.Sprintf("the commands in %s share no plain leading words: nothing narrower than any command fits them", ptr)
		}
		if grant.CommandPrefixes == nil {
			grant.CommandPrefixes = map[string]string{}
		}
		grant.CommandPrefixes[ptr] = prefix
		return fmt.Sprintf("%s: any plain command starting with %q (the words every approved command began with)", ptr, prefix), ""
	case looksLikePaths(name, strs):
		glob, dirs, ok := pathGlob(strs, cfg)
		if !ok {
			return "", fmt.Sprintf("the paths in %s include one that is not a clean path (a . or .. segment, a backslash, an empty segment or a trailing separator): a glob cannot match it exactly", ptr)
		}
		if grant.ArgumentGlobs == nil {
			grant.ArgumentGlobs = map[string]string{}
		}
		grant.ArgumentGlobs[ptr] = glob
		if len(dirs) == 0 {
			return "", ""
		}
		widenedTo[ptr] = dirs
		return fmt.Sprintf("%s: any file directly in %s whose name does not start with \".\" (each directory directly holds %d or more approved paths); every other path exactly as approved", ptr, strings.Join(dirs, ", "), cfg.MinPathsPerDirectory), ""
	case slices.Contains(contentNames, lname):
		grant.AnyArguments = append(grant.AnyArguments, ptr)
		return fmt.Sprintf("%s: any content (it varied in every approval; it does not choose what the call touches)", ptr), ""
	}
	distinct := map[string]bool{}
	for _, s := range strs {
		distinct[s] = true
	}
	if len(distinct) > cfg.MaxAlternatives {
		return "", fmt.Sprintf("argument %s took %d different values: more than %d cannot be pinned, and it is neither a path, a command nor content", ptr, len(distinct), cfg.MaxAlternatives)
	}
	alts := make([]string, 0, len(distinct))
	for s := range distinct {
		if !calls.CleanPath(s) || calls.EndsInSeparator(s) {
			return "", fmt.Sprintf("argument %s holds a value a glob cannot match exactly", ptr)
		}
		alts = append(alts, globQuote(s))
	}
	sort.Strings(alts)
	if grant.ArgumentGlobs == nil {
		grant.ArgumentGlobs = map[string]string{}
	}
	grant.ArgumentGlobs[ptr] = "{" + strings.Join(alts, ",") + "}"
	return "", ""
}

// covers reports whether args fall within the scope scope() drew (the
// forms it writes: pinned values, {a,b} alternatives, dir/* and dir/**
// globs, command prefixes, numeric ranges, any). It is Propose's own early check; Prove
// applies the grant exactly as the policy does.
func covers(g *airlockv1.StandingGrant, args *structpb.Struct) bool {
	named := map[string]bool{}
	for ptr, want := range g.ArgumentValues {
		named[ptr] = true
		if !proto.Equal(calls.Arg(args, ptr), want) {
			return false
		}
	}
	for ptr, prefix := range g.CommandPrefixes {
		named[ptr] = true
		v, ok := calls.StringArg(args, ptr)
		if !ok || !calls.CommandHasPrefix(v, prefix) {
			return false
		}
	}
	for ptr, glob := range g.ArgumentGlobs {
		named[ptr] = true
		v, ok := calls.StringArg(args, ptr)
		if !ok || !globCovers(glob, v) {
			return false
		}
	}
	for ptr, r := range g.ArgumentRanges {
		named[ptr] = true
		if !grantdesc.InRange(r, calls.Arg(args, ptr)) {
			return false
		}
	}
	for _, ptr := range g.AnyArguments {
		named[ptr] = true
	}
	for k := range args.GetFields() {
		if !named["/"+calls.EscapePointer(k)] {
			return false
		}
	}
	return true
}

// globCovers matches the globs scope() writes: {a,b} alternatives of
// exact values and of dir/[!./]* (visibleFiles), or one dir/[!./]*;
// anything else counts as covering (the safe answer for an early check).
func globCovers(glob, v string) bool {
	alts := []string{glob}
	if inner, ok := strings.CutPrefix(glob, "{"); ok && strings.HasSuffix(inner, "}") {
		alts = splitAlternatives(strings.TrimSuffix(inner, "}"))
	} else if !strings.HasSuffix(glob, visibleFiles) {
		return true
	}
	for _, a := range alts {
		if dir, ok := strings.CutSuffix(a, visibleFiles); ok {
			rest, ok := strings.CutPrefix(v, globUnquote(dir)+"/")
			if ok && rest != "" && !strings.ContainsAny(rest, "/") && !strings.HasPrefix(rest, ".") && calls.CleanPath(v) {
				return true
			}
			continue
		}
		if globUnquote(a) == v {
			return true
		}
	}
	return false
}

// splitAlternatives splits at the commas globQuote left unescaped.
func splitAlternatives(s string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			b.WriteByte(s[i])
			b.WriteByte(s[i+1])
			i++
		case s[i] == ',':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(out, b.String())
}

func globUnquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isShellTool(tool string) bool {
	t := strings.ToLower(tool)
	for _, w := range []string{"bash", "shell", "exec", "run_command", "terminal"} {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// commonCommandPrefix is the leading words every command shares, each a
// plain command (calls.ShellWords); false when they share none or a
// command is not plain. The prefix is checked with calls.CommandHasPrefix,
// the test the policy applies, against every command.
func commonCommandPrefix(cmds []string) (string, bool) {
	var common []string
	for i, c := range cmds {
		words, ok := calls.ShellWords(c)
		if !ok {
			return "", false
		}
		common = sharedPrefix(common, words, i == 0)
	}
	if len(common) == 0 {
		return "", false
	}
	for _, w := range common {
		if strings.ContainsAny(w, " \t'\"\\") {
			return "", false // a quoted word does not survive being joined back
		}
	}
	prefix := strings.Join(common, " ")
	for _, c := range cmds {
		if !calls.CommandHasPrefix(c, prefix) {
			return "", false
		}
	}
	return prefix, true
}

// sharedPrefix is the leading elements common and next share (next itself
// when first).
func sharedPrefix(common, next []string, first bool) []string {
	if first {
		return next
	}
	n := 0
	for n < len(common) && n < len(next) && common[n] == next[n] {
		n++
	}
	return common[:n]
}

// pathWords are the words of an argument name that say it holds a
// file-system path.
var pathWords = []string{"path", "paths", "file", "files", "filename", "filepath", "dir", "dirs", "directory", "folder"}

// looksLikePaths: only a file-system path is widened to a directory glob —
// an argument whose name has a path word (path, file_path, targetDir; not
// profile nor direction) and whose every value is an absolute path. Other
// values with slashes (refs/heads/a, a URL, a key) stay exact lists: a
// glob over refs/heads/* would reach main.
func looksLikePaths(name string, values []string) bool {
	if !hasPathWord(name) {
		return false
	}
	for _, v := range values {
		if !strings.HasPrefix(v, "/") {
			return false
		}
	}
	return true
}

// hasPathWord reports whether one of name's words (calls.NameWords, as
// the policy splits names) is a path word.
func hasPathWord(name string) bool {
	for w := range calls.NameWords(name) {
		if slices.Contains(pathWords, w) {
			return true
		}
	}
	return false
}

// visibleFiles is the glob ending that matches one file directly in a
// directory whose name does not start with "." (nor is empty): a grant's
// glob cannot say "no hidden segment" below that, so it never reaches
// deeper (no /**), and never a dotfile (.bashrc), nor a hidden directory's
// contents (.ssh/authorized_keys, .git/hooks/pre-commit). The class also
// leaves out "/": a class is not held to the separator.
const visibleFiles = "/[!./]*"

// pathGlob is the narrowest glob over the approved paths: the files of a
// directory that directly holds at least cfg.MinPathsPerDirectory distinct
// approved paths whose names do not start with "." (and is at least
// cfg.MinPathDepth deep) are matched by dir/[!./]*; every other approved
// path is matched exactly. A directory that merely is the approved paths'
// common ancestor is never widened to: five writes under /home/alice do
// not make all of /home/alice writable. It returns the glob and the
// directories widened to. Every path must be clean (no . or .. segment, no
// backslash, no empty segment, no trailing separator), as the policy
// matches only such paths.
func pathGlob(paths []string, cfg Config) (string, []string, bool) {
	distinct := map[string]bool{}
	visibleIn := map[string]map[string]bool{}
	for _, p := range paths {
		if !calls.CleanPath(p) || strings.Contains(p, `\`) || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
			return "", nil, false
		}
		distinct[p] = true
		dir, file := splitPath(p)
		if dir == "" || strings.HasPrefix(file, ".") {
			continue
		}
		if visibleIn[dir] == nil {
			visibleIn[dir] = map[string]bool{}
		}
		visibleIn[dir][file] = true
	}
	var dirs, alts []string
	for dir, files := range visibleIn {
		if len(files) >= cfg.MinPathsPerDirectory && strings.Count(dir, "/") >= max(1, cfg.MinPathDepth) {
			dirs = append(dirs, dir)
			alts = append(alts, globQuote(dir)+visibleFiles)
		}
	}
	for p := range distinct {
		if dir, file := splitPath(p); !slices.Contains(dirs, dir) || strings.HasPrefix(file, ".") {
			alts = append(alts, globQuote(p))
		}
	}
	sort.Strings(dirs)
	sort.Strings(alts)
	if len(alts) == 1 && len(dirs) == 1 {
		return alts[0], dirs, true
	}
	return "{" + strings.Join(alts, ",") + "}", dirs, true
}

// splitPath splits an absolute path at its last separator: /a/b/c.txt is
// /a/b and c.txt; a path directly under the root has no directory ("").
func splitPath(p string) (dir, file string) {
	i := strings.LastIndex(p, "/")
	if i <= 0 {
		return "", p[i+1:]
	}
	return p[:i], p[i+1:]
}

// probePaths are paths a grant widened to dir must not allow: dotfiles and
// the contents of hidden directories in it (a shell profile, ssh keys, git
// hooks, an .env), a file one directory below it, and files beside it in
// its parent. Prove asks the policy in force whether the grant would
// allow any of them.
func probePaths(dir string) []string {
	parent, _ := splitPath(dir)
	out := []string{dir + "/.bashrc", dir + "/.env", dir + "/.ssh/authorized_keys", dir + "/.git/hooks/pre-commit",
		dir + "/airlock-probe/new.txt", parent + "/.ssh/authorized_keys", parent + "/.bashrc"}
	if parent != "" {
		out = append(out, parent+"/airlock-probe.txt")
	}
	return out
}

// globQuote escapes what a glob (gobwas/glob, as the policy compiles
// grants) reads as a pattern, so s matches only itself.
func globQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\!,`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
