// Package policybench measures policy decisions: in process with the
// prepared Rego query, and the same policy, data and input through OPA's own
// REST server started from the OPA module on a loopback port.
package policybench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/runtime"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
)

// Goals from SPEC §8.
const (
	GoalP50Micros = 30.0
	GoalRatio     = 10.0
)

// Options of one run.
type Options struct {
	// Rules is how many run-time rules are added to the default policy (default 100).
	Rules int
	// Decisions measured in process (default 20000) and through REST (default 2000).
	Decisions, RESTDecisions int
}

// Result holds every figure of a run; it is what `airlock bench policy --json` prints.
type Result struct {
	Rules          int     `json:"rules"`
	PolicyRevision string  `json:"policy_revision"`
	Call           string  `json:"call"`
	Action         string  `json:"action"`
	RuleID         string  `json:"rule_id"`
	Decisions      int     `json:"decisions"`
	InProcP50us    float64 `json:"in_process_p50_us"`
	InProcP99us    float64 `json:"in_process_p99_us"`
	InProcMeanus   float64 `json:"in_process_mean_us"`
	RESTDecisions  int     `json:"rest_decisions"`
	RESTP50us      float64 `json:"rest_p50_us"`
	RESTP99us      float64 `json:"rest_p99_us"`
	RESTMeanus     float64 `json:"rest_mean_us"`
	RatioP50       float64 `json:"ratio_p50"`
	RatioP99       float64 `json:"ratio_p99"`
	GoalP50us      float64 `json:"goal_in_process_p50_us"`
	GoalRatio      float64 `json:"goal_ratio"`
	MeetsP50       bool    `json:"meets_p50_goal"`
	MeetsRatio     bool    `json:"meets_ratio_goal"`
	OPAServer      string  `json:"opa_server"`
	// The same measurement with FloorPolicy: what each way costs when the
	// policy does nothing. RatioP50 cannot exceed FloorRatioP50 by much, as
	// the policy's own work adds to both sides.
	FloorInProcP50us float64 `json:"floor_in_process_p50_us"`
	FloorRESTP50us   float64 `json:"floor_rest_p50_us"`
	FloorRatioP50    float64 `json:"floor_ratio_p50"`
}

// Run measures one decision of SampleCall with the default policy plus
// opts.Rules rules: first in process (the service's Evaluate: input, prepared
// query, document, digest), then the same modules, data and input through
// OPA's REST server (POST /v1/data/airlock/decision over a kept-alive
// loopback connection), started from the OPA Go module for the run; then
// both again with FloorPolicy, the floor of each way.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Rules == 0 {
		opts.Rules = 100
	}
	if opts.Decisions == 0 {
		opts.Decisions = 20000
	}
	if opts.RESTDecisions == 0 {
		opts.RESTDecisions = 2000
	}
	code, err := policy.DefaultCode()
	if err != nil {
		return nil, err
	}
	ev, err := policy.NewEvaluator(ctx, code, policy.BenchRules(opts.Rules), nil)
	if err != nil {
		return nil, err
	}
	call := policy.BenchCall()
	res := &Result{Rules: opts.Rules, PolicyRevision: ev.Revision(), Call: call.Server + "__" + call.Tool,
		Decisions: opts.Decisions, RESTDecisions: opts.RESTDecisions, GoalP50us: GoalP50Micros, GoalRatio: GoalRatio}

	d, err := ev.Evaluate(ctx, call, time.Now())
	if err != nil {
		return nil, fmt.Errorf("sample decision: %w", err)
	}
	res.Action, res.RuleID = strings.ToLower(strings.TrimPrefix(d.Action.String(), "ACTION_")), d.RuleId
	lat, err := inProcess(ctx, ev, call, opts.Decisions)
	if err != nil {
		return nil, err
	}
	res.InProcP50us, res.InProcP99us, res.InProcMeanus = stats(lat)
	rlat, url, err := throughREST(ctx, ev, call, d, opts.RESTDecisions)
	if err != nil {
		return nil, err
	}
	res.OPAServer = url
	res.RESTP50us, res.RESTP99us, res.RESTMeanus = stats(rlat)
	res.RatioP50 = res.RESTP50us / res.InProcP50us
	res.RatioP99 = res.RESTP99us / res.InProcP99us
	res.MeetsP50 = res.InProcP50us <= GoalP50Micros
	res.MeetsRatio = res.RatioP50 >= GoalRatio

	// The floor: a policy whose decision is a constant, through both ways.
	// The real policy's work adds about the same time to each, so the real
	// ratio can only be below this one.
	fcode, err := policy.NewCode(map[string]string{"floor.rego": FloorPolicy}, nil)
	if err != nil {
		return nil, err
	}
	fev, err := policy.NewEvaluator(ctx, fcode, nil, nil)
	if err != nil {
		return nil, err
	}
	fd, err := fev.Evaluate(ctx, call, time.Now())
	if err != nil {
		return nil, fmt.Errorf("floor decision: %w", err)
	}
	if lat, err = inProcess(ctx, fev, call, opts.Decisions); err != nil {
		return nil, err
	}
	res.FloorInProcP50us, _, _ = stats(lat)
	if rlat, _, err = throughREST(ctx, fev, call, fd, opts.RESTDecisions); err != nil {
		return nil, err
	}
	res.FloorRESTP50us, _, _ = stats(rlat)
	res.FloorRatioP50 = res.FloorRESTP50us / res.FloorInProcP50us
	return res, nil
}

// FloorPolicy is the cheapest policy there is: every call gets the same
// decision, so measuring it shows what each way costs before any rule runs.
const FloorPolicy = `package airlock

decision := {"action": "allow", "rule_id": "floor", "reason": "constant", "risk": "low", "redact": []}
`

// inProcess times n decisions of call by ev.Evaluate, as the service makes
// them (input, prepared query, document, digest), after a warm-up.
func inProcess(ctx context.Context, ev *policy.Evaluator, call *airlockv1.ToolCall, n int) ([]time.Duration, error) {
	now := time.Now()
	for i := 0; i < n/10; i++ {
		_, _ = ev.Evaluate(ctx, call, now)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if _, err := ev.Evaluate(ctx, call, now); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	return lat, nil
}

// throughREST serves ev's modules and data with OPA's REST server and times
// n decisions of call through it, each read into Go values as a client
// would. It first checks that the server decides as in process (want).
func throughREST(ctx context.Context, ev *policy.Evaluator, call *airlockv1.ToolCall, want *airlockv1.Decision, n int) ([]time.Duration, string, error) {
	rest, err := startOPA(ctx, ev)
	if err != nil {
		return nil, "", err
	}
	defer rest.stop()
	in, err := policy.Input(call)
	if err != nil {
		return nil, "", err
	}
	body, _ := json.Marshal(map[string]any{"input": in})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	post := func() (map[string]any, error) {
		resp, err := client.Post(rest.url+"/v1/data/airlock/decision", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("OPA answered %s: %s", resp.Status, raw)
		}
		var out struct {
			Result map[string]any `json:"result"`
		}
		return out.Result, json.Unmarshal(raw, &out)
	}
	first, err := post()
	if err != nil {
		return nil, "", fmt.Errorf("OPA REST decision: %w", err)
	}
	action := strings.ToLower(strings.TrimPrefix(want.Action.String(), "ACTION_"))
	risk := strings.ToLower(strings.TrimPrefix(want.Risk.String(), "RISK_"))
	if first["action"] != action || first["rule_id"] != want.RuleId || first["reason"] != want.Reason || first["risk"] != risk {
		return nil, "", fmt.Errorf("OPA's REST server decided %v by %v (%v, risk %v), in process %s by %s (%s, risk %s): not the same policy",
			first["action"], first["rule_id"], first["reason"], first["risk"], action, want.RuleId, want.Reason, risk)
	}
	for i := 0; i < n/10; i++ {
		_, _ = post()
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if _, err := post(); err != nil {
			return nil, "", err
		}
		lat[i] = time.Since(t0)
	}
	return lat, rest.url, nil
}

func stats(lat []time.Duration) (p50, p99, mean float64) {
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(s[len(s)*50/100]), us(s[len(s)*99/100]), us(sum / time.Duration(len(s)))
}

type opaServer struct {
	url  string
	dir  string
	stop func()
}

// startOPA writes the evaluator's modules (including the rules compiled to
// Rego) and data to a temporary directory and serves it with OPA's runtime on
// a free loopback port.
func startOPA(ctx context.Context, ev *policy.Evaluator) (*opaServer, error) {
	dir, err := os.MkdirTemp("", "airlock-opa-bench-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	for name, src := range ev.Modules() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			cleanup()
			return nil, err
		}
	}
	data, _ := json.Marshal(ev.Data())
	if err := os.WriteFile(filepath.Join(dir, "data.json"), data, 0o600); err != nil {
		cleanup()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	params := runtime.NewParams()
	params.Addrs = &[]string{addr}
	params.Paths = []string{dir}
	params.Output = io.Discard
	params.Logger = logging.NewNoOpLogger()
	params.ConsoleLogger = logging.NewNoOpLogger()
	params.GracefulShutdownPeriod = 1
	rctx, cancel := context.WithCancel(ctx)
	rt, err := runtime.NewRuntime(rctx, params)
	if err != nil {
		cancel()
		cleanup()
		return nil, fmt.Errorf("start OPA runtime: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Serve(rctx) }()
	s := &opaServer{url: "http://" + addr, dir: dir, stop: func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		cleanup()
	}}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(s.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-done:
			cleanup()
			return nil, fmt.Errorf("OPA server stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("OPA server on %s did not become healthy within 15s", addr)
		}
		time.Sleep(20 * time.Millisecond) // polling a server that is starting; no event to wait on
	}
}
