package policy

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/ledger"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// A report is how an agent tells airlock how a gate-only call it ran ended
// (coding-agent hooks: the agent runs the tool, airlock only decides). It is
// an intake message like a request, so it crosses the same trust boundary:
// the agent is the subject's token, so an agent can only ever name its own
// calls. The policy service accepts a report only for the newest revision of
// the agent's own gate-only call that the policy allowed or a person
// approved, and records it on the call's execution ledger
// (airlock.evt.<agent>.<call>.exec.*) as `completed` or `failed` with
// agent_ran set, appended with compare-and-append to the empty ledger: a
// call revision has exactly one outcome, so a second report is refused. A
// refused report is recorded as an unauthorized_attempt on the call.

// reportClaim is the claim token a report's ledger event carries: derived
// from the report's intake sequence, so a redelivered report recognises its
// own append.
func reportClaim(intakeSeq uint64) string { return "report." + strconv.FormatUint(intakeSeq, 10) }

// report handles one report from the intake stream.
func (s *Service) report(ctx context.Context, in intake, rep *ingress.Report) error {
	why, digest, call, err := s.reportable(ctx, rep.Ref)
	if err != nil {
		return err
	}
	if why != "" {
		return s.refuseReport(ctx, in, rep.Ref, why)
	}
	ev := reportEvent(rep, call, digest, in.seq)
	for range maxAcceptAttempts {
		// The report is the ledger's only event: appended to the empty ledger.
		_, err := s.ledger.Append(ctx, ev, 0)
		if err == nil {
			s.deps.Metrics.Published.WithLabelValues("policy", envelope.TypeOf(ev)).Inc()
			s.deps.Log.Info("agent's report recorded", "call", rep.Ref.String(), "failed", rep.Body.GetFailed())
			return nil
		}
		if !errors.Is(err, ledger.ErrConflict) {
			return fmt.Errorf("record the report on %s: %w", rep.Ref, err)
		}
		st, err := s.ledger.Inspect(ctx, rep.Ref)
		switch {
		case err != nil:
			return err
		case st.Ended && st.EndedBy == reportClaim(in.seq):
			return nil // this report, redelivered after its append landed
		case st.Ended:
			return s.refuseReport(ctx, in, rep.Ref, fmt.Sprintf("call %s already has an outcome: airlock keeps the first report of a call and refuses the rest", rep.Ref))
		case !st.Empty():
			// The ledger holds something else (it never should for a
			// gate-only call); appending after it would hide it, so refuse.
			return s.refuseReport(ctx, in, rep.Ref, fmt.Sprintf("call %s has execution events already: it cannot be reported on", rep.Ref))
		}
		// Refused, yet read back empty: try again.
	}
	return fmt.Errorf("record the report on %s: the call kept changing; will retry", rep.Ref)
}

// reportable says why ref may not be reported on ("" when it may) and, when
// it may, the arguments digest the decision was made about and the call.
func (s *Service) reportable(ctx context.Context, ref callref.Ref) (why, digest string, call *airlockv1.ToolCall, err error) {
	req, err := s.lastEvent(ctx, ref, subject.Requested)
	if err != nil {
		return "", "", nil, err
	}
	if req == nil {
		return fmt.Sprintf("agent %s has no call %s: an agent reports only on its own calls", ref.Agent, ref.Call), "", nil, nil
	}
	newest := max(req.ev.GetRevision(), 1)
	call = req.ev.GetRequested().GetCall()
	switch {
	case newest < ref.Rev:
		return fmt.Sprintf("call %s has no revision %d", ref.Call, ref.Rev), "", nil, nil
	case newest > ref.Rev:
		return fmt.Sprintf("revision %d of call %s was superseded by revision %d, which never ran it", ref.Rev, ref.Call, newest), "", nil, nil
	case !call.GetAgentRuns():
		return fmt.Sprintf("call %s is not gate-only: airlock's executor runs it, so an agent cannot report its result", ref), "", nil, nil
	}
	for _, typ := range []string{subject.Allowed, subject.Approved} {
		st, err := s.lastEvent(ctx, ref, typ)
		if err != nil {
			return "", "", nil, err
		}
		if st == nil || max(st.ev.GetRevision(), 1) != ref.Rev {
			continue
		}
		r, err := s.decisions.VerifyDecision(st.ev)
		if err != nil {
			return fmt.Sprintf("the %s event of call %s is not sealed by airlock: %v", typ, ref, err), "", nil, nil
		}
		return "", r.Digest, call, nil
	}
	return fmt.Sprintf("call %s was not allowed or approved (%s): the agent must not run it, and its report is refused", ref, s.standing(ctx, ref)), "", nil, nil
}

// standing describes where a call revision stands without an allow or
// approval, for the refusal's sentence.
func (s *Service) standing(ctx context.Context, ref callref.Ref) string {
	for _, typ := range []string{subject.Denied, subject.Rejected, subject.Expired, subject.Canceled, subject.ChangesRequested, subject.ApprovalRequested} {
		st, err := s.lastEvent(ctx, ref, typ)
		if err == nil && st != nil && max(st.ev.GetRevision(), 1) == ref.Rev {
			if typ == subject.ApprovalRequested {
				return "it still waits for a person"
			}
			return "it was " + typ
		}
	}
	return "no decision was made"
}

// reportEvent is the ledger event recording rep: completed, or failed with
// reason "tool_error", marked agent_ran.
func reportEvent(rep *ingress.Report, call *airlockv1.ToolCall, decided string, intakeSeq uint64) *airlockv1.Event {
	differ := false
	if args := rep.Body.GetArguments(); args != nil {
		if d, err := canon.Digest(args); err == nil && d != decided {
			differ = true
		}
	}
	ev := &airlockv1.Event{
		AgentId: rep.Ref.Agent, CallId: rep.Ref.Call, Revision: rep.Ref.Rev, ThreadId: call.GetThreadId(), Json: call.GetJsonEvents(),
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: rep.Ref.Agent},
	}
	latency := rep.Body.GetLatency()
	claim := reportClaim(intakeSeq)
	if rep.Body.GetFailed() {
		msg := rep.Body.GetError()
		if msg == "" {
			msg = rep.Body.GetResultJson()
		}
		// Cut on a character boundary: a cut character is not UTF-8, and
		// no event holding it could be stored.
		msg = calls.Cut(msg, ingress.MaxReasonLen)
		ev.Body = &airlockv1.Event_Failed{Failed: &airlockv1.Failed{
			Reason: "tool_error", Outcome: calls.FailureError, Message: msg, Latency: latency, Attempt: 1, Claim: claim,
			AgentRan: true, ArgumentsDiffer: differ, Snapshot: rep.Body.GetSnapshot(),
		}}
		return ev
	}
	ev.Body = &airlockv1.Event_Completed{Completed: &airlockv1.Completed{
		ResultJson: rep.Body.GetResultJson(), Truncated: rep.Body.GetTruncated(), Latency: latency, Attempt: 1, Claim: claim,
		AgentRan: true, ArgumentsDiffer: differ, Snapshot: rep.Body.GetSnapshot(),
	}}
	return ev
}

// agentAttempt is the unauthorized_attempt event, with id, recording that
// the agent's request (in) to do action on ref was refused, and why.
func agentAttempt(id string, ref callref.Ref, in intake, action, why string) *airlockv1.Event {
	return &airlockv1.Event{
		EventId: id,
		AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev, Json: in.json,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: ref.Agent},
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
			Action: action, Why: why,
		}},
	}
}

// refuseReport records a refused report as an unauthorized_attempt on the
// agent's own call (the id derives from the intake sequence, so a
// redelivery records it once) and drops it.
func (s *Service) refuseReport(ctx context.Context, in intake, ref callref.Ref, why string) error {
	ev := agentAttempt(callref.System{Kind: callref.SystemIntake, ID: strconv.FormatUint(in.seq, 10)}.EventID("report_refused"), ref, in, "report", why)
	if _, err := s.pub.Publish(ctx, ev, in.trace); err != nil {
		return fmt.Errorf("record the refused report on %s: %w", ref, err)
	}
	s.deps.Metrics.Published.WithLabelValues("policy", subject.UnauthorizedAttempt).Inc()
	s.deps.Log.Warn("agent's report refused", "call", ref.String(), "why", why)
	return nil
}
