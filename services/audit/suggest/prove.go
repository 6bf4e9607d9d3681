package suggest

import (
	"context"
	"fmt"
	"sort"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/callref"
)

// Violation is a recorded call the suggestion would have allowed although
// people (or the policy) did not let it run as asked.
type Violation struct {
	Agent    string    `json:"agent_id"`
	Call     string    `json:"call_id"`
	Revision uint32    `json:"revision"`
	At       time.Time `json:"decided_at"`
	Outcome  string    `json:"outcome"`
}

// Proof is what replaying a suggestion over the recorded history showed.
type Proof struct {
	// Replayed: recorded policy decisions re-decided.
	Replayed int `json:"replayed"`
	// AsksRemoved: asks people approved that the grant would have allowed.
	AsksRemoved int `json:"asks_removed"`
	// Asks: every ask in the replayed history, for the share removed.
	Asks int `json:"asks"`
	// ReviewerTimeSaved: the time-to-decide of the removed asks.
	ReviewerTimeSaved time.Duration `json:"reviewer_time_saved_ns"`
	// PerReviewer: removed asks per person who had approved them.
	PerReviewer map[string]int `json:"calls_per_reviewer"`
	// Violations: calls it would have allowed that were rejected, sent
	// back, edited, expired, canceled or denied (or whose outcome the trail
	// does not tell). One is enough to drop the suggestion.
	Violations []Violation `json:"violations,omitempty"`
	// Probes: calls like the approved ones at paths nobody approved
	// anything like (dotfiles, hidden directories, deeper and beside a
	// widened directory) decided with the policy in force; ProbesAllowed
	// are those the grant would allow. One is enough to drop the suggestion.
	Probes        int     `json:"probes"`
	ProbesAllowed []Probe `json:"probes_allowed,omitempty"`
}

// Safe: the grant allows no recorded call people did not approve as
// asked, and no probe.
func (p *Proof) Safe() bool { return p != nil && len(p.Violations) == 0 && len(p.ProbesAllowed) == 0 }

// Prove replays s over every recorded decision since since (replay.Run)
// with decide (the policy in force now) and the grant applied as the policy
// applies grants, and judges every call whose decision the grant turns into
// an allow against what happened to it (decided, from Load).
func Prove(ctx context.Context, rd store.Reader, s *Suggestion, decided map[string]Call, decide replay.Decide, applies replay.Applies, since time.Time) (*Proof, error) {
	p, err := proveGrants(ctx, rd, []*airlockv1.StandingGrant{s.Grant}, decided, decide, applies, since)
	if err != nil {
		return nil, fmt.Errorf("suggest: prove %s: %w", s.ID, err)
	}
	if err := probe(ctx, p, s, decide, applies, time.Now()); err != nil {
		return nil, fmt.Errorf("suggest: prove %s against its probes: %w", s.ID, err)
	}
	return p, nil
}

// probe decides each of s's probes with the policy in force at now and
// records those the grant would turn into an allow: the replay proves the
// grant against what happened, the probes against what it must never
// reach although nothing like it happened yet.
func probe(ctx context.Context, p *Proof, s *Suggestion, decide replay.Decide, applies replay.Applies, now time.Time) error {
	for i, pr := range s.probes {
		call := &airlockv1.ToolCall{CallId: fmt.Sprintf("airlock-probe-%d", i), Revision: 1, AgentId: s.Agent, Server: s.Server, Tool: s.Tool,
			Arguments: pr.Args, OnBehalfOf: s.Requester, OnBehalfOfVerified: s.Requester != ""}
		d, err := decide(ctx, call, now)
		if err != nil {
			return fmt.Errorf("decide a probe at %s: %w", pr.Path, err)
		}
		p.Probes++
		if d.GetAction() == airlockv1.Action_ACTION_ASK && applies(s.Grant, call, d, now) {
			p.ProbesAllowed = append(p.ProbesAllowed, pr)
		}
	}
	return nil
}

// proveGrants replays the history with every grant of gs in force, and no
// other: a grant already in force that also covers a refused call must not
// hide that the suggestion would allow it too.
func proveGrants(ctx context.Context, rd store.Reader, gs []*airlockv1.StandingGrant, decided map[string]Call, decide replay.Decide, applies replay.Applies, since time.Time) (*Proof, error) {
	p := &Proof{PerReviewer: map[string]int{}}
	granted := map[string]bool{}
	counted := func(ctx context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
		d, err := decide(ctx, call, at)
		if err == nil && d.GetAction() == airlockv1.Action_ACTION_ASK {
			p.Asks++
		}
		return d, err
	}
	// The grants are judged at the call's own time, so their (absent)
	// expiry never hides a call.
	mine := func(g *airlockv1.StandingGrant, call *airlockv1.ToolCall, d *airlockv1.Decision, at time.Time) bool {
		if !applies(g, call, d, at) {
			return false
		}
		granted[callref.Of(call).Key()] = true
		return true
	}
	rep, err := replay.Run(ctx, rd, replay.WithGrants(counted, gs, mine), replay.Options{Since: since, Examples: 1, OnChange: func(c replay.Change) {
		k := callref.Ref{Agent: c.Agent, Call: c.Call, Rev: c.Revision}.Key()
		if c.After != "allow" || !granted[k] {
			return
		}
		got := decided[k]
		if got.Outcome == Pending {
			return // not decided yet: neither evidence nor a refusal
		}
		if got.Outcome != Approved {
			outcome := got.Outcome
			if outcome == "" {
				outcome = "unknown"
			}
			p.Violations = append(p.Violations, Violation{Agent: c.Agent, Call: c.Call, Revision: c.Revision, At: c.At, Outcome: outcome})
			return
		}
		p.AsksRemoved++
		p.ReviewerTimeSaved += got.TimeToDecide()
		for _, a := range got.Approvers {
			p.PerReviewer[a]++
		}
	}})
	if err != nil {
		return nil, err
	}
	p.Replayed = rep.Replayed
	sort.Slice(p.Violations, func(i, j int) bool { return p.Violations[i].At.Before(p.Violations[j].At) })
	return p, nil
}

// Report is what `airlock policy suggest` and the console show.
type Report struct {
	// Suggestions that replay proved safe, most approvals first.
	Suggestions []Suggestion `json:"suggestions"`
	// Dropped: proposals the replay showed would allow a refused call.
	Dropped []Suggestion `json:"dropped"`
	// Skipped: groups not proposed, and why.
	Skipped []Skipped `json:"skipped"`
	// Decided: calls read from the trail.
	Decided int `json:"decided_calls"`
	// Asks: calls a person was asked about in the replayed history.
	Asks int `json:"asks"`
	// AsksRemoved: asks all the suggestions together would have removed.
	AsksRemoved int `json:"asks_removed"`
	// Together is the replay with every kept suggestion adopted at once.
	Together *Proof `json:"together"`
	Source   string `json:"source"`
}

// Run loads the decided calls, proposes from those asked since since,
// proves each proposal by replay over the whole recorded history and keeps
// the ones that allow no refused call. The window narrows the evidence,
// never the proof: a call people refused before it still counts.
func Run(ctx context.Context, rd store.Reader, cfg Config, decide replay.Decide, applies replay.Applies, since time.Time) (Report, error) {
	decided, rows, err := load(ctx, rd, time.Time{})
	if err != nil {
		return Report{}, err
	}
	source := rd.Source()
	rd = rowsReader{Reader: rd, rows: rows}
	byKey := make(map[string]Call, len(decided))
	evidence := decided
	for i, c := range decided {
		byKey[c.Key()] = c
		if c.AskedAt.Before(since) {
			evidence = decided[i+1:] // sorted by AskedAt
		}
	}
	props, skipped := Propose(evidence, cfg)
	rep := Report{Skipped: skipped, Decided: len(decided), Source: source, Suggestions: []Suggestion{}, Dropped: []Suggestion{}}
	for _, c := range decided {
		if c.Decision.GetAction() == airlockv1.Action_ACTION_ASK {
			rep.Asks++
		}
	}
	for i := range props {
		s := props[i]
		proof, err := Prove(ctx, rd, &s, byKey, decide, applies, time.Time{})
		if err != nil {
			return rep, err
		}
		s.Proof = proof
		if !proof.Safe() {
			rep.Dropped = append(rep.Dropped, s)
			continue
		}
		rep.Suggestions = append(rep.Suggestions, s)
	}
	var gs []*airlockv1.StandingGrant
	for _, s := range rep.Suggestions {
		gs = append(gs, s.Grant)
	}
	if rep.Together, err = proveGrants(ctx, rd, gs, byKey, decide, applies, time.Time{}); err != nil {
		return rep, fmt.Errorf("suggest: prove the suggestions together: %w", err)
	}
	rep.AsksRemoved = rep.Together.AsksRemoved
	return rep, nil
}
