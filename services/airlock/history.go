package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// historyKind is one kind of call in a generated history: who makes it,
// with what arguments, and what reviewers do when they are asked.
type historyKind struct {
	weight              int
	agent, server, tool string
	args                func(r *rand.Rand) map[string]any
	// verdict is what a reviewer decides when asked.
	verdict func(r *rand.Rand) airlockv1.DecisionKind
}

func always(k airlockv1.DecisionKind) func(*rand.Rand) airlockv1.DecisionKind {
	return func(*rand.Rand) airlockv1.DecisionKind { return k }
}

const (
	approve = airlockv1.DecisionKind_DECISION_KIND_APPROVE
	reject  = airlockv1.DecisionKind_DECISION_KIND_REJECT
	changes = airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES
)

// historyMix is a realistic mix for the default policy: routine writes
// people always approve (documentation pages, the team's report), writes
// they reject (configuration under /etc, mail to strangers), risky calls
// (shell commands, deletes) and reads the policy allows by itself.
func historyMix() []historyKind {
	words := []string{"intro", "setup", "faq", "api", "deploy", "usage", "notes", "changes"}
	return []historyKind{
		{50, "writer-bot", "fs", "write_file", func(r *rand.Rand) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/srv/app/docs/%s-%d.md", words[r.IntN(len(words))], r.IntN(40)), "content": fmt.Sprintf("# page %d\n", r.IntN(1000))}
		}, always(approve)},
		{8, "writer-bot", "fs", "write_file", func(r *rand.Rand) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/etc/app/%s.conf", words[r.IntN(len(words))]), "content": "listen 0.0.0.0\n"}
		}, func(r *rand.Rand) airlockv1.DecisionKind {
			if r.IntN(10) < 7 {
				return reject
			}
			return changes
		}},
		{12, "reporter-bot", "mail", "send_message", func(r *rand.Rand) map[string]any {
			return map[string]any{"to": "team@example.com", "subject": []string{"daily report", "weekly report"}[r.IntN(2)], "body": fmt.Sprintf("%d builds green", r.IntN(100))}
		}, always(approve)},
		{4, "reporter-bot", "mail", "send_message", func(r *rand.Rand) map[string]any {
			return map[string]any{"to": fmt.Sprintf("someone%d@elsewhere.example", r.IntN(50)), "subject": "daily report", "body": "numbers"}
		}, always(reject)},
		{10, "ops-bot", "sh", "run_command", func(r *rand.Rand) map[string]any {
			return map[string]any{"command": fmt.Sprintf("systemctl restart app-%d", r.IntN(4))}
		}, always(approve)},
		{6, "ops-bot", "fs", "delete_file", func(r *rand.Rand) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/srv/data/%d.db", r.IntN(20))}
		}, func(r *rand.Rand) airlockv1.DecisionKind {
			if r.IntN(2) == 0 {
				return reject
			}
			return approve
		}},
		{10, "writer-bot", "fs", "read_file", func(r *rand.Rand) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/srv/app/docs/%s-%d.md", words[r.IntN(len(words))], r.IntN(40))}
		}, nil},
	}
}

// historyStats counts what a generated history did.
type historyStats struct {
	Calls, Asked, Allowed, Denied int
	// Decided by reviewers, per kind.
	Approved, Rejected, Changes int
}

// historyGen records decided calls through the real services: it submits
// each call to the intake stream as an agent does, waits for the policy
// service's decision, and when a person is asked decides as a reviewer
// through the approval service's API.
type historyGen struct {
	js        jetstream.JetStream
	stream    string
	approvals *approvalapi.Client
	reviewers []string
	rng       *rand.Rand
	seq       int
	prefix    string
	// decisions reads the policy's decisions as they are stored, from
	// before the first call is submitted; outcomes holds what it read of
	// the calls submitted and not yet settled ("<agent>/<call>" → the
	// policy's outcome, "" until read).
	decisions jetstream.MessagesContext
	outcomes  map[string]string
}

// run records n calls of mix (chosen by weight), extra calls first.
func (h *historyGen) run(ctx context.Context, mix []historyKind, n int) (historyStats, error) {
	total := 0
	for _, k := range mix {
		total += k.weight
	}
	var st historyStats
	const batch = 50 // submitted together, then decided in order
	for done := 0; done < n; done += batch {
		type sent struct {
			call *airlockv1.ToolCall
			kind historyKind
		}
		var pending []sent
		for i := done; i < min(n, done+batch); i++ {
			pick := h.rng.IntN(total)
			var k historyKind
			for _, k = range mix {
				if pick < k.weight {
					break
				}
				pick -= k.weight
			}
			c, err := h.submit(ctx, k.agent, k.server, k.tool, k.args(h.rng))
			if err != nil {
				return st, err
			}
			pending = append(pending, sent{c, k})
		}
		for _, p := range pending {
			if err := h.settle(ctx, p.call, p.kind.verdict, &st); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// submit puts one call in the intake stream, as an agent does.
func (h *historyGen) submit(ctx context.Context, agent, server, tool string, args map[string]any) (*airlockv1.ToolCall, error) {
	st, err := structpb.NewStruct(args)
	if err != nil {
		return nil, fmt.Errorf("history: arguments: %w", err)
	}
	h.seq++
	c := &airlockv1.ToolCall{CallId: fmt.Sprintf("%s%d", h.prefix, h.seq), AgentId: agent, Server: server, Tool: tool, Arguments: st, Revision: 1}
	ev := &airlockv1.Event{AgentId: agent, CallId: c.CallId, Revision: 1, Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: c}}}
	msg, err := bus.EncodeRequest(ev, "agent/"+agent, "")
	if err != nil {
		return nil, fmt.Errorf("history: encode call: %w", err)
	}
	if h.decisions == nil {
		filters := make([]string, 0, len(subject.PolicyOutcomes))
		for _, typ := range subject.PolicyOutcomes {
			filters = append(filters, subject.OfType(typ))
		}
		cons, err := h.js.OrderedConsumer(ctx, h.stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			return nil, fmt.Errorf("history: read the policy's decisions: %w", err)
		}
		if h.decisions, err = cons.Messages(); err != nil {
			return nil, fmt.Errorf("history: read the policy's decisions: %w", err)
		}
		h.outcomes = map[string]string{}
	}
	h.outcomes[agent+"/"+c.CallId] = ""
	if _, err := h.js.PublishMsg(ctx, msg); err != nil {
		return nil, fmt.Errorf("history: submit call %s: %w", c.CallId, err)
	}
	return c, nil
}

// outcome waits for the policy's decision about c, which submit sent:
// allowed, denied or approval_requested. It reads the decisions as they
// come (waiting for a message, not polling the stream) and keeps those of
// the other calls submitted for when they are asked for.
func (h *historyGen) outcome(ctx context.Context, c *airlockv1.ToolCall) (string, error) {
	key := c.AgentId + "/" + c.CallId
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for h.outcomes[key] == "" {
		m, err := h.decisions.Next(jetstream.NextContext(wctx))
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case wctx.Err() != nil:
			return "", fmt.Errorf("history: the policy service did not decide call %s within 15s: is it running?", c.CallId)
		case err != nil:
			return "", fmt.Errorf("history: read the decision of %s: %w", c.CallId, err)
		}
		if p, err := subject.Parse(m.Subject()); err == nil {
			if got, sent := h.outcomes[p.Agent+"/"+p.Call]; sent && got == "" {
				h.outcomes[p.Agent+"/"+p.Call] = p.Type
			}
		}
	}
	typ := h.outcomes[key]
	delete(h.outcomes, key)
	return typ, nil
}

// stop ends the reading of the policy's decisions.
func (h *historyGen) stop() {
	if h.decisions != nil {
		h.decisions.Stop()
	}
}

// settle waits for c's decision and, when a person is asked, decides it.
func (h *historyGen) settle(ctx context.Context, c *airlockv1.ToolCall, verdict func(*rand.Rand) airlockv1.DecisionKind, st *historyStats) error {
	st.Calls++
	typ, err := h.outcome(ctx, c)
	if err != nil {
		return err
	}
	switch typ {
	case subject.Allowed:
		st.Allowed++
		return nil
	case subject.Denied:
		st.Denied++
		return nil
	}
	st.Asked++
	kind := approve
	if verdict != nil {
		kind = verdict(h.rng)
	}
	req := &airlockv1.DecideRequest{AgentId: c.AgentId, CallId: c.CallId, Kind: kind,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: h.reviewers[h.rng.IntN(len(h.reviewers))], Channel: "console"}}
	switch kind {
	case approve:
		st.Approved++
	case reject:
		st.Rejected++
		req.Reason = "not this one"
	case changes:
		st.Changes++
		req.Reason = "use the staging path"
	}
	// The approval service records the ask moments after the policy does.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := h.approvals.Decide(ctx, req)
		if err == nil && resp.GetChanged() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("history: decide call %s: %v %s", c.CallId, err, resp.GetMessage())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
