package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// consoleSuggest computes the console's Suggestions page from the trail the
// audit pages read, with the run-time rules the policy service holds now.
type consoleSuggest struct {
	audit *consoleAudit
}

func (s consoleSuggest) Suggestions(ctx context.Context) (console.SuggestionReport, error) {
	cfg := s.audit.deps.Config
	rd, err := s.audit.reader(ctx)
	if err != nil {
		return console.SuggestionReport{}, err
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	rules, err := runtimeRules(qctx, policyapi.New(s.audit.deps.NC, seal.Key{}, "console"))
	cancel()
	if err != nil {
		return console.SuggestionReport{}, fmt.Errorf("read the run-time rules the replay decides with: %w", err)
	}
	scfg, since, err := suggestConfig(cfg)
	if err != nil {
		return console.SuggestionReport{}, err
	}
	rep, err := suggestions(ctx, cfg, rd, rules, scfg, since)
	if err != nil {
		return console.SuggestionReport{}, err
	}
	out := console.SuggestionReport{Source: rep.Source, Asks: rep.Asks, Removed: rep.AsksRemoved, Decided: rep.Decided, RuntimeRules: len(rules)}
	for _, x := range rep.Suggestions {
		out.Suggestions = append(out.Suggestions, consoleSuggestion(x))
	}
	for _, x := range rep.Dropped {
		out.Dropped = append(out.Dropped, consoleSuggestion(x))
	}
	for _, k := range rep.Skipped {
		out.Skipped = append(out.Skipped, console.SkippedGroup{Agent: k.Agent, Tool: k.Tool, Why: k.Why, Calls: k.Calls})
	}
	return out, nil
}

// maxEvidenceShown bounds the approvals a suggestion lists on the page.
const maxEvidenceShown = 50

func consoleSuggestion(s suggest.Suggestion) console.Suggestion {
	v := console.Suggestion{ID: s.ID, Agent: s.Agent, Tool: s.Tool, RuleID: s.RuleID, Risk: s.Risk, Requester: s.Requester,
		Grant: s.Grant, Scope: s.Scope, GrantJSON: string(s.GrantJSON), Widened: s.Widened, Approvals: s.Approvals, Approvers: s.Approvers,
		MedianTimeToDecide: s.MedianTimeToDecide, FromCall: s.FromCall, FromRevision: s.FromRevision}
	if s.Server != "" {
		v.Tool = s.Server + "__" + s.Tool
	}
	// The page lists the newest approvals; the counts cover them all.
	ev := s.Evidence
	if len(ev) > maxEvidenceShown {
		ev = ev[len(ev)-maxEvidenceShown:]
	}
	for _, e := range ev {
		v.Evidence = append(v.Evidence, console.SuggestionEvidence{Call: e.Call, Revision: e.Revision, AskedAt: e.AskedAt, Approvers: e.Approvers,
			TimeToDecide: e.TimeToDecide, Args: e.Args})
	}
	if p := s.Proof; p != nil {
		v.Replayed, v.AsksRemoved, v.ReviewerTimeSaved, v.PerReviewer = p.Replayed, p.AsksRemoved, p.ReviewerTimeSaved, p.PerReviewer
		for _, x := range p.Violations {
			v.Violations = append(v.Violations, fmt.Sprintf("call %s of agent %s (%s)", x.Call, x.Agent, x.Outcome))
		}
	}
	return v
}
