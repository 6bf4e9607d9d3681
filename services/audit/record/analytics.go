package record

import (
	"slices"
	"sort"
	"time"

	"github.com/airlock-gate/airlock/services/shared/subject"
)

// AnalyticsOptions tune Analyze.
type AnalyticsOptions struct {
	// Since limits the analysis to calls asked about at or after it (zero: all).
	Since time.Time `json:"since,omitzero"`
	// FastApproval is how quick an approval must be to count as "fast" (default 5s).
	FastApproval time.Duration `json:"fast_approval"`
	// MinDecisions a reviewer needs before being judged a rubber-stamper (default 3).
	MinDecisions int `json:"min_decisions"`
	// Top bounds the most-asked list (default 10).
	Top int `json:"top"`
}

func (o AnalyticsOptions) withDefaults() AnalyticsOptions {
	if o.FastApproval <= 0 {
		o.FastApproval = 5 * time.Second
	}
	if o.MinDecisions <= 0 {
		o.MinDecisions = 3
	}
	if o.Top <= 0 {
		o.Top = 10
	}
	return o
}

// ToolStats summarise the decisions about one tool ("server__tool").
type ToolStats struct {
	Tool    string `json:"tool"`
	Allowed int    `json:"allowed"` // by policy, no person asked
	Denied  int    `json:"denied"`  // by policy
	Asked   int    `json:"asked"`   // waited for a person
	// Human outcomes of the asked calls.
	Approved         int `json:"approved"`
	Rejected         int `json:"rejected"`
	ChangesRequested int `json:"changes_requested"`
	Expired          int `json:"expired"`
	Canceled         int `json:"canceled"`
	// ApprovalRate is Approved / (Approved + Rejected + ChangesRequested); 0 when none decided.
	ApprovalRate float64 `json:"approval_rate"`
}

// Reviewer summarises one person's decisions.
type Reviewer struct {
	ID            string  `json:"id"`
	Decisions     int     `json:"decisions"`
	Approvals     int     `json:"approvals"`
	FastApprovals int     `json:"fast_approvals"`
	FastShare     float64 `json:"fast_share"` // FastApprovals / Decisions
	MedianSeconds float64 `json:"median_seconds"`
	// RubberStamper: at least MinDecisions decisions, most of them approvals within FastApproval.
	RubberStamper bool `json:"rubber_stamper"`
}

// Analytics is what policy authors tune with.
type Analytics struct {
	Options AnalyticsOptions `json:"options"`
	Tools   []ToolStats      `json:"tools"` // by Asked, then name
	// Time from approval_requested to the first human decision.
	DecideCount int         `json:"decide_count"`
	DecideP50   float64     `json:"decide_p50_seconds"`
	DecideP95   float64     `json:"decide_p95_seconds"`
	Reviewers   []Reviewer  `json:"reviewers"` // rubber-stampers first, then by decisions
	MostAsked   []ToolStats `json:"most_asked"`
	// Decided lists every call a person was asked about that has an
	// outcome, in the order it was asked (what the console's charts draw).
	Decided []Decided `json:"-"`
}

// Decided is one call a person was asked about and how it ended.
type Decided struct {
	Tool string
	// Outcome is approved, rejected, changes_requested, expired or canceled.
	Outcome            string
	By                 string
	AskedAt, DecidedAt time.Time
}

// AnalyticsTypes are the event types Analyze reads; stores fetch only these.
var AnalyticsTypes = append(slices.Clone(subject.PolicyOutcomes), subject.ApprovalOutcomes...)

// Analyze computes analytics from rows in stream order (only the types in
// AnalyticsTypes matter). A call revision counts once, whatever
// redeliveries or duplicate rows there are.
func Analyze(rows []Row, opt AnalyticsOptions) Analytics {
	opt = opt.withDefaults()
	// Call ids are the agent's own: two agents may use the same one.
	type key struct {
		agent, call string
		rev         uint32
	}
	type pending struct {
		tool    string
		askedAt time.Time
		outcome string
		by      string
		at      time.Time
	}
	tools := map[string]*ToolStats{}
	toolOf := func(name string) *ToolStats {
		if tools[name] == nil {
			tools[name] = &ToolStats{Tool: name}
		}
		return tools[name]
	}
	auto := map[key]bool{}
	asked := map[key]*pending{}
	var order []key
	for _, r := range rows {
		k := key{r.Agent, r.Call, r.Revision}
		switch r.Type {
		case subject.Allowed, subject.Denied:
			if auto[k] || !opt.Since.IsZero() && r.Time.Before(opt.Since) {
				continue
			}
			auto[k] = true
			if r.Type == subject.Allowed {
				toolOf(ToolKey(r.Server, r.Tool)).Allowed++
			} else {
				toolOf(ToolKey(r.Server, r.Tool)).Denied++
			}
		case subject.ApprovalRequested:
			if asked[k] != nil || !opt.Since.IsZero() && r.Time.Before(opt.Since) {
				continue
			}
			asked[k] = &pending{tool: ToolKey(r.Server, r.Tool), askedAt: r.Time}
			order = append(order, k)
		default:
			p := asked[k]
			if !slices.Contains(subject.ApprovalOutcomes, r.Type) || p == nil || p.outcome != "" {
				continue
			}
			p.outcome, p.at = r.Type, r.Time
			if r.ActorType == "human" || r.Type != subject.Expired && r.Type != subject.Canceled {
				p.by = r.ActorID
			}
		}
	}
	var decide []float64
	a := Analytics{Options: opt}
	reviewers := map[string]*Reviewer{}
	times := map[string][]float64{}
	for _, k := range order {
		p := asked[k]
		ts := toolOf(p.tool)
		ts.Asked++
		switch p.outcome {
		case subject.Approved:
			ts.Approved++
		case subject.Rejected:
			ts.Rejected++
		case subject.ChangesRequested:
			ts.ChangesRequested++
		case subject.Expired:
			ts.Expired++
		case subject.Canceled:
			ts.Canceled++
		}
		if p.outcome != "" {
			a.Decided = append(a.Decided, Decided{Tool: p.tool, Outcome: p.outcome, By: p.by, AskedAt: p.askedAt, DecidedAt: p.at})
		}
		if p.outcome != subject.Approved && p.outcome != subject.Rejected && p.outcome != subject.ChangesRequested {
			continue
		}
		secs := p.at.Sub(p.askedAt).Seconds()
		decide = append(decide, secs)
		if p.by == "" {
			continue
		}
		rv := reviewers[p.by]
		if rv == nil {
			rv = &Reviewer{ID: p.by}
			reviewers[p.by] = rv
		}
		rv.Decisions++
		times[p.by] = append(times[p.by], secs)
		if p.outcome == subject.Approved {
			rv.Approvals++
			if p.at.Sub(p.askedAt) < opt.FastApproval {
				rv.FastApprovals++
			}
		}
	}
	a.DecideCount = len(decide)
	a.DecideP50, a.DecideP95 = Percentile(decide, 0.50), Percentile(decide, 0.95)
	for _, t := range tools {
		if d := t.Approved + t.Rejected + t.ChangesRequested; d > 0 {
			t.ApprovalRate = float64(t.Approved) / float64(d)
		}
		a.Tools = append(a.Tools, *t)
	}
	sort.Slice(a.Tools, func(i, j int) bool {
		if a.Tools[i].Asked != a.Tools[j].Asked {
			return a.Tools[i].Asked > a.Tools[j].Asked
		}
		return a.Tools[i].Tool < a.Tools[j].Tool
	})
	for _, t := range a.Tools {
		if t.Asked > 0 && len(a.MostAsked) < opt.Top {
			a.MostAsked = append(a.MostAsked, t)
		}
	}
	for id, rv := range reviewers {
		rv.FastShare = float64(rv.FastApprovals) / float64(rv.Decisions)
		rv.MedianSeconds = Percentile(times[id], 0.5)
		rv.RubberStamper = rv.Decisions >= opt.MinDecisions && rv.FastShare > 0.5
		a.Reviewers = append(a.Reviewers, *rv)
	}
	sort.Slice(a.Reviewers, func(i, j int) bool {
		x, y := a.Reviewers[i], a.Reviewers[j]
		if x.RubberStamper != y.RubberStamper {
			return x.RubberStamper
		}
		if x.Decisions != y.Decisions {
			return x.Decisions > y.Decisions
		}
		return x.ID < y.ID
	})
	return a
}

// Percentile is the nearest-rank percentile (0 < p ≤ 1) of xs; 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p*float64(len(s))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}
