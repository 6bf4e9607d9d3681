package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
)

// approvalsInDoubtCmd is `airlock approvals in-doubt`: the calls that ended
// in doubt, waiting for a person to say whether they happened.
func approvalsInDoubtCmd(g *globals, f *apiFlags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "in-doubt",
		Short: "List calls that ended in doubt (failed, the tool may or may not have run): say whether each happened with `approvals resolve`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(g)
			if err != nil {
				return err
			}
			path := "/api/v1/in-doubt"
			if all {
				path += "?all=1"
			}
			var out airlockv1.ListInDoubtResponse
			if err := c.do(cmd.Context(), http.MethodGet, path, nil, &out); err != nil {
				return refusal(fmt.Errorf("list calls in doubt: %w", err))
			}
			if f.json {
				printJSON(&out)
				return nil
			}
			defer printUnlisted(&out)
			if len(out.GetTasks()) == 0 {
				fmt.Println("no call is in doubt")
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "CALL\tREV\tTOOL\tFAILED (UTC)\tWHY\tANSWER")
			for _, t := range out.GetTasks() {
				answer := "open: airlock approvals resolve " + t.GetAgentId() + "/" + t.GetCallId() + " --happened yes|no"
				if t.GetResolved() {
					answer = calls.Happened(t.GetHappened()) + " (" + t.GetResolvedBy().GetId() + ")"
					if t.GetNote() != "" {
						answer += ": " + t.GetNote()
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", escape.Terminal(t.GetAgentId()+"/"+t.GetCallId()), t.GetRevision(),
					escape.Terminal(calls.ToolName(t.GetServer(), t.GetTool())), t.GetFailedAt().AsTime().UTC().Format("2006-01-02 15:04:05"),
					cliOneLine(strings.TrimSpace(t.GetReason()+" "+t.GetMessage()), 60), cliOneLine(answer, 80))
			}
			_ = tw.Flush()
			if out.GetTruncated() {
				fmt.Println("(only the first ones are listed)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include the calls a person already answered")
	return cmd
}

// printUnlisted says which calls in doubt the list cannot show: those of
// an agent at its share of open tasks, or of any agent once the bucket is
// past its mark, get no task; the trail has them, and each can still be
// answered.
func printUnlisted(out *airlockv1.ListInDoubtResponse) {
	for _, agent := range out.GetAgentsAtShare() {
		fmt.Printf("agent %s holds its %d open tasks (approval.max_in_doubt_per_agent): its further calls that end in doubt are not listed;\n"+
			"  `airlock audit query --agent %s --type failed` shows them, `airlock approvals resolve %s/CALL_ID --happened yes|no` answers one\n",
			escape.Terminal(agent), out.GetMaxPerAgent(), escape.Terminal(agent), escape.Terminal(agent))
	}
	if out.GetBucketPastMark() {
		fmt.Println("the in-doubt bucket is full (buckets.in_doubt_max_bytes): calls that end in doubt now get no task and are not listed;\n" +
			"  `airlock audit query --type failed` shows them; answer open tasks (answered ones leave after approval.ended_retention) or raise the setting")
	}
}

// approvalsResolveCmd is `airlock approvals resolve AGENT/CALL_ID
// --happened yes|no [--note TEXT]`.
func approvalsResolveCmd(g *globals, f *apiFlags) *cobra.Command {
	var happened, note string
	cmd := &cobra.Command{
		Use:   "resolve AGENT/CALL_ID --happened yes|no",
		Short: "Say whether a call that ended in doubt happened; the agent sees the answer",
		Long: `Records your answer to "did it happen?" about a call that ended failed with
outcome indeterminate (its tool may or may not have run): once per call, in
the audit trail (outcome_resolved), where the agent sees it. Check the
system the tool acts on first, and say what you checked in --note.

Exit status 0 when your answer was recorded; 1 when it changed nothing (you
had given the same answer) or the API could not be reached; 2 when the
command was used wrongly or the API refused (no such call in doubt, already
answered otherwise, not a reviewer).`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if happened != "yes" && happened != "no" {
				return usageErr(cmd, "--happened must be yes or no")
			}
			path, err := callArg(cmd, args[0])
			if err != nil {
				return err
			}
			path = strings.Replace(path, "/api/v1/approvals/", "/api/v1/in-doubt/", 1)
			c, err := f.client(g)
			if err != nil {
				return err
			}
			var out airlockv1.ResolveInDoubtResponse
			if err := c.do(cmd.Context(), http.MethodPost, path, map[string]string{"happened": happened, "note": note}, &out); err != nil {
				return refusal(fmt.Errorf("resolve %s: %w", args[0], err))
			}
			if f.json {
				printJSON(&out)
			} else {
				msg := "recorded: " + calls.Happened(out.GetTask().GetHappened())
				if !out.GetChanged() {
					msg = "you had already said " + calls.Happened(out.GetTask().GetHappened()) + "; nothing changed"
				}
				fmt.Printf("%s: %s\n", escape.Terminal(args[0]), msg)
			}
			if !out.GetChanged() {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&happened, "happened", "", "yes (the call took effect) or no (required)")
	cmd.Flags().StringVar(&note, "note", "", "what you checked (recorded, and the agent sees it)")
	_ = cmd.MarkFlagRequired("happened")
	return cmd
}
