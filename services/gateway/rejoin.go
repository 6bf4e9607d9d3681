package gateway

import (
	"context"
	"errors"
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
//
// A session lives in the replica that started it: when that replica dies,
// its client starts a new session, whose key is another. So a call waiting
// for a person is also offered under a key without the session; an
// identical call from another session of the endpoint that finds no entry
// of its own rejoins the offered call when no client waits for it any more
// (adopt), and once answered "pending" has its own entry. A call a client still waits
// for is never taken: the identical call is a new one.

// rejoinKey is where a call of this session, tool and arguments is found
// again; "" where the client has no session (2026-07-28), which is then
// never told to call again.
func (ep *endpoint) rejoinKey(session, tool, digest string) string {
	if session == "" || digest == "" {
		return ""
	}
	// Length-prefixed parts: moving text between them moves the key.
	return clientwait.RejoinPrefix + hashID("", "rejoin/v1", ep.cfg.Name, ep.cfg.Agent, session, tool, digest)
}

// offerKey is where an identical call made in another session of the
// endpoint finds the call ("" where the call cannot be rejoined): the
// endpoint, its agent, the person it acts for and its profile (another
// configuration may bind the same names to another person), the tool and
// the arguments, length-prefixed, and no session.
func (ep *endpoint) offerKey(rejoinKey, tool, digest string) string {
	if rejoinKey == "" {
		return ""
	}
	return clientwait.OfferPrefix + hashID("", "offer/v2", ep.cfg.Name, ep.cfg.Agent, ep.cfg.OnBehalfOf, ep.cfg.Profile, tool, digest)
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
	if !ok || ep.leftover(ctx, key, r) {
		return nil
	}
	return &flight{tool: t, rejoinKey: key, rejoined: &r, call: airlock.Call{ID: r.Call, Revision: r.Revision, Server: t.up.GetServer(), Tool: t.up.GetTool()}}
}

// offer makes a call this request submitted, now waiting for a person at
// revision rev, one an identical call of another session of the endpoint
// may rejoin once no client waits for it (adopt). It is written once, when
// the call first waits for a person (replacing the offer of an older
// identical call: a new call is made only when that one could not be
// rejoined), and rewritten only for a new revision, and only while the key
// still holds what this request wrote: an identical call made since, which
// offered itself, keeps its offer. A write that failed is tried again with
// the answer "pending", unless the key offers another call by then.
func (ep *endpoint) offer(ctx context.Context, f *flight, rev uint32) error {
	if f.offerKey == "" || f.rejoined != nil || !f.submit {
		return nil
	}
	f.offerMu.Lock()
	defer f.offerMu.Unlock()
	if f.offerGone || f.offered != nil && f.offered.Revision == rev {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	next := clientwait.Rejoin{Call: f.call.ID, Revision: rev, Endpoint: ep.cfg.Name}
	var err error
	switch {
	case f.offered != nil:
		var replaced bool
		var r clientwait.Rejoin
		if r, replaced, err = ep.g.waits.Update(ctx, f.offerKey, *f.offered, next); err == nil {
			f.offered, f.offerGone = &r, !replaced
		}
	default:
		if f.offerFailed { // it may have been stored, and displaced since
			if r, ok, ferr := ep.g.waits.Find(ctx, f.offerKey); ferr == nil && ok && r.Call != f.call.ID {
				f.offerGone = true
				return nil
			}
		}
		var r clientwait.Rejoin
		if r, err = ep.g.waits.Join(ctx, f.offerKey, next); err == nil {
			f.offered = &r
		}
	}
	f.offerFailed = err != nil
	if err != nil {
		ep.log.Info("a call waiting for a person was not offered to the endpoint's other sessions; the same call from a new session is a new call", "call", f.call.ID, "err", err)
	}
	return err
}

// unoffer takes the offer of f's call back, if it is still the call
// offered, so that an identical call of another session is a new call.
func (ep *endpoint) unoffer(ctx context.Context, f *flight) {
	if f.offerKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	f.offerMu.Lock()
	offered, gone := f.offered, f.offerGone
	f.offerGone = true // taken back: a revision seen late does not offer it again
	f.offerMu.Unlock()
	if gone {
		return
	}
	var err error
	if offered == nil { // written by another request (this session's first), or in doubt
		var r clientwait.Rejoin
		var ok bool
		if r, ok, err = ep.g.waits.Find(ctx, f.offerKey); err == nil && ok && r.Call == f.call.ID {
			offered = &r
		}
	}
	if offered != nil {
		_, err = ep.g.waits.Deliver(ctx, f.offerKey, *offered)
	}
	if err != nil {
		ep.log.Warn("a call's offer to the endpoint's other sessions was not taken back; the same call from a new session may return its outcome again", "call", f.call.ID, "err", err)
	}
}

// adopt is the flight that follows the call an identical call made in
// another session of the endpoint offered, when no client waits for it any
// more (its session answered "pending", or the replica renewing its lease
// is gone); nil when there is none or a client still waits for it (this
// request is then a new call, as it is without a session key). err is
// set only when ctx ended meanwhile.
func (ep *endpoint) adopt(ctx context.Context, key, offer string, t *tool) (*flight, error) {
	if offer == "" {
		return nil, nil
	}
	r, ok, err := ep.g.waits.Find(ctx, offer)
	if err != nil {
		ep.log.Warn("an offered call could not be looked up; the call is submitted as a new call", "err", err)
		return nil, nil
	}
	if !ok {
		return nil, nil
	}
	free, err := ep.unattended(ctx, r.Call)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		ep.log.Warn("whether a client waits for an offered call could not be read; the call is submitted as a new call", "call", r.Call, "err", err)
		return nil, nil
	case !free:
		return nil, nil
	}
	// The call's own client may have given up meanwhile, taking the offer
	// back: the call is joined only if the bucket still offers it as read.
	still, ok, err := ep.g.waits.Find(ctx, offer)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		ep.log.Warn("an offered call could not be looked up again; the call is submitted as a new call", "call", r.Call, "err", err)
		return nil, nil
	case !ok || !still.Same(r) || ep.leftover(ctx, offer, still):
		return nil, nil
	}
	// From now on the call is this session's too; its rejoin entry is
	// written only with the answer "pending", as for a call of its own (an
	// adopter that gives up first leaves nothing behind).
	return &flight{tool: t, rejoinKey: key, offerKey: offer, adopted: true, offered: &still, call: airlock.Call{ID: r.Call, Revision: r.Revision, Server: t.up.GetServer(), Tool: t.up.GetTool()}}, nil
}

// leftover reports whether the entry r found under key names a call whose
// outcome was returned already (claimed): its request ended without
// deleting it (its replica died, or the delete failed). Followed, it would
// swallow this new identical call and return an outcome the session had,
// so it is deleted (if still as read) and the request is a new call. A
// simultaneous identical request that found the entry before the claim
// still returns the outcome (Claim: the same session wins again). A claim
// that cannot be read leaves the entry to be followed: the claim at
// delivery still keeps the outcome from another session.
func (ep *endpoint) leftover(ctx context.Context, key string, r clientwait.Rejoin) bool {
	claimed, err := ep.g.waits.Claimed(ctx, ep.cfg.Agent, r.Call)
	if err != nil {
		ep.log.Warn("whether a found call's outcome was returned already could not be read; it is followed", "call", r.Call, "err", err)
		return false
	}
	if !claimed {
		return false
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := ep.g.rejoins.Deliver(dctx, key, r); err != nil {
		ep.log.Info("an entry naming a call whose outcome was returned was not deleted; the next identical call finds it and drops it again", "call", r.Call, "err", err)
	}
	return true
}

// unattended reports whether no client waits for the call: every request
// that waited for it stopped, or its lease ran out unrenewed (its replica
// is gone), less than a session_timeout ago — the old session would have
// been closed for idleness by then, and a repeat after that is a new call
// there too. A lease still running is watched until it runs out: a renewal
// meanwhile means a client waits (at most half a heartbeat's delay for a
// new call).
func (ep *endpoint) unattended(ctx context.Context, call string) (bool, error) {
	return ep.g.waits.Unattended(ctx, ep.cfg.Agent, call, ep.cfg.Name, ep.g.deps.Config.Gateway.SessionTimeout)
}

// errAnsweredElsewhere: the call's outcome went to another session's
// client (or ended longer ago than a repeat is answered it); for this
// request the identical call is a new call.
var errAnsweredElsewhere = errors.New("the call's outcome was returned to another session")

// outcomeKeptFor is how long after a call ended a request that found it
// (a repeat, an adoption, a request id sent again) is answered its
// outcome: a session_timeout, as a call is adopted only within a
// session_timeout of its last lease, and a lease's length more, for a
// lease that ran on past the end (its replica died as the outcome came).
// A client told to call again that waits longer makes a new call.
func (ep *endpoint) outcomeKeptFor() time.Duration {
	return ep.g.deps.Config.Gateway.SessionTimeout + leaseFor(ep.g.heartbeat)
}

// claimSkew is what a claim is kept beyond outcomeKeptFor: the end's time
// is the recording service's clock, the claim's the NATS server's.
const claimSkew = time.Minute

// outcomeTooOld reports whether the outcome of a call f found ended more
// than outcomeKeptFor ago: its delivery claim may have run out, so another
// session's client may have had it; the entries that led here are taken
// back, and the request is a new call.
func (ep *endpoint) outcomeTooOld(ctx context.Context, f *flight, out airlock.Outcome) bool {
	if out.At.IsZero() || time.Since(out.At) < ep.outcomeKeptFor() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if f.rejoined != nil {
		if _, err := ep.g.rejoins.Deliver(ctx, f.rejoinKey, *f.rejoined); err != nil {
			ep.log.Info("a rejoin entry naming a call that ended long ago was not deleted; the next identical call drops it again", "call", f.call.ID, "err", err)
		}
	}
	ep.unoffer(ctx, f)
	return true
}

// delivered claims a call's outcome for this request's session: false
// when another session's request returned it already (it is not this
// client's to have again). Won, the rejoin entry goes (the next identical
// call is new), the offer too, and whether a client waits is forgotten. A
// request of the same session that lost the entry to a simultaneous
// identical one returns the outcome as well: it is the same outcome.
func (ep *endpoint) delivered(ctx context.Context, f *flight) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	won := true // a call never offered is followed by its own request only
	if f.offerKey != "" {
		var err error
		// Kept as long as a request that finds the call may be answered
		// its outcome (outcomeTooOld), and no longer.
		if won, err = ep.g.waits.Claim(ctx, ep.cfg.Agent, f.call.ID, f.rejoinKey, ep.outcomeKeptFor()+claimSkew); err != nil {
			ep.log.Warn("a call's outcome could not be claimed for its session; it is returned all the same", "call", f.call.ID, "err", err)
			won = true
		}
	}
	if f.rejoined != nil {
		if _, err := ep.g.rejoins.Deliver(ctx, f.rejoinKey, *f.rejoined); err != nil {
			ep.log.Warn("a rejoined call's outcome was returned but not marked delivered; the next identical call returns it again", "call", f.call.ID, "err", err)
		}
	}
	if !won {
		return false
	}
	ep.unoffer(ctx, f)
	if err := ep.g.waits.Forget(ctx, ep.cfg.Agent, f.call.ID); err != nil {
		ep.log.Info("whether a client waits was not forgotten", "call", f.call.ID, "err", err)
	}
	return true
}

// release ends the lease of the request waiter, whose client made the call
// and gave up on it: alone, no other request waits for the call, whose
// presence is then deleted (no session adopts it as it is withdrawn). A
// release that failed counts as alone: the offer is taken back all the
// same, which adopt looks at again.
func (ep *endpoint) release(ctx context.Context, callID, waiter string) (alone bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	alone, err := ep.g.waits.Release(ctx, ep.cfg.Agent, callID, waiter, ep.cfg.Name, time.Now())
	ep.g.vacancies.vacated(ep.leaseKey(callID))
	if err != nil {
		ep.log.Info("whether another client waits was not read; the call is withdrawn", "call", callID, "err", err)
		return true
	}
	return alone
}

// hold records, by the request's lease on call callID, that it waits for
// the call until until (now: it stopped waiting), giving up on the write
// after within. A failure is logged; it is returned for the one that
// matters (clientwait.ErrTooManyWaiters).
func (ep *endpoint) hold(ctx context.Context, callID string, lease *clientwait.Lease, until time.Time, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
	defer cancel()
	err := lease.Hold(ctx, clientwait.Presence{Endpoint: ep.cfg.Name, Until: until})
	if err != nil && !errors.Is(err, clientwait.ErrTooManyWaiters) {
		ep.log.Info("whether a client waits was not recorded", "call", callID, "err", err)
	}
	if !until.After(time.Now()) {
		ep.g.vacancies.vacated(ep.leaseKey(callID))
	}
	return err
}

// leaseKey names call callID of the endpoint's agent among vacancies.
func (ep *endpoint) leaseKey(callID string) string { return ep.cfg.Agent + "." + callID }

// forgetRejoin deletes the rejoin entry f's request wrote for an answer
// "pending" it did not give: left, it would take a later identical call of
// the session for this one.
func (ep *endpoint) forgetRejoin(ctx context.Context, f *flight) {
	if f.remembered == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := ep.g.rejoins.Deliver(ctx, f.rejoinKey, *f.remembered); err != nil {
		ep.log.Warn("a rejoin entry for an answer not given was not deleted; the next identical call of the session follows this call", "call", f.call.ID, "err", err)
	}
	f.remembered = nil
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
		r, err := ep.g.rejoins.Join(rctx, f.rejoinKey, clientwait.Rejoin{Call: f.call.ID, Revision: rev, Endpoint: ep.cfg.Name})
		if err != nil {
			ep.log.Warn("a call waiting for approval could not be remembered; its client keeps waiting", "call", f.call.ID, "err", err)
			return nil
		}
		f.remembered = &r
		// Its client may call again from a new session (its replica died):
		// told to call again, it must find the call there too.
		if ep.offer(rctx, f, rev) != nil {
			ep.forgetRejoin(rctx, f) // its client keeps waiting
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
	everyTick(ctx, min(max(after/4, time.Second), time.Minute), func() {
		gone, err := ep.g.waits.Absent(ctx, ep.cfg.Name, time.Now().Add(-after))
		if err != nil {
			ep.log.Warn("calls nobody waits for could not be listed; trying again later", "err", err)
			return
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
	})
}

// everyTick runs sweep every interval until ctx ends.
func everyTick(ctx context.Context, interval time.Duration, sweep func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sweep()
	}
}

// endedSweep removes, every so often, what the endpoint keeps in the
// client-waits bucket about calls that ended more than outcomeKeptFor ago:
// their rejoin entries, offers and presences. A repeat that found them
// would be a new call all the same (outcomeTooOld), and a client told to
// call again that never does would otherwise leave them for the bucket's
// TTL (30 days). Every replica may sweep: a removal is by revision, so an
// entry written since stays.
func (ep *endpoint) endedSweep(ctx context.Context) {
	keep := ep.outcomeKeptFor()
	everyTick(ctx, min(max(keep/4, time.Second), 5*time.Minute), func() { ep.sweepEnded(ctx, keep) })
}

// sweepEnded is one round of endedSweep.
func (ep *endpoint) sweepEnded(ctx context.Context, keep time.Duration) {
	// endedLongAgo: revision rev of the call (0: the newest) ended more
	// than keep ago. A call that cannot be read, or is not known (any
	// more), is left to the bucket's TTL.
	endedLongAgo := func(call string, rev uint32) bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, ended, err := ep.client.Ended(rctx, call, rev)
		return err == nil && ended && !out.At.IsZero() && time.Since(out.At) >= keep
	}
	entries, err := ep.g.waits.Entries(ctx, ep.cfg.Name)
	if err != nil {
		ep.log.Warn("the calls clients were told to call again for could not be listed; trying again later", "err", err)
	}
	for _, e := range entries {
		if !endedLongAgo(e.Call, e.Revision) {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := ep.g.waits.DropEntry(dctx, e); err != nil {
			ep.log.Info("an entry of a call that ended long ago was not removed; the next sweep tries again", "call", e.Call, "err", err)
		}
		cancel()
	}
	gone, err := ep.g.waits.Absent(ctx, ep.cfg.Name, time.Now().Add(-keep))
	if err != nil {
		ep.log.Warn("calls nobody waits for could not be listed; trying again later", "err", err)
	}
	for _, a := range gone {
		if a.Agent != ep.cfg.Agent || !endedLongAgo(a.Call, 0) {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := ep.g.waits.DropPresence(dctx, a); err != nil {
			ep.log.Info("whether a client waits for a call that ended long ago was not removed; the next sweep tries again", "call", a.Call, "err", err)
		}
		cancel()
	}
}
