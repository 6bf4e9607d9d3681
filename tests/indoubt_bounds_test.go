package tests

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent can end its calls in doubt at will: a webhook tool that answers
// 5xx to its arguments leaves each call failed with outcome indeterminate,
// and each such call asks a person "did it happen?" with a task that only
// a person closes. Before approval.max_in_doubt_per_agent, an agent at its
// call budget filled the in-doubt bucket without bound (and every list of
// tasks read them all). Now mallory, through her own credential on a real
// airlock dev, gets only her share of open tasks; bot's call that ends in
// doubt still gets its task, and a person's answer frees her place.
func TestAnAgentEndingCallsInDoubtAtWillKeepsOnlyItsShareOfTasks(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream unavailable", http.StatusBadGateway) // whatever it did, the caller cannot tell
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf("servers:\n  hook:\n    webhook:\n      url: %s\n      secret: s\n    tools:\n      pay: {}\n", hook.URL))
	conf := filepath.Join(dir, "airlock.yaml")
	writeFile(t, conf, fmt.Sprintf("executor:\n  tools_file: %q\napproval:\n  max_in_doubt_per_agent: 3\n", tools))
	dev := startDev(t, filepath.Join(dir, "data"), 0, "", "AIRLOCK_CONFIG="+conf)
	nc, _ := dev.Admin(t)
	rules := policyapi.New(nc, testenv.DevFrontendKey(t, dev.DataDir), "console")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := rules.PutRule(ctx, &airlockv1.PolicyRule{Id: "pay-runs", Priority: 5, Pattern: "hook__pay", Effect: "allow", Reason: "the test's webhook"},
		&airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "admin", Channel: "cli"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the rule letting hook__pay run to be in force", func() bool {
		d, err := rules.Eval(ctx, &airlockv1.ToolCall{AgentId: "mallory", Server: "hook", Tool: "pay"})
		return err == nil && d.GetRuleId() == "pay-runs"
	})
	mallory, bot := dev.Agent(t, "mallory"), dev.Agent(t, "bot")
	inDoubt := func(c *airlock.Client, id string) {
		t.Helper()
		out, err := c.Do(ctx, airlock.Call{ID: id, Tool: "hook__pay", Args: map[string]any{"amount": 1}})
		if err != nil || out.Status != airlock.StatusFailed || out.FailureOutcome != "indeterminate" {
			t.Fatalf("call %s: %+v %v, want failed, indeterminate", id, out, err)
		}
	}
	const calls = 8
	for i := range calls {
		inDoubt(mallory, fmt.Sprintf("m%d", i))
	}
	inDoubt(bot, "b0")
	open := func() (mine, bots int, calls map[string]bool) {
		r := cli(t, dev, "approvals", "in-doubt", "--json")
		var out struct {
			Tasks []struct {
				AgentID string `json:"agent_id"`
				CallID  string `json:"call_id"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &out); r.Code != 0 || err != nil {
			t.Fatalf("airlock approvals in-doubt --json: exit %d, %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
		}
		calls = map[string]bool{}
		for _, task := range out.Tasks {
			calls[task.AgentID+"/"+task.CallID] = true
			switch task.AgentID {
			case "mallory":
				mine++
			case "bot":
				bots++
			}
		}
		return mine, bots, calls
	}
	var mine, bots int
	testenv.Eventually(t, 30*time.Second, "bot's call in doubt to be listed", func() bool {
		mine, bots, _ = open()
		return bots == 1
	})
	if mine != 3 {
		t.Fatalf("mallory has %d open in-doubt tasks after %d calls ended in doubt, want her share of 3", mine, calls)
	}
	// A call of hers past the share is not listed, and the list says so,
	// and where they are; a person can still answer one, and she hears the
	// answer.
	if r := cli(t, dev, "approvals", "in-doubt"); r.Code != 0 || !strings.Contains(r.Stdout, "agent mallory holds its 3 open tasks (approval.max_in_doubt_per_agent): its further calls that end in doubt are not listed") ||
		!strings.Contains(r.Stdout, "airlock audit query --agent mallory --type failed") || strings.Contains(r.Stdout, "agent bot holds") {
		t.Fatalf("airlock approvals in-doubt does not say mallory's further calls are not listed, and where they are: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if status, page := bearerGet(t, dev.HTTPURL+"/in-doubt", adminToken(t, dev)); status != http.StatusOK ||
		!strings.Contains(page, "Agent <strong>mallory</strong> holds its 3 open tasks") || strings.Contains(page, "Agent <strong>bot</strong>") {
		t.Fatalf("the console's In doubt page does not say mallory's further calls are not listed: %d\n%s", status, page)
	}
	_, _, listed := open()
	var unlisted, first string
	for i := range calls {
		id := fmt.Sprintf("m%d", i)
		if listed["mallory/"+id] {
			first = cmp.Or(first, id)
		} else {
			unlisted = cmp.Or(unlisted, id)
		}
	}
	if r := cli(t, dev, "approvals", "resolve", "mallory/"+unlisted, "--happened", "no", "--note", "checked the ledger"); r.Code != 0 {
		t.Fatalf("answering mallory/%s, in doubt past her share: exit %d\n%s%s", unlisted, r.Code, r.Stdout, r.Stderr)
	}
	if r, err := mallory.AwaitResolution(ctx, unlisted, 0); err != nil || r.Happened || r.Note != "checked the ledger" {
		t.Fatalf("mallory awaiting the answer about %s: %+v %v", unlisted, r, err)
	}
	// A person answers one of her listed tasks: her next call in doubt
	// gets a task.
	if r := cli(t, dev, "approvals", "resolve", "mallory/"+first, "--happened", "no", "--note", "checked"); r.Code != 0 {
		t.Fatalf("answering mallory/%s: exit %d\n%s%s", first, r.Code, r.Stdout, r.Stderr)
	}
	inDoubt(mallory, "m-after")
	testenv.Eventually(t, 30*time.Second, "mallory's call after the answer to be listed", func() bool {
		_, _, calls := open()
		return calls["mallory/m-after"]
	})
	if mine, _, _ := open(); mine != 3 {
		t.Errorf("mallory has %d open tasks after one was answered and one more call ended in doubt, want 3", mine)
	}
}
