package channels

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// The email, webhook and PagerDuty channels built from configuration, as
// `airlock serve approval` builds them, against real local receivers: one
// webhook endpoint hangs and delays no other channel; two reviewers decide
// at once and the first valid decision wins; every channel that can be
// updated shows that outcome (a reply in the mail thread, a webhook outcome
// event, a PagerDuty resolve).
func TestEveryChannelShowsTheFirstDecisionWhileOneHangs(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	rx, err := StartReceivers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rx.Close)
	rx.Hang = "chat"
	rx.Configure(&cfg)
	cfg.Email.Addresses["bob"] = "bob@example.com"
	cfg.Approval.LogNotifier = false
	cfg.Approval.NotifyTimeout = time.Minute // far longer than any wait below
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	deps := testenv.Deps(t, cfg)
	chans := OnCall(deps)
	var names []string
	for _, c := range chans {
		names = append(names, c.Name())
	}
	if want := []string{"email", "webhook-oncall", "webhook-audit", "webhook-chat", "pagerduty"}; !slices.Equal(names, want) {
		t.Fatalf("channels built from configuration: %v, want %v", names, want)
	}
	s, err := approval.NewFromConfig(context.Background(), deps, chans...)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, s)

	ctx := context.Background()
	if err := PublishAsk(ctx, deps.Publisher("policy"), "bench", "race-1", []string{"email", "webhook", "pagerduty"}, "alice", "bob"); err != nil {
		t.Fatal(err)
	}
	announced := []string{"email request", "email request", "webhook-oncall approval_requested pending",
		"webhook-audit approval_requested pending", "pagerduty trigger"}
	testenv.Eventually(t, 10*time.Second, "every channel but the hanging one to deliver", func() bool {
		return containsAll(rx.Deliveries("race-1"), announced)
	})

	nc, _ := testenv.Connect(t, n.URL())
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	api := approvalapi.New(nc, fk, "console")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []airlockv1.ApprovalState
	)
	for who, kind := range map[string]airlockv1.DecisionKind{"alice": airlockv1.DecisionKind_DECISION_KIND_APPROVE, "bob": airlockv1.DecisionKind_DECISION_KIND_REJECT} {
		wg.Go(func() {
			resp, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bench", CallId: "race-1", Kind: kind, Reason: "decided by " + who,
				Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: who, Channel: "console"}})
			if err == nil && resp.GetChanged() {
				mu.Lock()
				winners = append(winners, resp.GetRecord().GetState())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d decisions changed the call, want exactly one (the first)", len(winners))
	}
	state := calls.StateName(winners[0])
	outcome := []string{"email outcome-" + state, "webhook-oncall outcome " + state, "webhook-audit outcome " + state, "pagerduty resolve"}
	testenv.Eventually(t, 10*time.Second, "every channel that announced the call to show the outcome "+state, func() bool {
		return containsAll(rx.Deliveries("race-1"), outcome)
	})
	for _, d := range rx.Deliveries("race-1") {
		if strings.Contains(d, "outcome") && !strings.HasSuffix(d, state) {
			t.Fatalf("a channel showed another outcome than the decision that won (%s): %q", state, d)
		}
	}
}

// containsAll reports whether got holds every item of want, counting repeats.
func containsAll(got, want []string) bool {
	left := slices.Clone(got)
	for _, w := range want {
		i := slices.Index(left, w)
		if i < 0 {
			return false
		}
		left = slices.Delete(left, i, i+1)
	}
	return true
}
