package record

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Filter selects audit rows. Empty fields match everything; set fields
// must all match. Results are in stream order (by Seq).
type Filter struct {
	Call   string `json:"call_id,omitempty"`
	Thread string `json:"thread_id,omitempty"`
	Agent  string `json:"agent_id,omitempty"`
	// Tool matches "server__tool" or the bare tool name, and selects every
	// event of the calls made to that tool (events such as `rejected` or
	// `completed` do not repeat the tool themselves).
	Tool string `json:"tool,omitempty"`
	// Actor matches the actor id (a reviewer, an agent, a service).
	Actor string `json:"actor,omitempty"`
	// Type is an event type such as "approved".
	Type string `json:"type,omitempty"`
	// Decision is allow, deny, ask, approve, reject, request_changes, expire, cancel.
	Decision string `json:"decision,omitempty"`
	// DecidedBy matches Row.DecidedBy exactly ("rule:ask-writes") or by its
	// kind ("human", "rule", "grant", "timeout"), and only decisions (rows
	// with a Decision): a sign-in, a token or a rule change has an actor
	// but decides no call.
	DecidedBy string `json:"decided_by,omitempty"`
	// Grant is a standing grant id: its creation, uses, revocation, expiry
	// and the decisions it made.
	Grant string    `json:"grant_id,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"` // exclusive
	// AfterSeq returns only rows with a larger sequence (paging).
	AfterSeq uint64 `json:"after_seq,omitempty"`
	// ExcludeAgents leaves out the rows of these agents (a summary that
	// has read its share of one agent's rows reads on past them).
	ExcludeAgents []string `json:"exclude_agents,omitempty"`
	// Limit caps the rows returned; 0 means no limit.
	Limit int `json:"limit,omitempty"`
}

// ToolKey is the "server__tool" name of a row's tool, or "" when the row has none.
func ToolKey(server, tool string) string {
	if tool == "" {
		return ""
	}
	if server == "" {
		return tool
	}
	return server + "__" + tool
}

// MatchTool reports whether a row's server and tool match the filter's Tool.
func (f Filter) MatchTool(server, tool string) bool {
	return f.Tool == "" || tool != "" && (f.Tool == tool || f.Tool == ToolKey(server, tool))
}

// Match reports whether r passes every field but Tool and Limit; callTools
// says whether r's call is one of the Tool's calls (ignored when Tool is empty).
func (f Filter) Match(r Row, callOfTool bool) bool {
	switch {
	case f.Call != "" && r.Call != f.Call,
		f.Thread != "" && r.Thread != f.Thread,
		f.Agent != "" && r.Agent != f.Agent,
		f.Actor != "" && r.ActorID != f.Actor,
		f.Type != "" && r.Type != f.Type,
		f.Decision != "" && r.Decision != f.Decision,
		f.DecidedBy != "" && (r.Decision == "" || r.DecidedBy != f.DecidedBy && !strings.HasPrefix(r.DecidedBy, f.DecidedBy+":")),
		f.Grant != "" && r.GrantID != f.Grant,
		!f.Since.IsZero() && r.Time.Before(f.Since),
		!f.Until.IsZero() && !r.Time.Before(f.Until),
		f.AfterSeq != 0 && r.Seq <= f.AfterSeq,
		slices.Contains(f.ExcludeAgents, r.Agent),
		f.Tool != "" && !callOfTool && !f.MatchTool(r.Server, r.Tool):
		return false
	}
	return true
}

// Apply filters rows (in stream order) in memory, the way the ClickHouse
// store does in SQL.
func (f Filter) Apply(rows []Row) []Row {
	// A call is an agent's call id: two agents may use the same one.
	type callKey struct{ agent, call string }
	calls := map[callKey]bool{}
	if f.Tool != "" {
		for _, r := range rows {
			if f.MatchTool(r.Server, r.Tool) {
				calls[callKey{r.Agent, r.Call}] = true
			}
		}
	}
	var out []Row
	for _, r := range rows {
		if f.Match(r, calls[callKey{r.Agent, r.Call}]) {
			out = append(out, r)
			if f.Limit > 0 && len(out) == f.Limit {
				break
			}
		}
	}
	return out
}

// ParseSince reads "7d", "36h", "90m" or an RFC 3339 time, relative to now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	var n float64
	var unit string
	if _, err := fmt.Sscanf(s, "%g%s", &n, &unit); err == nil && unit == "d" {
		return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("time %q: use a duration such as 7d or 12h, a date 2026-01-31, or an RFC 3339 time", s)
}
