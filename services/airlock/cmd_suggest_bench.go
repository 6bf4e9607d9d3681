package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// newPolicySuggestBenchCmd is `airlock policy suggest-bench`: the measured
// loop of learning from decisions, in a scratch airlock of its own.
func newPolicySuggestBenchCmd() *cobra.Command {
	var calls, after int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "suggest-bench [--calls 3000]",
		Short: "Record a realistic history in a scratch airlock, then measure the asks its proven suggestions remove",
		Long: `Starts a scratch airlock in this process (embedded NATS in a temporary
directory, the real policy and approval services, the built-in policy, an
agent's budget raised to hold every call it records), and records --calls calls as agents and reviewers make them: routine
documentation writes and team reports people always approve, writes to /etc
and mail to strangers they reject or send back, risky shell commands and
deletes, and reads the policy allows. It then proposes suggestions from
that history, proves each by replay, adopts every proven one as a standing
grant through the approval service (as reviewer alice), records --after more
calls of the same mix, and reports the share of asks before and after and
what the replay says: that no refused call would have run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if calls < 10 || after < 0 {
				return usageErr(cmd, "--calls must be at least 10 and --after at least 0")
			}
			return suggestBench(cmd.Context(), cmd.OutOrStdout(), calls, after, seed)
		},
	}
	cmd.Flags().IntVar(&calls, "calls", 3000, "calls recorded before suggestions are made")
	cmd.Flags().IntVar(&after, "after", 1000, "calls recorded after the suggestions are adopted")
	cmd.Flags().Uint64Var(&seed, "seed", 25, "seed of the mix (the same seed records the same history)")
	return cmd
}

func suggestBench(ctx context.Context, out io.Writer, calls, after int, seed uint64) (err error) {
	dir, err := os.MkdirTemp("", "airlock-suggest-bench-")
	if err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: dir})
	if err != nil {
		return fmt.Errorf("start the scratch NATS server: %w", err)
	}
	defer ns.Stop()
	cfg := config.Default()
	cfg.NATS.URL = ns.URL()
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice", "bob", "carol"}}
	// The history is recorded as fast as the scratch airlock decides it,
	// thousands of calls a minute, far past an agent's budget
	// (limits.agent_calls_per_minute), which would refuse the rest: the
	// scratch airlock's budget holds every call the bench records, so that
	// the history is the one asked for at any --calls. Its requests are a
	// few hundred bytes, charged twice: 4 KiB a call holds them too.
	cfg.Limits.AgentCallsPerMinute = max(cfg.Limits.AgentCallsPerMinute, calls+after)
	cfg.Limits.AgentRequestBytesPerMinute = max(cfg.Limits.AgentRequestBytesPerMinute, (calls+after)<<12)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	deps, err := svc.Connect(ctx, cfg, log, "suggest-bench", true)
	if err != nil {
		return err
	}
	defer deps.NC.Close()
	pol, err := policy.NewFromConfig(ctx, deps)
	if err != nil {
		return err
	}
	appr, err := approval.NewFromConfig(ctx, deps)
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	var running []<-chan error
	defer func() {
		stop()
		for _, ended := range running {
			err = errors.Join(err, <-ended)
		}
	}()
	for _, s := range []svc.Service{pol, appr} {
		ended, err := svc.Start(rctx, s, time.Minute)
		if err != nil {
			return err
		}
		running = append(running, ended)
	}
	fk, err := deps.FrontendKey()
	if err != nil {
		return err
	}
	api := approvalapi.New(deps.NC, fk, "console")
	gen := &historyGen{js: deps.JS, stream: cfg.Stream.Name, approvals: api, reviewers: []string{"alice", "bob", "carol"}, rng: rand.New(rand.NewPCG(seed, 1)), prefix: "h"}
	defer gen.stop()

	start := time.Now()
	before, err := gen.run(ctx, historyMix(), calls)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "recorded %d calls in %s: %d asked a person (%d approved, %d rejected, %d sent back), %d allowed and %d denied by the policy\n",
		before.Calls, time.Since(start).Round(time.Millisecond), before.Asked, before.Approved, before.Rejected, before.Changes, before.Allowed, before.Denied)
	start = time.Now()
	rep, err := suggestions(ctx, cfg, store.NewStream(deps.JS, cfg.Stream.Name, nil), nil, suggest.Config{}, time.Time{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "proposed and proved %d suggestion(s) in %s (%d dropped by replay, %d group(s) not proposed)\n",
		len(rep.Suggestions), time.Since(start).Round(time.Millisecond), len(rep.Dropped), len(rep.Skipped))
	printSuggestions(out, rep, 0, nil)
	fmt.Fprintf(out, "\nreplay of the whole history with every suggestion adopted: %d of %d asks removed (%.1f%%); refused calls that would have run: %d\n",
		rep.AsksRemoved, rep.Asks, pctOf(rep.AsksRemoved, rep.Asks), len(rep.Together.Violations))
	for _, s := range rep.Suggestions {
		_, err := api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: s.Agent, FromCallId: s.FromCall, FromRevision: s.FromRevision, Grant: s.Grant,
			By: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}, RequestId: s.ID})
		if err != nil {
			return fmt.Errorf("adopt %s: %w", s.ID, err)
		}
	}
	if after == 0 {
		return nil
	}
	gen.prefix = "a"
	post, err := gen.run(ctx, historyMix(), after)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "asks before adopting: %d of %d calls (%.1f%%); after: %d of %d (%.1f%%)\n",
		before.Asked, before.Calls, pctOf(before.Asked, before.Calls), post.Asked, post.Calls, pctOf(post.Asked, post.Calls))
	return nil
}

func pctOf(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
