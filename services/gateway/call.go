package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
)

// flight is one tools/call on its way through airlock.
type flight struct {
	call airlock.Call
	tool *tool
	// fresh: this process submits the call for the first time, so the
	// endpoint's watcher sees all of its events; otherwise (a request sent
	// again, a confirmation answered) the call is followed from the stream.
	fresh bool
	// submit: the call still has to be submitted (not for a confirmation
	// answer, whose call exists).
	submit bool
	// rejoinKey: where a repeated identical call of this session finds the
	// call once its client was told to call again ("": it cannot be
	// rejoined, so the client is never told to; see rejoin.go).
	rejoinKey string
	// rejoined: the entry this request found and follows (nil: a new call).
	rejoined *clientwait.Rejoin
	// offerKey: where an identical call of another session of the endpoint
	// finds the call once no client waits for it ("": nowhere; rejoin.go).
	offerKey string
	// offered: the offer entry this request wrote or read (nil: none known);
	// offerGone: the key offers another call, or none, since; offerFailed:
	// the last write of it failed (it may be stored). Guarded by offerMu:
	// the watch and the "pending" answer both offer.
	offerMu     sync.Mutex
	offered     *clientwait.Rejoin
	offerGone   bool
	offerFailed bool
	// made: this request made the call (submitted it, or answers its
	// confirmation as its 2026-07-28 client's next round): its client
	// giving up withdraws it, unless another request waits for it. A
	// request that only follows the call (a repeat, one that adopted it)
	// withdraws nothing: the call stays offered.
	made bool
	// adopted: the call was made in another session, whose client stopped
	// waiting (adopt).
	adopted bool
	// remembered: the session's rejoin entry this request wrote for its
	// answer "pending" (nil: none).
	remembered *clientwait.Rejoin
	// since: when the request began, where finding the call took a while
	// (adopt, or a call whose outcome went to another session first): the
	// time to answer "pending" counts from then.
	since time.Time
	// notedID: this request added the call's derived id to the endpoint's
	// recent ids; a call refused before it was submitted takes it back.
	notedID bool
	// progress counts the request's progress notifications when several
	// calls share it (a run_code script's); nil: the call's own.
	progress *progressCount
}

// ClientCanceled is the reason a call is withdrawn with when the MCP client
// that made it gives up on it.
const ClientCanceled = "the MCP client canceled the request"

func (ep *endpoint) handler(t *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return ep.callTool(ctx, req, t)
	}
}

// callTool is one tools/call: submit it as the endpoint's agent, keep the
// client informed while it waits, let the endpoint's person confirm it
// when the policy allows, and answer with its outcome.
func (ep *endpoint) callTool(ctx context.Context, req *mcp.CallToolRequest, t *tool) (*mcp.CallToolResult, error) {
	args, err := decodeArgs(req.Params.Arguments, ep.maxArgs)
	if err != nil {
		return errorResult("invalid", "", err.Error()), nil
	}
	if req.Params.RequestState != "" {
		return ep.resume(ctx, req, t)
	}
	sessionID, stdio := sessionOf(req)
	requestID := ""
	if h := headerOf(req); h != nil {
		requestID = h.Get(requestHeader)
	}
	thread := ep.threadOf(sessionID, stdio)
	digest := ""
	if thread != "" { // without a session nothing is derived from the arguments
		digest = argsDigest(args)
	}
	key := ep.rejoinKey(thread, t.def.Name, digest)
	offer := ep.offerKey(key, t.def.Name, digest)
	began := time.Now()
	joined := ep.findRejoin(ctx, key, ep.g.ownsSession(sessionID, stdio), t)
	if joined != nil {
		joined.offerKey = offer
	} else {
		f, err := ep.adopt(ctx, key, offer, t)
		if err != nil {
			return nil, err // the client gave up while the call's lease ran out
		}
		joined = f
	}
	// A call whose outcome went to another session's client is not this
	// client's: the identical request is then a new call, whose id is
	// derived from the lost call's too (the request's own derived id may
	// be the lost call's: a JSON-RPC id sent again).
	lost := ""
	if joined != nil {
		if joined.adopted {
			joined.since = began
		}
		res, err := ep.follow(ctx, req, joined, false)
		if !errors.Is(err, errAnsweredElsewhere) {
			return res, err
		}
		lost = joined.call.ID
	}
	id := ep.callIDOf(sessionID, requestID, t.def.Name, digest)
	for attempt := 0; ; attempt++ {
		if lost == id {
			id = callIDAfter(id, lost)
		}
		f := &flight{tool: t, submit: true, made: true, rejoinKey: key, offerKey: offer, since: began, call: airlock.Call{
			ID:     id,
			Server: t.up.GetServer(), Tool: t.up.GetTool(), Args: args,
			Thread:      thread,
			OnBehalfOf:  ep.cfg.OnBehalfOf,
			Reason:      reasonOf(req, ep.cfg.Name),
			Annotations: t.annotations, AnnotationsTrusted: t.up.GetTrusted(),
		}}
		// Only a derived id can come again; a random one is always fresh.
		derived := sessionID != "" && requestID != ""
		f.fresh = !derived || !ep.recent.add(f.call.ID, time.Now())
		f.notedID = derived && f.fresh
		res, err := ep.follow(ctx, req, f, true)
		switch {
		case !errors.Is(err, errAnsweredElsewhere):
			return res, err
		case attempt == 2: // new calls do not go elsewhere: something else is wrong
			return errorResult("unavailable", id, "airlock returned this call's outcome to another session of the endpoint, and could not make a new call for this one. Try again in a moment."), nil
		}
		lost = id // the derived id came again, and its outcome went elsewhere
	}
}

// resume is a 2026-07-28 client's second round: its person answered the
// confirmation this gateway asked for (requestState says which call).
func (ep *endpoint) resume(ctx context.Context, req *mcp.CallToolRequest, t *tool) (*mcp.CallToolResult, error) {
	st, err := openState(ep.g.frontend, req.Params.RequestState, ep.cfg.Name, t.def.Name, time.Now())
	if err != nil {
		return errorResult("invalid", "", err.Error()), nil
	}
	var answer *mcp.ElicitResult
	if r, ok := req.Params.InputResponses[confirmKey].(*mcp.ElicitResult); ok {
		answer = r
	}
	f := &flight{tool: t, made: true, call: airlock.Call{ID: st.Call, Revision: st.Rev, Server: t.up.GetServer(), Tool: t.up.GetTool()}}
	// The state is valid for a day and may come back any number of times:
	// only a revision still pending is answered. Deciding one decided
	// already changes nothing but would store a decision_refused event per
	// request, uncharged; its client gets the call's outcome instead.
	if ep.stillPending(ctx, f.call.ID, st.Rev) {
		ep.answer(ctx, f, st.Rev, answer, st.Digest, formMode)
	}
	return ep.follow(ctx, req, f, false)
}

// stillPending reports whether revision rev of the call may still be
// decided. A record not found yet (its approval_requested event may
// precede it) or not readable counts as pending: the answer then goes to
// the approval service, which alone decides whether it counts.
func (ep *endpoint) stillPending(ctx context.Context, callID string, rev uint32) bool {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rec, err := ep.g.approvals.Get(gctx, ep.cfg.Agent, callID, rev)
	if err != nil {
		if apierr.CodeOf(err) != apierr.NotFound {
			ep.log.Info("whether a confirmed call still waits could not be read; the answer is sent", "call", callID, "err", err)
		}
		return true
	}
	return rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING
}

// follow waits for the call's outcome. With mayConfirm, an approval request
// the endpoint's person may answer is put to them (elicitation) or, when
// the client cannot ask, handled by the endpoint's elicitation_fallback.
//
// The wait runs on the handler's goroutine (the outcome reaches the client
// with no further hand-off); a watch goroutine, started only for a call
// that waits past a heartbeat or for a person, keeps the client informed
// and handles the approval request meanwhile.
func (ep *endpoint) follow(ctx context.Context, req *mcp.CallToolRequest, f *flight, mayConfirm bool) (*mcp.CallToolResult, error) {
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	w := &watch{ep: ep, ctx: ctx, req: req, f: f, mayConfirm: mayConfirm, stopWaiting: stopWaiting,
		events: make(chan *airlockv1.Event, 16), stop: make(chan struct{}), waiter: newNonce(), held: make(chan struct{})}
	w.lease = ep.g.waits.Lease(ep.cfg.Agent, f.call.ID, w.waiter)
	w.timer = time.AfterFunc(ep.g.heartbeat, func() { w.start(true) })
	if f.rejoinKey != "" {
		bound := ep.cfg.AnswerBound()
		if !f.since.IsZero() {
			bound = max(bound-time.Since(f.since), 0)
		}
		w.answerTimer = time.AfterFunc(bound, w.answerPending)
	}
	hook := airlock.OnEvent(w.event)
	var out airlock.Outcome
	var err error
	switch {
	case f.fresh:
		out, err = ep.watcher.DoFast(waitCtx, f.call, hook)
	default:
		if f.submit {
			_, err = ep.client.Submit(waitCtx, f.call)
		}
		if err == nil {
			out, err = ep.client.AwaitRevision(waitCtx, f.call.ID, max(f.call.Revision, 1), hook)
		}
	}
	w.timer.Stop()
	w.mu.Lock()
	w.ended = true
	if w.answerTimer != nil {
		w.answerTimer.Stop()
	}
	forPerson := w.ar != nil
	w.mu.Unlock()
	close(w.stop)
	w.renewing.Wait() // no renewal lands after this request's lease ends
	w.mu.Lock()
	leased := w.leased // a request refused every lease has none to end
	w.mu.Unlock()
	w.answering.Wait() // nor a rejoin entry written for an answer not given
	if c := w.confirmation(); c != nil {
		// Before the answer: a URL-mode prompt is told it completed on the
		// call's stream, which closes with the answer.
		c.finish(context.WithoutCancel(ctx))
	}
	// endLease ends this request's lease (now): it waits no more.
	endLease := func() { _ = ep.hold(ctx, f.call.ID, w.lease, time.Now(), 5*time.Second) } // logged
	if early, eerr := w.answered(); early != nil || eerr != nil {
		if leased {
			endLease()
		}
		return early, eerr
	}
	if err != nil {
		// The client gave up on the call (notifications/cancelled, or the
		// session ended). A call it made is withdrawn (one that needs no
		// person has no approval to cancel) unless another request waits
		// for it: its presence is deleted and its offer taken back first,
		// so no session adopts a call being withdrawn. A call it only
		// followed (repeated, or adopted from another session) stays as it
		// is, offered, for the next session to rejoin or abandon_after to
		// end: another session may have adopted it.
		gaveUp := ctx.Err() != nil
		withdraw := gaveUp && f.made
		if forPerson {
			if withdraw {
				if withdraw = ep.release(ctx, f.call.ID, w.waiter); withdraw {
					ep.unoffer(ctx, f) // another session's identical call is a new call
				}
			} else if leased {
				endLease()
			}
		}
		if gaveUp {
			if withdraw {
				go ep.withdraw(f.call.ID, ClientCanceled, 3*time.Second)
			}
			return nil, ctx.Err()
		}
		if errors.Is(err, airlock.ErrInvalid) {
			// With no outcome the SDK refused it before anything was
			// published: there is no call to follow if it comes again.
			if f.notedID && out.Status != airlock.StatusInvalid {
				ep.recent.forget(f.call.ID)
			}
			return errorResult("invalid", f.call.ID, "airlock refused the call as malformed: "+strings.TrimPrefix(err.Error(), airlock.ErrInvalid.Error()+": ")), nil
		}
		ep.log.Warn("a call could not be followed", "call", f.call.ID, "err", err)
		return errorResult("unavailable", f.call.ID, fmt.Sprintf("airlock could not take or follow the call (%v). Nothing is known to have run; try again in a moment.", err)), nil
	}
	// An outcome goes to one session: a call that waited for a person, or
	// was found again, or whose derived id came again (a JSON-RPC id sent
	// again: the call may exist, and have gone to another session), is
	// claimed first. The submitting request of a call made now wins (no
	// session adopts a call its client waits for).
	again := f.submit && !f.fresh && f.offerKey != ""
	found := f.rejoined != nil || f.adopted || again
	if found && ep.outcomeTooOld(ctx, f, out) {
		return nil, errAnsweredElsewhere
	}
	if (forPerson || found) && !ep.delivered(ctx, f) {
		return nil, errAnsweredElsewhere
	}
	return ep.result(f, out), nil
}

// watch is what happens beside a waiting call: progress and heartbeats,
// and the approval request its person may answer.
type watch struct {
	ep          *endpoint
	ctx         context.Context
	req         *mcp.CallToolRequest
	f           *flight
	mayConfirm  bool
	stopWaiting context.CancelFunc
	events      chan *airlockv1.Event
	stop        chan struct{} // closed when the wait ended
	timer       *time.Timer   // starts the watch at the first heartbeat
	// answerTimer answers "waiting for approval" once the call has waited
	// answer_within for a person (nil: the call cannot be rejoined).
	answerTimer *time.Timer
	once        sync.Once

	mu     sync.Mutex
	early  *mcp.CallToolResult // the answer instead of the outcome (2026-07-28 input required)
	err    error
	asking *confirmation // the prompt in flight, if any
	// ar: the call waits for a person (its approval request); nil before.
	ar    *airlockv1.ApprovalRequested
	ended bool // the wait is over: no early answer any more

	// waiter names this request's lease among the call's (clientwait's
	// Presence.Waiters); renewing runs its renewals, which end before
	// follow ends the lease: one goroutine at a time writes it.
	waiter   string
	lease    *clientwait.Lease
	renewing sync.WaitGroup
	renews   bool          // the renewals started
	leased   bool          // a lease was written (not refused): follow ends it
	held     chan struct{} // closed once the lease was first asked for
	// answering: an answer "pending" is being made (answerPending), which
	// follow waits for before it ends.
	answering sync.WaitGroup
}

// answerPending ends the wait of a call that waits for a person with the
// answer that it does (the client calls again for its outcome). A call
// that does not wait for a person, or whose person is being asked in the
// client right now, is looked at again a heartbeat later.
func (w *watch) answerPending() {
	w.mu.Lock()
	ar, busy, ended := w.ar, w.asking != nil || w.early != nil, w.ended
	if !ended {
		w.answering.Add(1)
	}
	w.mu.Unlock()
	if ended {
		return
	}
	defer w.answering.Done()
	if ar == nil || busy {
		w.mu.Lock()
		if !w.ended {
			w.answerTimer.Reset(w.ep.g.heartbeat)
		}
		w.mu.Unlock()
		return
	}
	res := w.ep.pendingAnswer(w.ctx, w.f, ar)
	w.mu.Lock()
	given := false
	switch {
	case w.ended || w.early != nil:
	case res == nil:
		w.answerTimer.Reset(w.ep.g.heartbeat)
	default:
		w.early, given = res, true
		w.stopWaiting()
	}
	w.mu.Unlock()
	if res != nil && !given {
		// The outcome, or another answer, came first: the rejoin entry
		// written for this one would find the call again.
		w.ep.forgetRejoin(w.ctx, w.f)
	}
}

// confirmation is the prompt in flight, if any.
func (w *watch) confirmation() *confirmation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.asking
}

// start runs the watch goroutine, once; beatFirst sends a heartbeat at once.
func (w *watch) start(beatFirst bool) {
	w.once.Do(func() { go w.run(beatFirst) })
}

// event is the wait's OnEvent hook: it must not block.
func (w *watch) event(ev *airlockv1.Event) {
	if ar := ev.GetApprovalRequested(); ar != nil {
		w.mu.Lock()
		w.ar = ar
		if !w.ended && !w.renews {
			w.renews = true
			w.renewing.Add(1)
			go w.renew()
		}
		w.mu.Unlock()
		w.start(false)
		select {
		case w.events <- ev:
		default: // busy with an earlier one; the call's outcome still comes
		}
	}
}

// answered is the result that ended the wait early, if any.
func (w *watch) answered() (*mcp.CallToolResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.early, w.err
}

func (w *watch) run(beatFirst bool) {
	ep, f, ctx := w.ep, w.f, w.ctx
	tell := newInformer(w.req, ep.g.heartbeat, f.progress)
	if beatFirst {
		tell.beat(ctx)
	}
	beat := time.NewTicker(ep.g.heartbeat)
	defer beat.Stop()
	var asking *confirmation
	var answers <-chan elicitAnswer
	for {
		select {
		case <-w.stop:
			if asking != nil {
				asking.stop() // finished by follow, or started too late to matter
			}
			return

		case ev := <-w.events:
			ar := ev.GetApprovalRequested()
			select { // a client told it waits for a person is known to wait
			case <-w.held:
			case <-w.stop:
			}
			_ = ep.offer(ctx, f, max(ar.GetCall().GetRevision(), 1)) // logged; tried again with the answer "pending"
			tell.progress(ctx, waitingText(ar))
			if !w.mayConfirm || asking != nil || !ep.mayConfirm(ar) {
				continue
			}
			w.mayConfirm = false
			switch mode := confirmModeOf(w.req, ar.GetCall().GetArguments()); {
			case mode == consoleMode:
				tell.progress(ctx, fmt.Sprintf("waiting for %s to confirm this call in the console: it has more arguments than a prompt can show", ep.cfg.OnBehalfOf))
			case mode == noMode:
				if ep.cfg.Fallback() == config.FallbackDeny {
					ep.withdraw(f.call.ID, fmt.Sprintf("this call needs %s to confirm it, but the MCP client cannot ask (it does not support elicitation) and gateway endpoint %s denies such calls (elicitation_fallback: deny)", ep.cfg.OnBehalfOf, ep.cfg.Name), 15*time.Second)
				} else {
					tell.progress(ctx, fmt.Sprintf("waiting for %s to confirm this call in the console or Slack (this MCP client cannot ask)", ep.cfg.OnBehalfOf))
				}
			case f.call.Script != nil && modern(w.req):
				// A script cannot be answered early and called again: its
				// call waits for the console or Slack.
				tell.progress(ctx, fmt.Sprintf("waiting for %s to confirm this call of the script in the console or Slack", ep.cfg.OnBehalfOf))
			case modern(w.req):
				// 2026-07-28: the question goes back in the result; the
				// client asks its person and calls again with the answer.
				res, err := ep.inputRequired(f, ev, mode)
				w.mu.Lock()
				w.early, w.err = res, err
				w.mu.Unlock()
				w.stopWaiting()
				return
			default:
				asking = ep.ask(ctx, w.req, f, ev, mode)
				answers = asking.answers
				w.mu.Lock()
				w.asking = asking
				w.mu.Unlock()
			}

		case a := <-answers:
			answers = nil
			if a.err != nil {
				ep.log.Info("the confirmation prompt failed; the call waits for the other channels", "call", f.call.ID, "err", a.err)
				tell.progress(ctx, "the confirmation prompt could not be shown: waiting for a decision in the console or Slack")
				continue
			}
			ep.answer(ctx, f, asking.rev, a.res, asking.digest, asking.mode)

		case <-beat.C:
			tell.beat(ctx)
		}
	}
}

// renew keeps this request's lease on the call running while it waits for
// a person, from a goroutine that does nothing else (a prompt or a slow
// progress notification cannot hold a renewal back), until the wait ends.
// A request refused a lease (as many requests as a call may have leases
// already wait for it) waits all the same, sharing the call and its
// outcome as they do: its client asked for nothing else, and an error
// would only make it call again. It asks for a lease again, so that it is
// seen waiting once one of the others stops, when a request of this
// gateway ends its lease on the call (vacancies), or else every
// leaselessRetry renewals: each ask reads the call's presence, and at
// every renewal many identical requests multiplied the bucket's reads.
func (w *watch) renew() {
	defer w.renewing.Done()
	every := w.ep.g.heartbeat / 2
	tick := time.NewTicker(every)
	defer tick.Stop()
	key := w.ep.leaseKey(w.f.call.ID)
	w.ep.g.vacancies.join(key)
	defer w.ep.g.vacancies.leave(key)
	for first := true; ; first = false {
		// Taken before the lease is asked for, so that a lease ending
		// after the presence was read is not missed.
		freed := w.ep.g.vacancies.freed(key)
		// A renewal gives up well within the lease's margin over the next
		// renewal (1.5 heartbeats): one stuck write must not outlast it.
		err := w.ep.hold(w.ctx, w.f.call.ID, w.lease, time.Now().Add(leaseFor(w.ep.g.heartbeat)), min(5*time.Second, w.ep.g.heartbeat/2))
		refused := errors.Is(err, clientwait.ErrTooManyWaiters)
		switch {
		case !refused:
			w.mu.Lock()
			w.leased = true // or may be: a failed write may be stored
			w.mu.Unlock()
			freed = nil // a running lease is renewed on time, no sooner
		case first:
			w.ep.log.Info("a request waits for a call without a lease of its own: as many requests as a call may have leases wait for it", "call", w.f.call.ID, "most", clientwait.MaxWaiters)
		}
		if first {
			close(w.held)
		}
	wait:
		for waited := 1; ; waited++ {
			select {
			case <-w.stop:
				return
			case <-freed:
				break wait
			case <-tick.C:
				if !refused || waited >= leaselessRetry {
					break wait
				}
			}
		}
	}
}

// leaselessRetry is every how many renewals a request without a lease asks
// for one again when no lease of its call ended in this gateway: a lease
// ended elsewhere is found within that (4 heartbeats, as a lease lasts 2).
const leaselessRetry = 8

// leaseFor is how long a waiting request's lease lasts unless renewed
// (every half heartbeat): a gateway that stopped leaves it to run out, and
// a session adopting the call waits for that.
func leaseFor(heartbeat time.Duration) time.Duration { return 2 * heartbeat }

// mayConfirm reports whether the endpoint's own person may decide the call
// an approval_requested event is about: the deciding rule names the
// requester, and airlock verified that the call acts for this person.
func (ep *endpoint) mayConfirm(ar *airlockv1.ApprovalRequested) bool {
	return calls.RequesterMayDecide(ar.GetCall(), ar.GetDecision(), ep.cfg.OnBehalfOf)
}

// withdraw cancels a call that is still pending, as its agent, waiting at
// most within for its approval record to be stored.
func (ep *endpoint) withdraw(callID, reason string, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	// Tried again while not recorded yet (not_found) and while the policy
	// is deciding it (unavailable: "cancel again in a moment").
	err := retryWhile(ctx, func() error { return ep.client.Cancel(ctx, callID, reason) }, apierr.NotFound, apierr.Unavailable)
	if err != nil {
		ep.log.Info("a call was not withdrawn", "call", callID, "reason", reason, "err", err)
	}
}

// decodeArgs reads tools/call arguments: a JSON object (absent or null: {}),
// which must fit maxBytes (limits.max_request_bytes) once encoded: what
// cannot is refused before it is decoded (ingress.ArgumentsFit).
func decodeArgs(raw json.RawMessage, maxBytes int) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("the arguments of a tool call must be a JSON object: call the tool again with its arguments as an object")
	}
	if err := argumentsFit(raw, maxBytes); err != nil {
		return nil, err
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON (%v): call the tool again with a JSON object", err)
	}
	return args, nil
}

// argumentsFit refuses tools/call arguments (JSON, not decoded) that
// cannot fit maxBytes (limits.max_request_bytes) once encoded, saying what
// to do.
func argumentsFit(raw json.RawMessage, maxBytes int) error {
	if r := ingress.ArgumentsFit(raw, maxBytes); r != nil {
		return fmt.Errorf("%s; then call the tool again", r.Reason)
	}
	return nil
}

// sessionOf is the request's MCP session id, and whether it came over stdio.
func sessionOf(req *mcp.CallToolRequest) (id string, stdio bool) {
	if req.Session != nil {
		id = req.Session.ID()
	}
	return id, headerOf(req) == nil
}

func headerOf(req *mcp.CallToolRequest) http.Header {
	if req.Extra == nil || req.Extra.Header == nil {
		return nil
	}
	return req.Extra.Header
}

// modern reports whether the request speaks the 2026-07-28 protocol, where
// the server asks its client for input only through the result.
func modern(req *mcp.CallToolRequest) bool { return req.ProtocolVersion() >= statelessVersion }

// reasonOf is what reviewers see as the call's stated reason: which client,
// through which endpoint. The client's name and version are its own claim,
// so each is quoted (Go syntax: quotes, line breaks and hidden runes
// escaped): whatever a client says stays inside its quotes and cannot read
// as more of the sentence.
func reasonOf(req *mcp.CallToolRequest, endpoint string) string {
	who := "an MCP client"
	if name, version := clientOf(req); name != "" {
		who = fmt.Sprintf("MCP client %q", truncate(name, 64))
		if version != "" {
			who += fmt.Sprintf(" version %q", truncate(version, 32))
		}
	}
	return fmt.Sprintf("called by %s through gateway endpoint %s", who, endpoint)
}

// clientOf is the client's name and version. A 2026-07-28 request carries
// them in its _meta, read here as they were decoded (the SDK's ClientInfo
// encodes and decodes them again).
func clientOf(req *mcp.CallToolRequest) (name, version string) {
	if req.Params != nil {
		if ci, ok := req.Params.Meta[mcp.MetaKeyClientInfo].(map[string]any); ok {
			name, _ = ci["name"].(string)
			version, _ = ci["version"].(string)
			return name, version
		}
	}
	if ci := req.ClientInfo(); ci != nil {
		return ci.Name, ci.Version
	}
	return "", ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return calls.Cut(s, n) + "…"
}

// waitingText is the progress message for a call waiting for a person.
func waitingText(ar *airlockv1.ApprovalRequested) string {
	d := ar.GetDecision()
	who := strings.Join(d.GetApprovers(), ", ")
	if who == "" {
		who = "a reviewer"
	}
	msg := fmt.Sprintf("waiting for approval by %s (risk %s): %s", who, calls.RiskName(d.GetRisk()), d.GetReason())
	if dl := ar.GetDeadline(); dl != nil {
		msg += fmt.Sprintf("; decided by %s at the latest", dl.AsTime().UTC().Format(time.RFC3339))
	}
	return msg
}
