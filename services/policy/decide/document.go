package decide

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/durationpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

var actions = map[string]airlockv1.Action{"allow": airlockv1.Action_ACTION_ALLOW, "deny": airlockv1.Action_ACTION_DENY, "ask": airlockv1.Action_ACTION_ASK}

var risks = map[string]airlockv1.Risk{"low": airlockv1.Risk_RISK_LOW, "medium": airlockv1.Risk_RISK_MEDIUM, "high": airlockv1.Risk_RISK_HIGH, "critical": airlockv1.Risk_RISK_CRITICAL}

// decisionKeys are the keys a decision document may have, for the message
// that names an unknown one.
const decisionKeys = "action, reason, rule_id, risk, approvers, quorum, timeout, notify, redact, escalate_to, escalate_after, remind_after, queue_per_thread"

// decisionFromValue reads the policy's document strictly, from its AST form
// (no conversion to Go maps): an unknown key, a wrong type or an unknown
// action is malformed, and malformed denies. Keys are checked in sorted
// order, so the first problem reported does not depend on map order.
func decisionFromValue(v ast.Value) (*airlockv1.Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("malformed decision: %s must be an object, got %T", Query, jsonOf(v))
	}
	d := &airlockv1.Decision{}
	err := obj.Iter(func(kt, vt *ast.Term) error {
		key, ok := kt.Value.(ast.String)
		if !ok {
			return fmt.Errorf("malformed decision: unknown key %v (allowed: %s)", kt, decisionKeys)
		}
		bad := func(want string) error {
			return fmt.Errorf("malformed decision: %q must be %s, got %v", string(key), want, jsonOf(vt.Value))
		}
		val := vt.Value
		switch key {
		case "action":
			s, _ := val.(ast.String)
			a, ok := actions[string(s)]
			if !ok {
				return bad(`"allow", "deny" or "ask"`)
			}
			d.Action = a
		case "reason", "rule_id":
			s, ok := val.(ast.String)
			if !ok {
				return bad("a string")
			}
			if key == "reason" {
				d.Reason = string(s)
			} else {
				d.RuleId = string(s)
			}
		case "risk":
			s, _ := val.(ast.String)
			r, ok := risks[string(s)]
			if !ok {
				return bad(`"low", "medium", "high" or "critical"`)
			}
			d.Risk = r
		case "approvers", "notify", "redact", "escalate_to":
			list, ok := stringList(val)
			if !ok {
				return bad("a list of strings")
			}
			switch key {
			case "approvers":
				d.Approvers = list
			case "notify":
				d.Notify = list
			case "redact":
				d.Redact = list
			default:
				d.EscalateTo = list
			}
		case "queue_per_thread":
			b, ok := val.(ast.Boolean)
			if !ok {
				return bad("true or false")
			}
			d.QueuePerThread = bool(b)
		case "quorum":
			n, ok := val.(ast.Number)
			q, err := json.Number(n).Int64()
			if !ok || err != nil || q < 0 || q > 100 {
				return bad("a whole number from 0 to 100")
			}
			d.Quorum = uint32(q)
		case "timeout", "escalate_after", "remind_after":
			dur, ok := duration(val)
			if !ok {
				return bad(`a duration such as "10m" or a number of seconds`)
			}
			switch key {
			case "timeout":
				d.Timeout = durationpb.New(dur)
			case "escalate_after":
				d.EscalateAfter = durationpb.New(dur)
			default:
				d.RemindAfter = durationpb.New(dur)
			}
		default:
			return fmt.Errorf("malformed decision: unknown key %q (allowed: %s)", string(key), decisionKeys)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.Action == airlockv1.Action_ACTION_UNSPECIFIED {
		return nil, fmt.Errorf("malformed decision: it has no action")
	}
	if d.Reason == "" {
		d.Reason = "policy says " + strings.TrimPrefix(strings.ToLower(d.Action.String()), "action_")
	}
	return d, nil
}

// copyDocumentFields copies what decisionFromValue sets in d (the fields
// a decision document holds) into a new decision, sharing nothing with d.
func copyDocumentFields(d *airlockv1.Decision) *airlockv1.Decision {
	return &airlockv1.Decision{
		Action: d.Action, Reason: d.Reason, RuleId: d.RuleId, Risk: d.Risk,
		Approvers: slices.Clone(d.Approvers), Notify: slices.Clone(d.Notify), Redact: slices.Clone(d.Redact), EscalateTo: slices.Clone(d.EscalateTo),
		QueuePerThread: d.QueuePerThread, Quorum: d.Quorum,
		Timeout: cloneDuration(d.Timeout), EscalateAfter: cloneDuration(d.EscalateAfter), RemindAfter: cloneDuration(d.RemindAfter),
	}
}

func cloneDuration(d *durationpb.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(d.AsDuration())
}

// jsonOf is v as Go values, for messages (what rego's own results hold).
func jsonOf(v ast.Value) any {
	j, err := ast.JSON(v)
	if err != nil {
		return v.String()
	}
	return j
}

// stringList reads an array or a set (in sorted order, as rego's JSON
// conversion gives it) of strings.
func stringList(v ast.Value) ([]string, bool) {
	var n int
	switch c := v.(type) {
	case *ast.Array:
		n = c.Len()
	case ast.Set:
		n = c.Len()
	default:
		return nil, false
	}
	out := make([]string, 0, n)
	ok := true
	add := func(t *ast.Term) {
		s, isStr := t.Value.(ast.String)
		ok = ok && isStr
		out = append(out, string(s))
	}
	switch c := v.(type) {
	case *ast.Array:
		c.Foreach(add)
	case ast.Set:
		c.Foreach(add)
	}
	if !ok {
		return nil, false
	}
	return out, true
}

func duration(v ast.Value) (time.Duration, bool) {
	switch x := v.(type) {
	case ast.String:
		d, err := time.ParseDuration(string(x))
		return d, err == nil && d >= 0
	case ast.Number:
		f, err := json.Number(x).Float64()
		return time.Duration(f * float64(time.Second)), err == nil && f >= 0
	}
	return 0, false
}
