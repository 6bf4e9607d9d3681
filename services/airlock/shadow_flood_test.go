package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent flooding divergences before another agent's cannot hide them:
// the summary reads each agent's rows up to a tenth of its bound, then
// reads on without them, and names the agent it capped. (The bound is 20
// rows here instead of 20,000, so the flood stays small.)
func TestOneAgentsFloodOfDivergencesDoesNotHideAnotherAgents(t *testing.T) {
	w := newLearnWorldWith(t, console.Options{ShadowRows: 20})
	root := w.signIn("root")
	rego, data := echoDeniedCandidate(t, "the candidate denies echo")
	start, _ := json.Marshal(map[string]any{"modules": map[string]string{"airlock.rego": string(rego)}, "data_json": string(data), "source": "flood-test"})
	if status, body := root.apiJSON(http.MethodPost, "/api/v1/policy/shadow", string(start)); status != http.StatusOK {
		t.Fatalf("start shadow: %d %s", status, body)
	}
	echo := func(agent string, i int) {
		if got := w.decisionOf(w.submit(agent, "demo", "echo", map[string]any{"text": fmt.Sprint(i)})); got != subject.Allowed {
			t.Fatalf("%s's echo %d: %s, want allowed live", agent, i, got)
		}
	}
	// The candidate is in shadow once a call diverges.
	diverged := func() uint64 {
		_, body := root.get("/api/v1/policy/shadow")
		var st struct {
			Diverged string `json:"diverged"`
		}
		_ = json.Unmarshal([]byte(body), &st)
		var n uint64
		fmt.Sscan(st.Diverged, &n)
		return n
	}
	probes := 0
	testenv.Eventually(t, 10*time.Second, "the candidate in shadow", func() bool {
		probes++
		echo("probe-bot", probes)
		return diverged() > 0
	})
	const flood = 30
	base := diverged()
	for i := range flood {
		echo("flood-bot", i)
	}
	testenv.Eventually(t, 10*time.Second, "the flood's divergences recorded", func() bool { return diverged() >= base+flood })
	echo("quiet-bot", 1)
	echo("quiet-bot", 2)

	var sum console.ShadowSummary
	testenv.Eventually(t, 10*time.Second, "quiet-bot's divergences in the summary", func() bool {
		status, body := root.get("/api/v1/policy/shadow/divergences")
		if status != http.StatusOK || json.Unmarshal([]byte(body), &sum) != nil {
			t.Fatalf("divergences: %d %s", status, body)
		}
		for _, g := range sum.Groups {
			for _, e := range g.Examples {
				if e.Agent == "quiet-bot" {
					return true
				}
			}
		}
		return false
	})
	if !slices.Equal(sum.Capped, []string{"flood-bot"}) || sum.AgentRows != 2 || sum.Total > 2+2+probes {
		t.Errorf("summary: total %d, capped %v at %d; want flood-bot capped at 2, quiet-bot's 2 and at most %d probes", sum.Total, sum.Capped, sum.AgentRows, probes)
	}
}
