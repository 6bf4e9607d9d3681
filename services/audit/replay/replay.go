// Package replay re-decides recorded calls with a candidate policy and
// reports every decision that would change. It reads the audit trail
// (ClickHouse or the stream, through store.Reader) and takes the decider
// as a function, so it depends on no policy engine; `airlock policy
// replay` passes the policy service's Evaluator.
//
// The calls come from the policy's own decision events (allowed, denied,
// approval_requested): each carries the call as it was decided and the
// decision it got. Each is decided again as of the time it was first decided
// (the recorded decided_at), which is what the policy reads as input.time
// and time.now_ns(). Their arguments are the audit copy, so values the old
// decision redacted are seen by the candidate as "[REDACTED]"; such calls
// are counted in Report.Redacted. Every call is re-decided, those a standing
// grant allowed too (counted in Report.Granted): grants are applied by the
// decider (WithGrants), as the policy service applies them.
package replay

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/grant"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Decide decides one call as of time at; it must not have side effects.
type Decide func(ctx context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error)

// Applies reports whether standing grant g turns the policy's decision d
// about call into an allow at time at; airlock passes the policy's own
// decide.GrantApplies, so a replay applies grants as the policy does.
type Applies func(g *airlockv1.StandingGrant, call *airlockv1.ToolCall, d *airlockv1.Decision, at time.Time) bool

// WithGrants is decide with the standing grants gs in force, applied by
// the policy service's own rule (grant.AnswerAsk): an ask the first of gs
// that applies to the call at its time answers becomes an allow naming that
// grant (GrantId); a deny or an allow stays. Nothing is spent during the
// replay: a grant answers every call it covers while it is live, and one
// used up (or expired) before the replay answers only the call revisions
// that spent it (applies: decide.GrantApplies). gs are tried in the order
// given (the caller orders them as the policy service does).
func WithGrants(decide Decide, gs []*airlockv1.StandingGrant, applies Applies) Decide {
	return func(ctx context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
		d, err := decide(ctx, call, at)
		if err != nil {
			return d, err
		}
		return grant.AnswerAsk(d, gs, func(g *airlockv1.StandingGrant) *airlockv1.StandingGrant {
			if applies(g, call, d, at) {
				return g
			}
			return nil
		}), nil
	}
}

// Options tune Run.
type Options struct {
	// Since limits the replay to decisions recorded at or after it.
	Since time.Time
	// Examples kept per kind of change (default 5).
	Examples int
	// OnChange, when set, sees every change (not only the examples): how
	// a caller that judges each re-decided call, such as the suggestion
	// proof, reuses the replay.
	OnChange func(Change)
}

// Change is one call whose decision would change.
type Change struct {
	Call     string    `json:"call_id"`
	Revision uint32    `json:"revision"`
	Agent    string    `json:"agent_id"`
	Tool     string    `json:"tool"`
	At       time.Time `json:"decided_at"`
	Before   string    `json:"before"` // allow, deny or ask
	After    string    `json:"after"`
	// Rules and reasons of the recorded and the candidate decisions.
	BeforeRule   string `json:"before_rule"`
	AfterRule    string `json:"after_rule"`
	BeforeReason string `json:"before_reason"`
	AfterReason  string `json:"after_reason"`
	// The standing grants that allowed the call then and would now.
	BeforeGrant string `json:"before_grant,omitempty"`
	AfterGrant  string `json:"after_grant,omitempty"`
	// Redacted: some arguments were masked in the audit copy the candidate saw.
	Redacted bool `json:"redacted,omitempty"`
	// Error from the candidate policy (it then denies, failing closed).
	Error string `json:"error,omitempty"`
}

// Transition counts changes of one kind, e.g. allow → ask.
type Transition struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	Count    int      `json:"count"`
	Examples []Change `json:"examples"`
}

// Report is the outcome of a replay.
type Report struct {
	Since    time.Time `json:"since,omitzero"`
	Replayed int       `json:"replayed"` // calls re-decided
	// Changed: the action (allow / deny / ask) would differ.
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	// RuleChanged: same action, but another rule would decide it.
	RuleChanged int `json:"rule_changed"`
	// Granted: recorded decisions a standing grant had allowed (re-decided
	// like any other).
	Granted int `json:"granted"`
	// GrantAllowed: re-decided calls a grant in force allows (see WithGrants).
	GrantAllowed int `json:"grant_allowed"`
	Redacted     int `json:"with_redacted_arguments"`
	Errors       int `json:"policy_errors"`
	// Transitions, most frequent first.
	Transitions []Transition `json:"transitions"`
}

// Run replays every recorded policy decision since opt.Since.
func Run(ctx context.Context, rd store.Reader, decide Decide, opt Options) (Report, error) {
	if opt.Examples <= 0 {
		opt.Examples = 5
	}
	rep := Report{Since: opt.Since}
	seen := map[string]bool{}
	trans := map[string]*Transition{}
	for _, typ := range []string{subject.Allowed, subject.Denied, subject.ApprovalRequested} {
		err := rd.Each(ctx, store.Filter{Type: typ, Since: opt.Since}, func(r store.Row) error {
			key := callref.Ref{Agent: r.Agent, Call: r.Call, Rev: r.Revision}.Key()
			if seen[key] {
				return nil
			}
			seen[key] = true
			call, old, err := decoded(r)
			if err != nil {
				rep.Errors++
				return nil // a row we cannot read is not a change; it is counted
			}
			if old.GetGrantId() != "" {
				rep.Granted++
			}
			redacted := strings.Contains(r.Payload, `"`+record.Mask+`"`)
			if redacted {
				rep.Redacted++
			}
			// As of the time it was first decided: the policy's own
			// decided_at, else (a decision recorded without it) the row's.
			at := r.Time
			if t := old.GetDecidedAt(); t != nil && t.IsValid() {
				at = t.AsTime()
			}
			d, derr := decide(ctx, call, at)
			rep.Replayed++
			if d.GetGrantId() != "" {
				rep.GrantAllowed++
			}
			before, after := r.Decision, action(d)
			if derr != nil {
				rep.Errors++
			}
			if before == after {
				rep.Unchanged++
				if old.GetRuleId() != d.GetRuleId() {
					rep.RuleChanged++
				}
				return nil
			}
			rep.Changed++
			k := before + ">" + after
			t := trans[k]
			if t == nil {
				t = &Transition{From: before, To: after}
				trans[k] = t
			}
			t.Count++
			c := Change{Call: r.Call, Revision: r.Revision, Agent: r.Agent, Tool: record.ToolKey(r.Server, r.Tool), At: at,
				Before: before, After: after, BeforeRule: old.GetRuleId(), AfterRule: d.GetRuleId(),
				BeforeReason: old.GetReason(), AfterReason: d.GetReason(), BeforeGrant: old.GetGrantId(), AfterGrant: d.GetGrantId(), Redacted: redacted}
			if derr != nil {
				c.Error = derr.Error()
			}
			if len(t.Examples) < opt.Examples {
				t.Examples = append(t.Examples, c)
			}
			if opt.OnChange != nil {
				opt.OnChange(c)
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("replay: read recorded %s decisions: %w", typ, err)
		}
	}
	for _, t := range trans {
		rep.Transitions = append(rep.Transitions, *t)
	}
	sort.Slice(rep.Transitions, func(i, j int) bool {
		a, b := rep.Transitions[i], rep.Transitions[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.From+a.To < b.From+b.To
	})
	return rep, nil
}

// decoded returns the call and decision recorded in a decision row.
func decoded(r store.Row) (*airlockv1.ToolCall, *airlockv1.Decision, error) {
	ev := &airlockv1.Event{}
	if err := protojson.Unmarshal([]byte(r.Payload), ev); err != nil {
		return nil, nil, fmt.Errorf("row seq %d: %w", r.Seq, err)
	}
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Allowed:
		return b.Allowed.GetCall(), b.Allowed.GetDecision(), nil
	case *airlockv1.Event_Denied:
		return b.Denied.GetCall(), b.Denied.GetDecision(), nil
	case *airlockv1.Event_ApprovalRequested:
		return b.ApprovalRequested.GetCall(), b.ApprovalRequested.GetDecision(), nil
	}
	return nil, nil, fmt.Errorf("row seq %d is not a policy decision", r.Seq)
}

func action(d *airlockv1.Decision) string {
	switch d.GetAction() {
	case airlockv1.Action_ACTION_ALLOW:
		return "allow"
	case airlockv1.Action_ACTION_DENY:
		return "deny"
	case airlockv1.Action_ACTION_ASK:
		return "ask"
	}
	return "deny" // the policy service treats anything else as deny (fail closed)
}
