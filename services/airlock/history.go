package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ingress"
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
	// decisions reads the policy's decisions in the order they were
	// stored, from the stream's first (started by the first outcome);
	// outcomes holds those read and not yet asked for ("<agent>/<call>" →
	// the policy's outcome).
	decisions jetstream.MessagesContext
	outcomes  map[string]string
	// notices hears the policy's over-budget notices (core NATS, never
	// stored): a call dropped over its agent's budget has no event at all,
	// and its wait would otherwise end only at its timeout, saying nothing
	// of why.
	notices *nats.Subscription
	// mu guards refusals, waiting and interrupt, which the notices'
	// handler touches from its own goroutine.
	mu sync.Mutex
	// refusals holds why the policy decided nothing of a call
	// ("<agent>/<call>" → the sentence): its `invalid` event's reason, or
	// an over-budget notice's.
	refusals map[string]string
	// waiting is the call outcome waits for, and interrupt ends that wait
	// when a notice about it is heard.
	waiting   string
	interrupt context.CancelFunc
}

// run records n calls of mix (chosen by weight), extra calls first.
func (h *historyGen) run(ctx context.Context, mix []historyKind, n int) (historyStats, error) {
	total := 0
	for _, k := range mix {
		total += k.weight
	}
	var st historyStats
	if h.decisions == nil {
		// Before the first submit, so that no notice about it is missed.
		if err := h.follow(ctx); err != nil {
			return st, err
		}
	}
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
	if _, err := h.js.PublishMsg(ctx, msg); err != nil {
		return nil, fmt.Errorf("history: submit call %s: %w", c.CallId, err)
	}
	return c, nil
}

// outcome waits for the policy's decision about c (submitted here or by any
// other way): allowed, denied or approval_requested. It reads the decisions
// as they come (waiting for a message, not polling the stream) and keeps
// those of other calls for when they are asked for.
func (h *historyGen) outcome(ctx context.Context, c *airlockv1.ToolCall) (string, error) {
	if h.decisions == nil {
		if err := h.follow(ctx); err != nil {
			return "", err
		}
	}
	key := c.AgentId + "/" + c.CallId
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	h.mu.Lock()
	h.waiting, h.interrupt = key, cancel
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.waiting, h.interrupt = "", nil
		h.mu.Unlock()
	}()
	for h.outcomes[key] == "" {
		// A refused call is never decided: say why rather than wait.
		if why := h.refusal(key); why != "" {
			return "", fmt.Errorf("history: the policy service did not decide call %s of %s: %s", c.CallId, c.AgentId, why)
		}
		m, err := h.decisions.Next(jetstream.NextContext(wctx))
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case wctx.Err() != nil && h.refusal(key) != "":
			continue // interrupted by a notice about this call
		case wctx.Err() != nil:
			return "", fmt.Errorf("history: the policy service did not decide call %s within 15s: is it running?", c.CallId)
		case err != nil:
			return "", fmt.Errorf("history: read the decision of %s: %w", c.CallId, err)
		}
		p, err := subject.Parse(m.Subject())
		if err != nil {
			continue
		}
		if p.Type == subject.Invalid {
			reason := "it refused the request as invalid"
			if ev, err := envelope.Decode(m.Data(), m.Headers()); err == nil && ev.GetInvalid().GetReason() != "" {
				reason = ev.GetInvalid().GetReason()
			}
			h.refuse(p.Agent+"/"+p.Call, reason)
			continue
		}
		h.outcomes[p.Agent+"/"+p.Call] = p.Type
	}
	typ := h.outcomes[key]
	delete(h.outcomes, key)
	return typ, nil
}

// follow starts reading the policy's decisions, its refusals (`invalid`)
// and its over-budget notices.
func (h *historyGen) follow(ctx context.Context) error {
	filters := make([]string, 0, len(subject.PolicyOutcomes)+1)
	for _, typ := range append([]string{subject.Invalid}, subject.PolicyOutcomes...) {
		filters = append(filters, subject.OfType(typ))
	}
	h.refusals = map[string]string{}
	notices, err := h.js.Conn().Subscribe(subject.OverBudgetNotice("*", "*"), func(m *nats.Msg) {
		var n ingress.OverBudget
		if json.Unmarshal(m.Data, &n) == nil && n.Reason != "" {
			h.refuse(n.AgentID+"/"+n.CallID, n.Reason)
		}
	})
	if err != nil {
		return fmt.Errorf("history: hear the policy's over-budget notices: %w", err)
	}
	h.notices = notices
	// From the stream's first decision: a call may have been decided
	// before the first question (one submitted through the console's
	// REST API, say), and every decision stored is read exactly once.
	cons, err := h.js.OrderedConsumer(ctx, h.stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("history: read the policy's decisions: %w", err)
	}
	if h.decisions, err = cons.Messages(); err != nil {
		return fmt.Errorf("history: read the policy's decisions: %w", err)
	}
	h.outcomes = map[string]string{}
	return nil
}

// refuse notes why the policy decided nothing of key's call, and ends a
// wait for it.
func (h *historyGen) refuse(key, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refusals[key] == "" {
		h.refusals[key] = why
	}
	if h.waiting == key && h.interrupt != nil {
		h.interrupt()
	}
}

// refusal is why the policy decided nothing of key's call ("" when it was
// not refused).
func (h *historyGen) refusal(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refusals[key]
}

// stop ends the reading of the policy's decisions and notices.
func (h *historyGen) stop() {
	if h.decisions != nil {
		h.decisions.Stop()
	}
	if h.notices != nil {
		_ = h.notices.Unsubscribe()
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
