package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// sdkBenchOptions tune `airlock bench sdk`.
type sdkBenchOptions struct {
	JSON       bool
	Samples    int
	SDKDir     string
	CPUProfile string
	// goAgent is the command that runs the Go agent (RunGoAgent) with
	// the credential file and NATS URL; default: this executable's
	// hidden `bench sdk-agent`.
	goAgent func(cred, url string) *exec.Cmd
}

// sdkReport holds the figures of one run.
type sdkReport struct {
	Setup string  `json:"setup"`
	Node  string  `json:"node"`
	Go    latency `json:"go_sdk"`
	TS    latency `json:"typescript_sdk"`
	// Ratio is TS.P50us / Go.P50us; the goal is ≤ GoalMax.
	Ratio   float64 `json:"typescript_per_go_p50"`
	GoalMax float64 `json:"goal_max"`
	GoalMet bool    `json:"goal_met"`
}

// sdkBatch is how many calls each SDK makes before the other's turn.
const sdkBatch = 10

func newSDKCmd(env Env) *cobra.Command {
	o := sdkBenchOptions{}
	cmd := &cobra.Command{
		Use:   "sdk",
		Short: "TypeScript SDK vs Go SDK: the auto-allowed round trip of each, in one run (goal: TypeScript p50 ≤ 1.3× Go)",
		Long: `Starts what ` + "`airlock dev`" + ` starts for a call — the embedded NATS server with
dev's credentials, accounts and permissions, the policy and executor services —
and times auto-allowed demo__echo round trips made by the agent "bot" with
  (a) the Go SDK (Watcher.DoFast), in an agent process of its own (this
      executable's hidden ` + "`bench sdk-agent`" + `);
  (b) the TypeScript SDK (Client.do over NATS), in a node process
      (sdk/typescript/dist/bench/roundtrip.js, built with tsc first).
Both connect with the same agent credential file and time their own calls the
same way. They alternate in batches of 10 calls, so a change in the machine's
load affects each alike. The goal:
(b) p50 ≤ 1.3 × (a) p50. Run it from airlock's repository (or pass --sdk-dir)
after scripts/install-test-deps.sh has installed sdk/typescript's packages.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, env, o.CPUProfile, o.JSON, func(ctx context.Context, cfg config.Config) (*sdkReport, error) {
				return runSDKBench(ctx, cfg, o)
			}, printSDKBench)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Samples, "samples", 1000, "round trips timed for each SDK")
	f.StringVar(&o.SDKDir, "sdk-dir", filepath.Join("sdk", "typescript"), "the TypeScript SDK's directory (its node_modules installed)")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of this process to this file")
	return cmd
}

// Missed names the goal when the run missed it.
func (r *sdkReport) Missed() []string {
	if r.GoalMet {
		return nil
	}
	return []string{fmt.Sprintf("TypeScript SDK round trip %.2f× the Go SDK's p50, goal ≤ %.1f×", r.Ratio, r.GoalMax)}
}

func runSDKBench(ctx context.Context, cfg config.Config, o sdkBenchOptions) (*sdkReport, error) {
	if o.Samples < sdkBatch {
		return nil, fmt.Errorf("--samples must be at least %d", sdkBatch)
	}
	node, err := buildSDKBench(ctx, o.SDKDir)
	if err != nil {
		return nil, err
	}
	cfg, cred, stop, err := startDevLike(cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	rep := &sdkReport{
		Setup:   fmt.Sprintf("embedded NATS with airlock dev's credentials, file store, fsync %s; policy and executor in-process; agent bot", config.SyncText(cfg.Dev.Sync)),
		GoalMax: 1.3,
	}
	services := newBenchServices(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer services.stop()
	for name, mk := range map[string]func(svc.Deps) (svc.Service, error){
		"policy":   func(d svc.Deps) (svc.Service, error) { return policy.NewFromConfig(ctx, d) },
		"executor": func(d svc.Deps) (svc.Service, error) { return executor.NewFromConfig(ctx, d) },
	} {
		if _, err := services.start(name, mk); err != nil {
			return nil, err
		}
	}

	goCmd := o.goAgent
	if goCmd == nil {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this executable to run the Go agent: %w", err)
		}
		goCmd = func(cred, url string) *exec.Cmd {
			return exec.CommandContext(ctx, self, "bench", "sdk-agent", cred, url)
		}
	}
	goAgent, err := startAgent(goCmd(cred, cfg.NATS.URL), "the Go SDK")
	if err != nil {
		return nil, err
	}
	defer goAgent.stop()
	ts, err := startAgent(exec.CommandContext(ctx, node, filepath.Join(o.SDKDir, "dist", "bench", "roundtrip.js"), cred, cfg.NATS.URL), "the TypeScript SDK")
	if err != nil {
		return nil, err
	}
	defer ts.stop()
	version, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", node, err)
	}
	rep.Node = strings.TrimSpace(string(version))

	warm := o.Samples/10 + 50
	goLat, tsLat := make([]time.Duration, 0, o.Samples), make([]time.Duration, 0, o.Samples)
	for done := 0; done < warm+o.Samples; done += sdkBatch {
		gs, err := goAgent.calls(sdkBatch)
		if err != nil {
			return nil, err
		}
		ts, err := ts.calls(sdkBatch)
		if err != nil {
			return nil, err
		}
		if done >= warm {
			goLat, tsLat = append(goLat, gs...), append(tsLat, ts...)
		}
	}
	rep.Go, rep.TS = summarize(goLat), summarize(tsLat)
	rep.Ratio = rep.TS.P50us / rep.Go.P50us
	rep.GoalMet = rep.Ratio <= rep.GoalMax
	return rep, nil
}

// startDevLike starts an embedded NATS server secured as `airlock dev`
// secures it (natsauth.Dev under a temporary directory) and returns cfg set
// to use it as dev's services do, and agent bot's credential file.
func startDevLike(cfg config.Config) (config.Config, string, func(), error) {
	dir, err := os.MkdirTemp("", "airlock-bench-sdk-")
	if err != nil {
		return cfg, "", nil, err
	}
	creds := natsauth.Dev{DataDir: dir}
	// The credential's URL is a placeholder: both SDKs are given the
	// server's once it listens.
	if err := creds.Ensure(cfg, "nats://127.0.0.1:4222"); err != nil {
		_ = os.RemoveAll(dir)
		return cfg, "", nil, fmt.Errorf("generate dev credentials: %w", err)
	}
	interval, _ := config.ParseSync(cfg.Dev.Sync)
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(dir, "nats"),
		SyncAlways: interval == 0, SyncInterval: interval, ConfigFile: creds.ConfigFile()})
	if err != nil {
		_ = os.RemoveAll(dir)
		return cfg, "", nil, err
	}
	cfg.NATS.URL = ns.URL()
	cfg.Dev.DataDir = dir
	creds.Apply(&cfg, natsauth.RoleDev)
	return cfg, creds.CredentialFile(natsauth.FirstAgent), func() { ns.Stop(); _ = os.RemoveAll(dir) }, nil
}

// buildSDKBench builds the TypeScript SDK with tsc and returns the node it
// runs on: the one sdk/typescript installs from npm, else node on PATH.
func buildSDKBench(ctx context.Context, dir string) (string, error) {
	tsc := filepath.Join(dir, "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		return "", fmt.Errorf("the TypeScript SDK's packages are not installed in %s (%w): run scripts/install-test-deps.sh from airlock's repository, or pass --sdk-dir", dir, err)
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			return "", errors.New("node is not installed: run scripts/install-test-deps.sh (it installs Node 22 from npm into sdk/typescript)")
		}
	}
	cmd := exec.CommandContext(ctx, node, tsc, "-p", filepath.Join(dir, "tsconfig.json"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the TypeScript SDK with tsc: %w\n%s", err, out)
	}
	return node, nil
}

// agentProc is an agent process of the bench: for every line "N" on its
// input it makes N round trips and answers {"us":[...]} (or {"error":...}),
// after a first line {"connected":true}.
type agentProc struct {
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *strings.Builder
}

func startAgent(cmd *exec.Cmd, name string) (*agentProc, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a := &agentProc{name: name, cmd: cmd, in: in, out: bufio.NewScanner(stdout), stderr: &strings.Builder{}}
	a.out.Buffer(make([]byte, 1<<20), 1<<20)
	cmd.Stderr = a.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s's agent: %w", name, err)
	}
	if !a.out.Scan() || !strings.Contains(a.out.Text(), `"connected"`) {
		a.stop()
		return nil, fmt.Errorf("%s's agent did not connect: %s %s", name, a.out.Text(), a.stderr.String())
	}
	return a, nil
}

// calls has the agent make n round trips and returns each one's duration.
func (a *agentProc) calls(n int) ([]time.Duration, error) {
	if _, err := fmt.Fprintf(a.in, "%d\n", n); err != nil {
		return nil, fmt.Errorf("%s's agent stopped: %w (%s)", a.name, err, a.stderr.String())
	}
	if !a.out.Scan() {
		return nil, fmt.Errorf("%s's agent stopped: %s", a.name, a.stderr.String())
	}
	var res struct {
		US    []float64 `json:"us"`
		Error string    `json:"error"`
	}
	if err := json.Unmarshal(a.out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("%s's agent: unreadable output %q: %w", a.name, a.out.Text(), err)
	}
	if res.Error != "" || len(res.US) != n {
		return nil, fmt.Errorf("%s: %s (%d round trips of %d)", a.name, res.Error, len(res.US), n)
	}
	out := make([]time.Duration, n)
	for i, us := range res.US {
		out[i] = time.Duration(us * float64(time.Microsecond))
	}
	return out, nil
}

func (a *agentProc) stop() {
	_ = a.in.Close() // an agent ends when its input does
	_ = a.cmd.Wait()
}

func newSDKAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sdk-agent CREDENTIAL_FILE NATS_URL",
		Short:  "The Go agent `bench sdk` times (reads counts on stdin)",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunGoAgent(cmd.Context(), args[0], args[1], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// RunGoAgent is the Go side of `airlock bench sdk`, the twin of
// sdk/typescript/bench/roundtrip.ts: it connects as the agent of cred and,
// for every line "N" on in, makes N auto-allowed demo__echo round trips
// with Watcher.DoFast one after another and writes their durations in
// microseconds as one JSON line {"us":[...]} to out.
func RunGoAgent(ctx context.Context, cred, url string, in io.Reader, out io.Writer) error {
	client, err := airlock.Connect(ctx, cred, url)
	if err != nil {
		return fmt.Errorf("connect the Go SDK: %w", err)
	}
	defer client.Close()
	w, err := client.Watch()
	if err != nil {
		return err
	}
	defer w.Close()
	enc := json.NewEncoder(out)
	if err := enc.Encode(map[string]bool{"connected": true}); err != nil {
		return err
	}
	args := map[string]any{"text": "hello from the bench"}
	call := func() error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := w.DoFast(cctx, airlock.Call{Tool: "demo__echo", Args: args})
		if err == nil && !res.Completed() {
			err = fmt.Errorf("call %s ended %s (%s): the bench needs demo__echo auto-allowed, as airlock dev's policy does", res.CallID, res.Status, res.Reason)
		}
		return err
	}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		var n int
		if _, err := fmt.Sscan(lines.Text(), &n); err != nil || n <= 0 {
			continue
		}
		us := make([]float64, 0, n)
		var failed error
		for range n {
			t0 := time.Now()
			if failed = call(); failed != nil {
				break
			}
			us = append(us, float64(time.Since(t0).Nanoseconds())/1e3)
		}
		reply := map[string]any{"us": us}
		if failed != nil {
			reply = map[string]any{"error": failed.Error()}
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	return lines.Err()
}

func printSDKBench(w io.Writer, r *sdkReport) {
	fmt.Fprintf(w, "airlock bench sdk — %s\nnode %s\n\n", r.Setup, r.Node)
	fmt.Fprintf(w, "%-46s %10s %10s\n", "auto-allowed round trip (demo__echo)", "p50", "p99")
	fmt.Fprintf(w, "%-46s %8.0fµs %8.0fµs\n", "(a) Go SDK, Watcher.DoFast", r.Go.P50us, r.Go.P99us)
	fmt.Fprintf(w, "%-46s %8.0fµs %8.0fµs\n", "(b) TypeScript SDK, Client.do over NATS", r.TS.P50us, r.TS.P99us)
	fmt.Fprintf(w, "\n(b) / (a) = %.2f× p50 (goal ≤ %.1f×): %s\n", r.Ratio, r.GoalMax, mark(r.GoalMet))
}
