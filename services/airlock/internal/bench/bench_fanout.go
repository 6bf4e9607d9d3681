package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/airlock/internal/channels"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// fanoutBenchOptions tune `airlock bench fanout`.
type fanoutBenchOptions struct {
	JSON       bool
	Samples    int
	CPUProfile string
}

// fanoutReport holds the figures of one run.
type fanoutReport struct {
	Setup string `json:"setup"`
	// One is approval_requested → the mail delivered, for calls routed to email alone.
	One latency `json:"one_channel"`
	// Five is approval_requested → the last of five deliveries (email, three
	// webhooks, PagerDuty), for calls routed to all five.
	Five latency `json:"five_channels"`
	// Ratio is Five.P50us / One.P50us; the goal is ≤ GoalMax.
	Ratio   float64 `json:"five_per_one_p50"`
	GoalMax float64 `json:"goal_max"`
	GoalMet bool    `json:"goal_met"`
}

func newFanoutCmd(env Env) *cobra.Command {
	o := fanoutBenchOptions{}
	cmd := &cobra.Command{
		Use:   "fanout",
		Short: "Notification fan-out: a pending call told to five channels vs to one (SPEC §8, goal p50 ≤ 1.2×)",
		Long: `Starts an embedded NATS server, the approval service with the email, webhook
and PagerDuty notifiers built from configuration as ` + "`airlock serve approval`" + ` builds
them, and local receivers: a real SMTP server (STARTTLS, AUTH PLAIN), an HTTP
server that verifies each webhook's signature, and a PagerDuty Events API v2
stand-in. It then publishes approval_requested events, one at a time, and
times each from the publish to the last channel's delivery at its receiver:
  one:  calls routed to email alone (the costliest single channel: TLS
        handshake, authentication, SMTP round trips);
  five: calls routed to email, three webhook endpoints and PagerDuty.
One and five alternate, sample by sample, so a change in the machine's load
affects both alike. SPEC §8's goal: five ≤ 1.2 × one, p50. Exit status 1
when the goal is missed (docs/benchmarks.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, env, o.CPUProfile, o.JSON, func(ctx context.Context, cfg config.Config) (*fanoutReport, error) {
				return runFanoutBench(ctx, cfg, o)
			}, printFanoutBench)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Samples, "samples", 300, "calls timed for each figure")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	return cmd
}

// Missed implements goalReport.
func (r *fanoutReport) Missed() []string {
	if r.GoalMet {
		return nil
	}
	return []string{fmt.Sprintf("five channels %.2f× one, p50, goal ≤ %.1f×", r.Ratio, r.GoalMax)}
}

func printFanoutBench(w io.Writer, r *fanoutReport) {
	fmt.Fprintf(w, "setup: %s\n\n", r.Setup)
	fmt.Fprintf(w, "%-46s %10s %10s\n", "approval_requested → last delivery", "p50 µs", "p99 µs")
	fmt.Fprintf(w, "%-46s %10.0f %10.0f\n", "one channel (email)", r.One.P50us, r.One.P99us)
	fmt.Fprintf(w, "%-46s %10.0f %10.0f\n", "five channels (email, 3 webhooks, PagerDuty)", r.Five.P50us, r.Five.P99us)
	fmt.Fprintf(w, "\ngoal five ≤ %.1f× one, p50: %s (%.2f×, %d samples each)\n", r.GoalMax, mark(r.GoalMet), r.Ratio, r.One.N)
}

func runFanoutBench(ctx context.Context, cfg config.Config, o fanoutBenchOptions) (*fanoutReport, error) {
	if o.Samples < 10 {
		return nil, errors.New("--samples must be at least 10")
	}
	dir, url, stop, err := startBenchServer(cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	rx, err := channels.StartReceivers(dir)
	if err != nil {
		return nil, err
	}
	defer rx.Close()
	cfg.NATS.URL = url
	cfg.Dev.DataDir = dir
	cfg.Approval.LogNotifier = false
	// The bench measures the channels' deliveries, not the bound on one
	// agent's announcements: every call of an agent is announced.
	cfg.Approval.NotifyBurst = cfg.Approval.MaxPendingPerAgent
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	rx.Configure(&cfg)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	services := newBenchServices(ctx, cfg, log)
	defer services.stop()
	if _, err := services.start("approval", func(d svc.Deps) (svc.Service, error) {
		return approval.NewFromConfig(ctx, d, channels.OnCall(d)...)
	}); err != nil {
		return nil, err
	}
	deps, err := svc.Connect(ctx, cfg, log, "airlock-bench-policy", true)
	if err != nil {
		return nil, err
	}
	defer deps.NC.Close()
	pub := deps.Publisher("policy")

	// "webhook" routes to every endpoint: email + 3 webhooks + PagerDuty.
	one, five := []string{"email"}, []string{"email", "webhook", "pagerduty"}
	// Every call stays pending: each agent sends no more than its share of
	// pending calls (approval.max_pending_per_agent), past which the
	// approval service would cancel the call instead of announcing it.
	share := cfg.Approval.MaxPendingPerAgent
	sample := func(i int, notify []string) (time.Duration, error) {
		id, agent := fmt.Sprintf("fan-%d", i), fmt.Sprintf("bench-%d", i/share)
		n := 1
		if len(notify) > 1 {
			n = 2 + len(channels.Webhooks)
		}
		wait := rx.Expect(id, n)
		t0 := time.Now()
		if err := channels.PublishAsk(ctx, pub, agent, id, notify); err != nil {
			return 0, err
		}
		select {
		case last := <-wait:
			return last.Sub(t0), nil
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("call %s: not every channel delivered within 30s (%s)", id, rx.Missing(id))
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	warm := o.Samples/10 + 20
	a, b := make([]time.Duration, 0, o.Samples), make([]time.Duration, 0, o.Samples)
	for i := range warm + o.Samples {
		d1, err := sample(2*i, one)
		if err != nil {
			return nil, err
		}
		d5, err := sample(2*i+1, five)
		if err != nil {
			return nil, err
		}
		if i >= warm {
			a, b = append(a, d1), append(b, d5)
		}
	}
	rep := &fanoutReport{
		Setup: fmt.Sprintf("embedded NATS, file store, fsync %s; the approval service in-process; receivers on loopback: an SMTP server (go-smtp, STARTTLS, AUTH PLAIN), an HTTP server verifying webhook signatures, a PagerDuty Events v2 stand-in; one call at a time",
			config.SyncText(cfg.Dev.Sync)),
		One: summarize(a), Five: summarize(b), GoalMax: 1.2,
	}
	rep.Ratio = rep.Five.P50us / rep.One.P50us
	rep.GoalMet = rep.Ratio <= rep.GoalMax
	return rep, nil
}
