package slack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	airlockconfig "github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

// R-attack5 F4, end to end: Slack answers no post (rate-limited, as slow as
// the test holds it), agent bot's forty calls routed to Slack wait on it,
// and agent victim's call is still recorded pending, where the console and
// the approvers list it, while Slack has answered none of them; once Slack
// answers again, victim's card is posted. (Announcements held the approval
// service's eight workers until Slack answered or notify_timeout passed:
// victim's call was recorded 42 s late with Slack at one post a second.)
func TestAFloodWaitingOnSlackDoesNotHoldBackAnotherAgentsCall(t *testing.T) {
	t.Parallel()
	// Every call of bot is announced (no digest): what is under test is
	// the workers, not the bound on one agent's announcements.
	e := startAirlock(t, "  notify_burst: 100\n")
	e.f.Hold()
	defer e.f.Release()
	submit := func(agent, id string) {
		t.Helper()
		c, err := airlock.New(e.nc, agent)
		must(t, err)
		_, err = c.Submit(context.Background(), airlock.Call{ID: id, Server: "demo", Tool: "write_file",
			Args: map[string]any{"path": id + ".txt", "content": "x"}, Reason: "flood"})
		must(t, err)
	}
	for i := range 40 {
		submit("bot", fmt.Sprintf("flood_%d", i))
	}
	testenv.Eventually(t, 20*time.Second, "Slack to hold bot's card posts", func() bool { return e.f.Held("chat.postMessage") >= 8 })
	submit("victim", "v1")
	testenv.Eventually(t, 20*time.Second, "victim's call to be recorded pending while Slack holds bot's cards", func() bool {
		rec, err := e.api.Get(context.Background(), "victim", "v1", 0)
		return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING
	})
	if e.f.Saw("chat.postMessage", func(slackfake.Call) bool { return true }) {
		t.Fatal("Slack answered a post while it was held: the test did not hold the channel")
	}
	e.f.Release()
	testenv.Eventually(t, 30*time.Second, "victim's card once Slack answers again", func() bool {
		return e.f.Saw("chat.postMessage", func(c slackfake.Call) bool { return strings.Contains(c.Blocks(), "`v1`") })
	})
}

// R-attack5 F3, end to end: agent bot's flood of calls routed to Slack is
// posted as approval.notify_burst cards, not one per call; agent victim's
// call gets its own card; every one of bot's calls is pending for the
// console all the same.
func TestAFloodOfOneAgentsCallsIsNotACardPerCall(t *testing.T) {
	t.Parallel()
	const burst, flood = 5, 25
	// No refill while the test runs: every card past the burst would be the flood's.
	e := startAirlock(t, fmt.Sprintf("  notify_burst: %d\n  notify_refill: 1h\n", burst))
	bot, err := airlock.New(e.nc, "bot")
	must(t, err)
	for i := range flood {
		_, err := bot.Submit(context.Background(), airlock.Call{ID: fmt.Sprintf("flood_%d", i), Server: "demo", Tool: "write_file",
			Args: map[string]any{"path": "f.txt", "content": "x"}, Reason: "flood"})
		must(t, err)
	}
	for i := range flood {
		testenv.Eventually(t, 20*time.Second, "bot's calls to be pending", func() bool {
			rec, err := e.api.Get(context.Background(), "bot", fmt.Sprintf("flood_%d", i), 0)
			return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING
		})
	}
	victim, err := airlock.New(e.nc, "victim")
	must(t, err)
	_, err = victim.Submit(context.Background(), airlock.Call{ID: "v1", Server: "demo", Tool: "write_file",
		Args: map[string]any{"path": "v.txt", "content": "x"}, Reason: "one call"})
	must(t, err)
	testenv.Eventually(t, 20*time.Second, "victim's card", func() bool {
		return e.f.Saw("chat.postMessage", func(c slackfake.Call) bool { return strings.Contains(c.Blocks(), "`v1`") })
	})
	// The approval consumer handled every call (victim's came last), and
	// each card is posted before its call's event is acknowledged.
	testenv.Settled(t, e.js, airlockconfig.Default().Stream.Name, "approval", 20*time.Second)
	cards := 0
	for _, c := range e.f.Calls() {
		if c.Method == "chat.postMessage" && strings.Contains(c.Blocks(), "`flood_") {
			cards++
		}
	}
	if cards != burst {
		t.Fatalf("Slack got %d cards for bot's %d calls, want notify_burst (%d)", cards, flood, burst)
	}
}
