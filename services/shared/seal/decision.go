package seal

import (
	"errors"
	"fmt"
	"strconv"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// ErrDecisionSeal is returned for an `allowed` or `approved` event whose
// seal is missing or does not verify: it was not issued by the policy or
// approval service for exactly this call and these arguments.
var ErrDecisionSeal = errors.New("the decision is not sealed by the policy or approval service")

// Runnable is what a sealed decision lets the executor run.
type Runnable struct {
	// Call to run; for an approval with edited arguments, the edited call.
	Call *airlockv1.ToolCall
	// Digest of the arguments the decision was made about.
	Digest string
	// Type is "allowed" or "approved".
	Type string
	// PreviewDigest and Precondition: the preview the reviewers approved
	// and the world it was made against, which must still hold when the
	// call runs (approved events only; empty when the call had no preview).
	PreviewDigest, Precondition string
}

// Decided returns the call an `allowed` or `approved` event lets run, or
// false for any other event.
func Decided(ev *airlockv1.Event) (Runnable, bool) {
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Allowed:
		return Runnable{Call: b.Allowed.GetCall(), Digest: b.Allowed.GetDecision().GetArgumentsDigest(), Type: "allowed"}, true
	case *airlockv1.Event_Approved:
		a := b.Approved
		return Runnable{Call: a.GetCall(), Digest: a.GetArgumentsDigest(), Type: "approved",
			PreviewDigest: a.GetPreviewDigest(), Precondition: a.GetPrecondition()}, true
	}
	return Runnable{}, false
}

func decisionParts(ev *airlockv1.Event, r Runnable) []string {
	c := r.Call
	u := func(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
	parts := []string{"decision/v1", r.Type,
		ev.GetAgentId(), ev.GetCallId(), u(ev.GetRevision()),
		c.GetAgentId(), c.GetCallId(), u(c.GetRevision()),
		c.GetServer(), c.GetTool(), r.Digest, c.GetIdempotencyKey(), strconv.FormatBool(c.GetAgentRuns())}
	// Sealed only when present, so decisions sealed before previews existed
	// still verify; stripping them breaks the seal.
	if r.PreviewDigest != "" || r.Precondition != "" {
		parts = append(parts, "preview", r.PreviewDigest, r.Precondition)
	}
	return parts
}

// SealDecision sets ev.Seal on an `allowed` or `approved` event; other
// events are left alone.
func (k Key) SealDecision(ev *airlockv1.Event) error {
	s, err := k.DecisionSeal(ev)
	if err != nil || s == "" {
		return err
	}
	ev.Seal = s
	return nil
}

// DecisionSeal is the seal SealDecision gives ev, without setting it ("" for
// an event that is not a decision to run a call).
func (k Key) DecisionSeal(ev *airlockv1.Event) (string, error) {
	r, ok := Decided(ev)
	if !ok {
		return "", nil
	}
	if !k.Valid() {
		return "", errors.New("cannot seal the decision: no decision key is configured")
	}
	return k.Sign(decisionParts(ev, r)...), nil
}

// VerifyDecision checks the seal of an `allowed` or `approved` event and
// returns what it lets run.
func (k Key) VerifyDecision(ev *airlockv1.Event) (Runnable, error) {
	r, ok := Decided(ev)
	if !ok {
		return Runnable{}, fmt.Errorf("not a decision to run a call")
	}
	if r.Call == nil {
		return Runnable{}, fmt.Errorf("the decision carries no call")
	}
	if !k.Verify(ev.GetSeal(), decisionParts(ev, r)...) {
		return Runnable{}, ErrDecisionSeal
	}
	return r, nil
}
