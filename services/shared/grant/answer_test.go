package grant_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// AnswerAsk turns an ask into an allow by the first grant that answers, in
// the order given, and leaves everything else as the policy decided it.
func TestAnswerAskAllowsByTheFirstGrantThatAnswers(t *testing.T) {
	first := &airlockv1.StandingGrant{Id: "g-first", CreatedBy: &airlockv1.Actor{Id: "alice", Channel: "slack"}}
	second := &airlockv1.StandingGrant{Id: "g-second"}
	unnamed := &airlockv1.StandingGrant{}
	for _, tt := range []struct {
		name      string
		action    airlockv1.Action
		answering map[*airlockv1.StandingGrant]*airlockv1.StandingGrant // grant → what answer returns
		gs        []*airlockv1.StandingGrant
		wantGrant string
		wantWhy   string
	}{
		{"the_first_that_answers_allows", airlockv1.Action_ACTION_ASK, map[*airlockv1.StandingGrant]*airlockv1.StandingGrant{first: first, second: second}, []*airlockv1.StandingGrant{first, second}, "g-first", "standing grant g-first (created by alice via slack) allows it; the policy said: asks"},
		{"order_given_decides", airlockv1.Action_ACTION_ASK, map[*airlockv1.StandingGrant]*airlockv1.StandingGrant{first: first, second: second}, []*airlockv1.StandingGrant{second, first}, "g-second", "standing grant g-second (created by unknown) allows it; the policy said: asks"},
		{"one_that_does_not_answer_is_passed", airlockv1.Action_ACTION_ASK, map[*airlockv1.StandingGrant]*airlockv1.StandingGrant{second: second}, []*airlockv1.StandingGrant{first, second}, "g-second", ""},
		{"a_grant_answering_without_its_id_is_named_as_given", airlockv1.Action_ACTION_ASK, map[*airlockv1.StandingGrant]*airlockv1.StandingGrant{first: unnamed}, []*airlockv1.StandingGrant{first}, "g-first", ""},
		{"an_ask_none_answers_stays", airlockv1.Action_ACTION_ASK, nil, []*airlockv1.StandingGrant{first, second}, "", ""},
		{"a_deny_is_never_answered", airlockv1.Action_ACTION_DENY, map[*airlockv1.StandingGrant]*airlockv1.StandingGrant{first: first}, []*airlockv1.StandingGrant{first}, "", ""},
		{"an_allow_stays_the_policys", airlockv1.Action_ACTION_ALLOW, map[*airlockv1.StandingGrant]*airlockv1.StandingGrant{first: first}, []*airlockv1.StandingGrant{first}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &airlockv1.Decision{Action: tt.action, RuleId: "r", Reason: "asks", Risk: airlockv1.Risk_RISK_LOW,
				Approvers: []string{"bob"}, Quorum: 1, Timeout: durationpb.New(60e9), Notify: []string{"ops"}}
			got := grant.AnswerAsk(d, tt.gs, func(g *airlockv1.StandingGrant) *airlockv1.StandingGrant { return tt.answering[g] })
			if d.GetAction() != tt.action || d.GetGrantId() != "" || len(d.GetApprovers()) != 1 {
				t.Fatalf("the policy's decision was modified: %v", d)
			}
			if tt.wantGrant == "" {
				if got != d {
					t.Fatalf("got %v, want the policy's decision as it was", got)
				}
				return
			}
			if got.GetAction() != airlockv1.Action_ACTION_ALLOW || got.GetGrantId() != tt.wantGrant || got.GetRuleId() != "r" || got.GetRisk() != airlockv1.Risk_RISK_LOW {
				t.Fatalf("got %v, want an allow by %s under rule r, risk low", got, tt.wantGrant)
			}
			if got.GetApprovers() != nil || got.GetQuorum() != 0 || got.GetTimeout() != nil || got.GetNotify() != nil {
				t.Fatalf("the allow kept what only a person's decision needs: %v", got)
			}
			if tt.wantWhy != "" && got.GetReason() != tt.wantWhy {
				t.Fatalf("reason %q, want %q", got.GetReason(), tt.wantWhy)
			}
			if !strings.HasSuffix(got.GetReason(), "the policy said: asks") {
				t.Fatalf("reason %q does not keep the policy's", got.GetReason())
			}
		})
	}
}
