package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAnAgentOverItsBudgetIsToldSoAtOnce: a request the policy service does
// not decide because its agent is over limits.agent_calls_per_minute was
// never answered once the refusals of its minute were spent (dropped, so
// that the agent cannot fill the events stream), and the agent's SDK
// waited for its own timeout. Now each over-budget request is answered by
// a notice on the call's own subject, which is not stored: Do fails at
// once with ErrOverBudget, naming the budget and when to retry, and the
// events stream gains nothing from a dropped request. No other agent can
// publish such a notice for bot's call.
func TestAnAgentOverItsBudgetIsToldSoAtOnce(t *testing.T) {
	// One call a minute: the second is refused (a small stored event), the
	// third dropped.
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+oneCallAMinute(t))
	bot := dev.Agent(t, "bot")
	_, js := dev.Admin(t)
	def := config.Default()
	events, err := js.Stream(context.Background(), def.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		info, err := events.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	// A call the default policy denies: decided at once, nothing runs.
	call := func(id string) airlock.Call {
		return airlock.Call{ID: id, Server: "fs", Tool: "delete_file", Args: map[string]any{"path": "/etc/passwd"}}
	}
	watcher, err := bot.Watch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watcher.Close() })
	// Short: a dropped request left unanswered ends here, which is the
	// failure this test tells from the budget's error.
	const wait = 10 * time.Second
	do := func(id string) (airlock.Outcome, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		return bot.Do(ctx, call(id))
	}
	doFast := func(id string) (airlock.Outcome, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		return watcher.DoFast(ctx, call(id))
	}

	if out, err := do("within"); err != nil || out.Status != airlock.StatusDenied {
		t.Fatalf("bot's first call, within its budget: %+v %v; want it denied by the policy", out, err)
	}
	overBudget := func(id string, do func(string) (airlock.Outcome, error)) {
		t.Helper()
		_, err := do(id)
		var ob *airlock.OverBudgetError
		if !errors.Is(err, airlock.ErrOverBudget) || !errors.As(err, &ob) {
			t.Fatalf("call %s over bot's budget: %v; want ErrOverBudget", id, err)
		}
		if ob.Agent != "bot" || ob.Call != id || ob.CallsPerMinute != 1 || ob.RetryAfter < time.Second {
			t.Fatalf("call %s: %+v; want agent bot, its call, a budget of 1 call a minute and a retry after of a second or more", id, ob)
		}
		if msg := err.Error(); !strings.Contains(msg, "agent bot is over its budget of 1 calls a minute") || !strings.Contains(msg, "retry after about") {
			t.Fatalf("call %s: %q does not say the agent is over its budget and when to retry", id, msg)
		}
	}
	overBudget("refused", do) // the minute's one refusal, stored
	testenv.Settled(t, js, def.Intake.Name, "policy", 30*time.Second)
	before := stored()
	overBudget("dropped", do)
	overBudget("dropped-fast", doFast) // through a Watcher
	testenv.Settled(t, js, def.Intake.Name, "policy", 30*time.Second)
	if after := stored(); after != before {
		t.Fatalf("the events stream went from %d to %d messages for two dropped requests; want nothing stored", before, after)
	}
	for _, id := range []string{"dropped", "dropped-fast"} {
		if evs := testenv.Events(t, js, subject.OfCall("bot", id)); len(evs) != 0 {
			t.Fatalf("%d events stored for the dropped call %s; want none", len(evs), id)
		}
	}

	t.Run("no_agent_can_forge_a_notice_for_another_agents_call", func(t *testing.T) {
		dev.Agent(t, "evil") // its credential
		evil := connectAgent(t, dev.Creds("evil"), dev.NATSURL)
		for _, target := range []string{subject.OverBudgetNotice("bot", "victim"), subject.OverBudgetNotice("evil", "own")} {
			if err := evil.nc.Publish(target, []byte(`{"agent_id":"bot","call_id":"victim","reason":"forged"}`)); err != nil {
				t.Fatal(err)
			}
			evil.refused(target)
		}
	})
}

// oneCallAMinute is an airlock configuration file whose agents may have one
// call decided a minute (limits.agent_calls_per_minute).
func oneCallAMinute(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(file, []byte("limits:\n  agent_calls_per_minute: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestACodingAgentsHookOverItsBudgetIsDeniedAtOnceSayingSo: a coding
// agent's hook submits, then awaits airlock's decision; a request over the
// agent's budget is answered only by a notice that is not stored, so the
// hook must follow the call before it submits it, or it waits out --wait
// and says nobody decided.
func TestACodingAgentsHookOverItsBudgetIsDeniedAtOnceSayingSo(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+oneCallAMinute(t))
	dev.Agent(t, "coder")
	hook := []string{"--creds", dev.Creds("coder"), "--nats", dev.NATSURL, "--state-dir", t.TempDir(), "--wait", "20s", "--on-timeout", "deny"}
	if r := runHook(t, hooks.Claude, shell(t, hooks.Claude, "git status", "within"), hook...); !allowed(t, hooks.Claude, r) {
		t.Fatalf("the first call, within the budget: %+v", r)
	}
	for _, id := range []string{"refused", "dropped"} { // the minute's one stored refusal, then a drop
		r := runHook(t, hooks.Claude, shell(t, hooks.Claude, "git status", id), hook...)
		if !denied(t, hooks.Claude, r, "agent coder is over its budget of 1 calls a minute") || !strings.Contains(r.stderr, "retry after about") {
			t.Fatalf("call %s over the budget: %+v; want it denied saying the agent is over its budget and when to retry", id, r)
		}
	}
}
