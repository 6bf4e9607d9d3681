package suggest

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
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Load reads every call decided since since from the audit store (one
// pass, in stream order) with its policy decision and outcome. A row it
// cannot read is skipped: it is no evidence for anything, and a proposal
// never stands on it.
func Load(ctx context.Context, rd store.Reader, since time.Time) ([]Call, error) {
	decided, _, err := load(ctx, rd, since)
	return decided, err
}

// load is Load, and the policy's decision rows it read (what a replay reads).
func load(ctx context.Context, rd store.Reader, since time.Time) ([]Call, []store.Row, error) {
	var decisions []store.Row
	byKey := map[string]*Call{}
	var order []string
	at := func(r store.Row) *Call {
		k := callref.Ref{Agent: r.Agent, Call: r.Call, Rev: r.Revision}.Key()
		c := byKey[k]
		if c == nil {
			c = &Call{Agent: r.Agent, CallID: r.Call, Revision: r.Revision, Outcome: Pending}
			byKey[k] = c
			order = append(order, k)
		}
		return c
	}
	err := rd.Each(ctx, store.Filter{Since: since}, func(r store.Row) error {
		switch r.Type {
		case subject.ApprovalRequested, subject.Allowed, subject.Denied:
			decisions = append(decisions, r)
			ev := &airlockv1.Event{}
			if protojson.Unmarshal([]byte(r.Payload), ev) != nil {
				return nil
			}
			var call *airlockv1.ToolCall
			var d *airlockv1.Decision
			switch b := ev.GetBody().(type) {
			case *airlockv1.Event_ApprovalRequested:
				call, d = b.ApprovalRequested.GetCall(), b.ApprovalRequested.GetDecision()
			case *airlockv1.Event_Allowed:
				call, d = b.Allowed.GetCall(), b.Allowed.GetDecision()
			case *airlockv1.Event_Denied:
				call, d = b.Denied.GetCall(), b.Denied.GetDecision()
			default:
				return nil
			}
			// The row's columns say whose call it is (the stream subject);
			// the payload's agent is what was written and must agree.
			if call.GetAgentId() != r.Agent {
				return nil
			}
			c := at(r)
			c.Server, c.Tool, c.Args = call.GetServer(), call.GetTool(), call.GetArguments()
			c.OnBehalfOf, c.Verified, c.Decision, c.AskedAt = call.GetOnBehalfOf(), call.GetOnBehalfOfVerified(), d, r.Time
			c.Redacted = strings.Contains(r.Payload, `"`+record.Mask+`"`)
			switch r.Type {
			case subject.Allowed:
				c.Outcome, c.DecidedAt = Allowed, r.Time
			case subject.Denied:
				c.Outcome, c.DecidedAt = Denied, r.Time
			}
		case subject.Approved:
			ev := &airlockv1.Event{}
			if protojson.Unmarshal([]byte(r.Payload), ev) != nil {
				return nil
			}
			a := ev.GetApproved()
			c := at(r)
			c.Outcome, c.DecidedAt = Approved, r.Time
			if a.GetEdited() {
				c.Outcome = Edited
			}
			c.Approvers = nil
			for _, v := range a.GetVotes() {
				c.Approvers = append(c.Approvers, v.GetBy().GetId())
			}
			if len(c.Approvers) == 0 && r.ActorID != "" {
				c.Approvers = []string{r.ActorID}
			}
		case subject.Rejected:
			c := at(r)
			c.Outcome, c.DecidedAt = Rejected, r.Time
		case subject.ChangesRequested:
			c := at(r)
			c.Outcome, c.DecidedAt = ChangesRequested, r.Time
		case subject.Expired:
			c := at(r)
			c.Outcome, c.DecidedAt = Expired, r.Time
		case subject.Canceled:
			c := at(r)
			if c.Outcome == Pending {
				c.Outcome, c.DecidedAt = Canceled, r.Time
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("suggest: read the decided calls from the %s: %w", rd.Source(), err)
	}
	out := make([]Call, 0, len(order))
	for _, k := range order {
		if c := byKey[k]; c.Decision != nil {
			out = append(out, *c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AskedAt.Before(out[j].AskedAt) })
	return out, decisions, nil
}

// rowsReader replays decision rows already read: each proof then costs
// the decisions, not another pass over the whole trail.
type rowsReader struct {
	store.Reader
	rows []store.Row
}

func (m rowsReader) Each(ctx context.Context, f store.Filter, fn func(store.Row) error) error {
	for _, r := range f.Apply(m.rows) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
