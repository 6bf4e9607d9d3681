package decide

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
)

// RuleDoc is the data form of a rule in data.airlock.rules.
func RuleDoc(r *airlockv1.PolicyRule) (map[string]any, error) {
	b, err := pbjson.Marshal(stripMeta(r))
	if err != nil {
		return nil, fmt.Errorf("encode rule %s: %w", r.GetId(), err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode rule %s: %w", r.GetId(), err)
	}
	if _, ok := m["priority"]; !ok {
		m["priority"] = 0
	}
	return m, nil
}

// stripMeta drops bookkeeping fields the policy does not read, so that who
// edited a rule does not change the policy revision by itself.
func stripMeta(r *airlockv1.PolicyRule) *airlockv1.PolicyRule {
	c := &airlockv1.PolicyRule{}
	*c = airlockv1.PolicyRule{
		Id: r.Id, Priority: r.Priority, Server: r.Server, Tool: r.Tool, ToolPattern: r.ToolPattern, Pattern: r.Pattern,
		Agent: r.Agent, Args: r.Args, Effect: r.Effect, Risk: r.Risk, Reason: r.Reason, Approvers: r.Approvers,
		Quorum: r.Quorum, Timeout: r.Timeout, Notify: r.Notify, Redact: r.Redact, ToolWords: r.ToolWords,
		Commands: r.Commands, Principals: r.Principals, QueuePerThread: r.QueuePerThread,
		OtherArguments: r.OtherArguments, ArgumentsMatch: r.ArgumentsMatch, Annotations: r.Annotations,
		ArgumentsNotMatching: r.ArgumentsNotMatching, ArgumentsMatching: r.ArgumentsMatching,
	}
	return c
}

// mergeData returns base with run-time rules and bindings merged into
// data.airlock, rules sorted by priority, equal priorities keeping their
// list order (data.json's, then the run-time rules the bucket adds), as
// airlock.rego's plain path orders data.json: both pick the same rule.
func mergeData(base map[string]any, rules []*airlockv1.PolicyRule, bindings map[string]string) (map[string]any, error) {
	// Deep copy through JSON so the shared Code is never modified.
	raw, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("policy data: %w", err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("policy data: %w", err)
	}
	if data == nil {
		data = map[string]any{}
	}
	al, _ := data["airlock"].(map[string]any)
	if al == nil {
		al = map[string]any{}
		data["airlock"] = al
	}
	byID := map[string]map[string]any{}
	var order []string
	if list, ok := al["rules"].([]any); ok {
		for i, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("policy data: airlock.rules[%d] is not an object", i)
			}
			if err := checkDataRule(m); err != nil {
				return nil, fmt.Errorf("policy data: airlock.rules[%d]: %w", i, err)
			}
			id, _ := m["id"].(string)
			if id == "" {
				id = fmt.Sprintf("#%d", i)
				m["id"] = id
			}
			if _, ok := m["priority"]; !ok {
				m["priority"] = 0
			}
			byID[id] = m
			order = append(order, id)
		}
	}
	// The run-time rules come in no order of their own (a bucket read into
	// a map): taken by id, so that every replica builds the same list, and
	// so the same revision and the same pick among equal priorities.
	rules = slices.Clone(rules)
	slices.SortStableFunc(rules, func(a, b *airlockv1.PolicyRule) int { return strings.Compare(a.GetId(), b.GetId()) })
	for _, r := range rules {
		if r.GetDeleted() {
			delete(byID, r.Id)
			continue
		}
		m, err := RuleDoc(r)
		if err != nil {
			return nil, err
		}
		if _, ok := byID[r.Id]; !ok {
			order = append(order, r.Id)
		}
		byID[r.Id] = m
	}
	list := make([]any, 0, len(byID))
	for _, id := range order {
		if m, ok := byID[id]; ok {
			list = append(list, m)
			delete(byID, id) // an id listed twice in data.json keeps its first place
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return priorityOf(list[i]) < priorityOf(list[j]) })
	al["rules"] = list
	b := map[string]any{}
	if existing, ok := al["bindings"].(map[string]any); ok {
		maps.Copy(b, existing)
	}
	for k, v := range bindings {
		b[k] = v
	}
	al["bindings"] = b
	return data, nil
}

func priorityOf(v any) float64 {
	m, _ := v.(map[string]any)
	return numberOf(m["priority"])
}

// numberOf reads a number of the data document (0 for anything else).
func numberOf(v any) float64 {
	switch p := v.(type) {
	case float64:
		return p
	case json.Number:
		f, _ := p.Float64()
		return f
	case int:
		return float64(p)
	}
	return 0
}

// ValidateRule checks a run-time rule before it is stored, with sentences
// that say what to fix.
func ValidateRule(r *airlockv1.PolicyRule) error {
	if r == nil {
		return fmt.Errorf("rule is required")
	}
	if !ValidRuleID(r.Id) {
		return fmt.Errorf("rule id %q must be 1-64 characters from A-Z a-z 0-9 _ -", r.Id)
	}
	if _, ok := actions[r.Effect]; !ok {
		return fmt.Errorf("rule %s: effect %q must be allow, ask or deny", r.Id, r.Effect)
	}
	if _, ok := risks[r.Risk]; r.Risk != "" && !ok {
		return fmt.Errorf("rule %s: risk %q must be low, medium, high or critical", r.Id, r.Risk)
	}
	if r.Timeout != "" {
		if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
			return fmt.Errorf("rule %s: timeout %q must be a positive duration such as 10m", r.Id, r.Timeout)
		}
	}
	for _, g := range []string{r.ToolPattern, r.Pattern} {
		if _, err := compileGlob(g, nil); g != "" && err != nil {
			return fmt.Errorf("rule %s: pattern %q is not a valid glob: %v", r.Id, g, err)
		}
	}
	for ptr, g := range r.Args {
		if !strings.HasPrefix(ptr, "/") {
			return fmt.Errorf("rule %s: argument %q must be a JSON pointer such as /path", r.Id, ptr)
		}
		if _, err := compileGlob(g, []rune{'/'}); err != nil {
			return fmt.Errorf("rule %s: argument glob %q is not valid: %v", r.Id, g, err)
		}
	}
	for ptr, g := range r.Commands {
		if !strings.HasPrefix(ptr, "/") {
			return fmt.Errorf("rule %s: command argument %q must be a JSON pointer such as /command", r.Id, ptr)
		}
		if _, err := compileGlob(g, nil); err != nil {
			return fmt.Errorf("rule %s: command glob %q is not valid: %v", r.Id, g, err)
		}
	}
	if r.OtherArguments != "" && r.OtherArguments != "any" {
		return fmt.Errorf("rule %s: other_arguments %q must be empty (an allow rule allows only the arguments it names) or \"any\"", r.Id, r.OtherArguments)
	}
	if r.ArgumentsMatch != "" {
		if r.Effect == "allow" {
			return fmt.Errorf("rule %s: arguments_match matches when any argument does, which is for ask and deny rules: an allow rule names what it allows with args or commands", r.Id)
		}
		if _, err := regexp.Compile(r.ArgumentsMatch); err != nil {
			return fmt.Errorf("rule %s: arguments_match %q is not a valid regular expression: %v", r.Id, r.ArgumentsMatch, err)
		}
	}
	for _, c := range []struct {
		name, when, example string
		exprs               map[string]string
	}{
		{"arguments_not_matching", "an argument falls outside what it allows", "/glob", r.ArgumentsNotMatching},
		{"arguments_matching", "a named argument matches an expression", "/file_path", r.ArgumentsMatching},
	} {
		for ptr, re := range c.exprs {
			if r.Effect == "allow" {
				return fmt.Errorf("rule %s: %s matches when %s, which is for ask and deny rules: an allow rule names what it allows with args or commands", r.Id, c.name, c.when)
			}
			if !strings.HasPrefix(ptr, "/") {
				return fmt.Errorf("rule %s: %s argument %q must be a JSON pointer such as %s", r.Id, c.name, ptr, c.example)
			}
			if _, err := regexp.Compile(re); err != nil {
				return fmt.Errorf("rule %s: %s %s: %q is not a valid regular expression: %v", r.Id, c.name, ptr, re, err)
			}
		}
	}
	for k := range r.Annotations {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("rule %s: an annotation needs a name such as openWorldHint", r.Id)
		}
	}
	for _, p := range r.Principals {
		if strings.TrimSpace(p) == "" || strings.HasPrefix(p, "group:") || p == calls.Requester {
			return fmt.Errorf("rule %s: principals must name people (got %q): list each person who may trigger the rule's tools", r.Id, p)
		}
	}
	for _, p := range r.Redact {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("rule %s: redact path %q must be a JSON pointer such as /password", r.Id, p)
		}
	}
	return nil
}

// ValidRuleID reports whether s may name a rule: 1-64 characters from
// A-Z a-z 0-9 _ -.
func ValidRuleID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkDataRule holds a data.json rule to the same shape and checks as a
// run-time rule, so a typo refuses the policy instead of matching everything.
func checkDataRule(m map[string]any) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	r := &airlockv1.PolicyRule{}
	if err := envelope.JSONRead.Unmarshal(raw, r); err != nil {
		return err
	}
	if r.Id == "" {
		r.Id = "unnamed"
	}
	return ValidateRule(r)
}
