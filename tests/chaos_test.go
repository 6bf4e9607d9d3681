package tests

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// chaosReport is the part of `airlock chaos --json` this test reads.
type chaosReport struct {
	Seed     int64          `json:"seed"`
	Calls    int            `json:"calls"`
	Outcomes map[string]int `json:"outcomes"`
	Checks   []struct {
		Name     string   `json:"name"`
		Value    string   `json:"value"`
		Violated bool     `json:"violated"`
		Examples []string `json:"examples"`
	} `json:"checks"`
	Faults []struct {
		Kind       string  `json:"kind"`
		Target     string  `json:"target"`
		RecoveredS float64 `json:"recovered_s"`
		Error      string  `json:"error"`
	} `json:"faults"`
	Info       []chaosInfo `json:"info"`
	Violations int         `json:"violations"`
	RunDir     string      `json:"run_dir"`
}

// chaosInfo is a figure of the report that is not a check.
type chaosInfo struct {
	Name     string   `json:"name"`
	Value    string   `json:"value"`
	Examples []string `json:"examples"`
}

// TestChaosShortSchedule runs `airlock chaos --short`: the production
// layout (3-node NATS cluster with the shipped accounts, two replicas of
// every service as their own processes, ClickHouse) under a load of agents,
// MCP clients through the gateway and reviewers while every fault kind
// happens once — a replica killed (and a gateway replica), a
// node paused, the events stream's leader lost, ClickHouse down, a tool that
// never answers — and requires a report without violations.
//
// It runs beside other tests: its load is paced over 45 s whatever the
// machine does.
func TestChaosShortSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos schedule takes about a minute and a half")
	}
	t.Parallel()
	start := time.Now()
	cmd := exec.Command(airlockBinary(t), "chaos", "--short", "--seed", "17", "--json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("airlock chaos did not run: %v\n%s", err, stderr.String())
	}
	var rep chaosReport
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		t.Fatalf("airlock chaos (%v) printed no report: %v\n%s\n%s", err, jerr, out, stderr.String())
	}
	t.Logf("airlock chaos --short --seed %d took %s: %d calls, outcomes %v", rep.Seed, time.Since(start).Round(time.Second), rep.Calls, rep.Outcomes)
	for _, c := range rep.Checks {
		if c.Violated {
			t.Errorf("%s: %s %v", c.Name, c.Value, c.Examples)
		}
	}
	if rep.Violations > 0 || err != nil {
		t.Fatalf("%d violations (exit %v); the run's logs are in %s\n%s", rep.Violations, err, rep.RunDir, stderr.String())
	}
	kinds := map[string]bool{}
	gatewayKilled := false
	for _, f := range rep.Faults {
		kinds[f.Kind] = true
		gatewayKilled = gatewayKilled || f.Kind == "kill_replica" && strings.HasPrefix(f.Target, "gateway-")
	}
	// MCP clients called through the gateway replicas while one was killed.
	if !gatewayKilled {
		t.Errorf("the short schedule killed no gateway replica: %+v", rep.Faults)
	}
	if i := slices.IndexFunc(rep.Info, func(i chaosInfo) bool { return i.Name == "MCP requests through the gateway" }); i < 0 || rep.Info[i].Value == "0" {
		t.Errorf("no MCP request went through the gateway: %+v", rep.Info)
	}
	// Whether the gateway kill was followed by a rejoin from a new session,
	// or why none could be (a rejoin that should have been is a violation).
	for _, i := range rep.Info {
		if strings.Contains(i.Name, "replica was killed") || strings.Contains(i.Name, "replica kills") {
			t.Logf("%s: %s %v", strings.TrimSpace(i.Name), i.Value, i.Examples)
		}
	}
	for _, k := range []string{"kill_replica", "pause_node", "node_loss", "clickhouse_down", "hang_upstream"} {
		if !kinds[k] {
			t.Errorf("the short schedule ran no %s fault: %+v", k, rep.Faults)
		}
	}
	// A clean run removes its temporary run directory (stores, logs, a
	// ClickHouse data dir) once every process writing in it has stopped.
	if m := regexp.MustCompile(`run directory (\S+)`).FindStringSubmatch(stderr.String()); m == nil {
		t.Errorf("airlock chaos did not say where its run directory is:\n%s", stderr.String())
	} else if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the clean run left its run directory %s behind (%v)", m[1], err)
	}
	for _, o := range []string{"completed", "denied", "rejected", "expired"} {
		if rep.Outcomes[o] == 0 {
			t.Errorf("no call ended %s: the load did not exercise it (outcomes %v)", o, rep.Outcomes)
		}
	}
}
