package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
)

// A call waiting for a person outlives most MCP clients' patience (the
// TypeScript SDK gives up after 60 s unless progress resets its timer). So
// once it has waited the endpoint's answer_within for a person, the client
// is answered that it waits for approval, and the same call repeated in the
// same session (same tool, same arguments) rejoins it: it returns the
// outcome when there is one, or says again that it waits. The rejoin entry
// lives in the client-waits bucket, so any gateway replica answers the
// repeat; the request that returns the outcome deletes it by revision, so
// the outcome is returned once and a later identical call is a new call.

// rejoinKey is where a call of this session, tool and arguments is found
// again; "" where the client has no session (2026-07-28), which is then
// never told to call again.
func (ep *endpoint) rejoinKey(session, tool, digest string) string {
	if session == "" || digest == "" {
		return ""
	}
	// Length-prefixed parts: moving text between them moves the key.
	return "r." + hashID("", "rejoin/v1", ep.cfg.Name, ep.cfg.Agent, session, tool, digest)
}

// newSessionID is the id of an MCP session this replica starts: its mark,
// then 128 random bits.
func (g *Gateway) newSessionID() string { return g.sessionMark + "." + newNonce() }

// ownsSession reports whether this replica started the session: only it
// serves the session, so only it writes the session's rejoin entries.
// stdio's session is this process's.
func (g *Gateway) ownsSession(sessionID string, stdio bool) bool {
	if stdio {
		return true
	}
	mark, _, ok := strings.Cut(sessionID, ".")
	return ok && mark == g.sessionMark
}

// findRejoin is the flight that follows the call a repeated identical call
// rejoins; nil for a new call. mine: the call's session is this replica's,
// whose view of the entries then answers without asking the bucket.
func (ep *endpoint) findRejoin(ctx context.Context, key string, mine bool, t *tool) *flight {
	if key == "" {
		return nil
	}
	r, ok, err := ep.g.rejoins.Find(ctx, key, mine)
	if err != nil {
		ep.log.Warn("a repeated call could not be looked up; it is submitted as a new call", "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	return &flight{tool: t, rejoinKey: key, rejoined: &r, call: airlock.Call{ID: r.Call, Revision: r.Revision, Server: t.up.GetServer(), Tool: t.up.GetTool()}}
}

// delivered claims a rejoined call's outcome for this request (the entry
// goes, so the next identical call is new) and forgets whether a client
// waits for it. A request that lost the claim to a simultaneous identical
// one returns the outcome as well: it is the same outcome.
func (ep *endpoint) delivered(ctx context.Context, f *flight) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if f.rejoined != nil {
		if _, err := ep.g.rejoins.Deliver(ctx, f.rejoinKey, *f.rejoined); err != nil {
			ep.log.Warn("a rejoined call's outcome was returned but not marked delivered; the next identical call returns it again", "call", f.call.ID, "err", err)
		}
	}
	if err := ep.g.waits.Forget(ctx, ep.cfg.Agent, f.call.ID); err != nil {
		ep.log.Info("whether a client waits was not forgotten", "call", f.call.ID, "err", err)
	}
}

// hold records that a client waits for the call until until (now: it
// stopped waiting).
func (ep *endpoint) hold(ctx context.Context, callID string, until time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := ep.g.waits.Hold(ctx, ep.cfg.Agent, callID, clientwait.Presence{Endpoint: ep.cfg.Name, Until: until}); err != nil {
		ep.log.Info("whether a client waits was not recorded", "call", callID, "err", err)
	}
}

// pendingAnswer remembers the call for a repeated identical call and is
// the answer that says it waits for approval; nil when it cannot be
// remembered (the client then keeps waiting: telling it to call again
// would submit a second call).
func (ep *endpoint) pendingAnswer(ctx context.Context, f *flight, ar *airlockv1.ApprovalRequested) *mcp.CallToolResult {
	rev := max(ar.GetCall().GetRevision(), 1)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The last approval request may be decided already, the tool running:
	// then the client waits for the result instead of being told no one
	// has decided.
	rec, err := ep.g.approvals.Get(rctx, ep.cfg.Agent, f.call.ID, rev)
	if err != nil || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		return nil
	}
	if f.rejoined == nil {
		if err := ep.g.rejoins.Remember(rctx, f.rejoinKey, clientwait.Rejoin{Call: f.call.ID, Revision: rev}); err != nil {
			ep.log.Warn("a call waiting for approval could not be remembered; its client keeps waiting", "call", f.call.ID, "err", err)
			return nil
		}
	}
	name := f.tool.def.Name
	msg := fmt.Sprintf("This call to %s has NOT run yet: it is %s. A person decides it in airlock's console (%s) or Slack. "+
		"To get its outcome, call %s again with exactly the same arguments in this session: that returns the tool's result once the call is approved and has run, "+
		"or the reason it did not run, or says again that it waits. Do not assume it ran, and do not change its arguments unless you mean a new call.",
		name, waitingText(ar), ep.consoleURL(f.call.ID, rev), name)
	res := errorResult("pending", f.call.ID, msg)
	if dl := ar.GetDeadline(); dl != nil {
		res.Meta["airlock/deadline"] = dl.AsTime().UTC().Format(time.RFC3339)
	}
	return res
}

// abandonSweep cancels, every so often, the endpoint's calls still waiting
// for a person that no client has waited for during abandon_after. Every
// replica may sweep: a cancel of a call already decided or canceled changes
// nothing.
func (ep *endpoint) abandonSweep(ctx context.Context) {
	after := ep.cfg.AbandonAfter
	if after <= 0 {
		return
	}
	tick := time.NewTicker(min(max(after/4, time.Second), time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		gone, err := ep.g.waits.Absent(ctx, ep.cfg.Name, time.Now().Add(-after))
		if err != nil {
			ep.log.Warn("calls nobody waits for could not be listed; trying again later", "err", err)
			continue
		}
		for _, a := range gone {
			ep.withdraw(a.Call, fmt.Sprintf("no MCP client has waited for it since %s (gateway endpoint %s cancels such calls after abandon_after %s)",
				a.Until.UTC().Format(time.RFC3339), ep.cfg.Name, after), 15*time.Second)
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := ep.g.waits.Forget(fctx, a.Agent, a.Call); err != nil {
				ep.log.Info("whether a client waits was not forgotten", "call", a.Call, "err", err)
			}
			cancel()
		}
	}
}
