package calls

import (
	"slices"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
)

func TestWhoMayDecide(t *testing.T) {
	cfg := config.Default()
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice", "bob"}}
	cfg.Console.Users = []config.User{{Name: "carol", Groups: []string{"oncall"}}}
	dir := DirectoryOf(cfg)
	rec := func(forWhom string, verified bool, approvers ...string) *airlockv1.ApprovalRecord {
		return &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{CallId: "c", OnBehalfOf: forWhom, OnBehalfOfVerified: verified},
			Decision: &airlockv1.Decision{Approvers: approvers}}
	}
	for _, tc := range []struct {
		name     string
		rec      *airlockv1.ApprovalRecord
		who      string
		bar      Bar
		deciders []string
	}{
		{"a_group_member_decides", rec("", false, "group:reviewers"), "alice", NotBarred, []string{"alice", "bob"}},
		{"a_console_users_group_counts", rec("", false, "group:oncall"), "carol", NotBarred, []string{"carol"}},
		{"nobody_decides_a_call_made_on_their_behalf", rec("alice", false, "group:reviewers"), "alice", OwnCall, []string{"bob"}},
		{"someone_outside_the_approvers_does_not_decide", rec("", false, "group:reviewers"), "carol", NotApprover, []string{"alice", "bob"}},
		{"the_verified_requester_confirms_their_own_call", rec("carol", true, Requester), "carol", NotBarred, []string{"carol"}},
		{"an_unverified_requester_does_not", rec("carol", false, Requester), "carol", UnverifiedRequester, nil},
		{"requester_is_no_person", rec("", false, "group:reviewers"), Requester, RoleNotPerson, []string{"alice", "bob"}},
		{"nobody_can_decide_when_the_only_approver_is_the_requester", rec("alice", true, "alice"), "alice", OwnCall, nil},
		{"no_one_is_named", rec("", false, "group:reviewers"), "", NoPrincipal, []string{"alice", "bob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dir.Barred(tc.rec, tc.who); got != tc.bar {
				t.Errorf("Barred(%q) = %d, want %d", tc.who, got, tc.bar)
			}
			if got := dir.Deciders(tc.rec); !slices.Equal(got, tc.deciders) {
				t.Errorf("Deciders = %q, want %q", got, tc.deciders)
			}
		})
	}
}
