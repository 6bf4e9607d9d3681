package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// approvalsRememberCmd makes a standing grant from a call: the decision
// remembered for later calls like it (the coding-agent flow's "always
// allow": a shell-command prefix, or the exact arguments).
func approvalsRememberCmd(g *globals, f *apiFlags) *cobra.Command {
	var prefix string
	var exact bool
	var ttl time.Duration
	var uses int
	var noApprove bool
	cmd := &cobra.Command{
		Use:   "remember AGENT/CALL_ID",
		Short: "Remember a decision: later calls with the same command prefix (or exact arguments) run without asking",
		Long: `Creates a standing grant from a call you may decide: the same agent's later
calls of the same tool, under the same rule, run without asking while the
grant lasts — for a shell command, those starting with --prefix (a plain
command only: nothing chained, substituted or redirected); with --exact, only
the very same arguments. The person a coding agent's call acts for may
remember their own decisions when the rule asks them to confirm their calls.
When the call is pending it is approved too (the revision remembered), as
the first call the grant is for; --no-approve leaves it undecided.
` + "`airlock approvals grants`" + ` lists grants, ` + "`airlock approvals revoke`" + ` ends one.`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if prefix == "" && !exact {
				return usageErr(cmd, "say what to remember: --prefix \"git commit\" (a command prefix) or --exact (these arguments only)")
			}
			got, c, path, err := getCall(cmd, g, f, args[0], "remember")
			if err != nil {
				return err
			}
			rec := got.GetRecord()
			body := map[string]any{
				"from_call_id": rec.GetCall().GetCallId(), "from_revision": max(rec.GetCall().GetRevision(), 1),
				"agent_id": rec.GetCall().GetAgentId(), "tool": calls.QualifiedTool(rec.GetCall()), "uses": uses,
			}
			if ttl > 0 {
				body["expires_in"] = ttl.String()
			}
			if prefix != "" {
				body["command_prefixes"] = map[string]string{"/command": prefix}
			}
			if exact {
				body["arguments_digest"] = rec.GetArgumentsDigest()
			}
			var out airlockv1.CreateGrantResponse
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/grants", body, &out); err != nil {
				return fmt.Errorf("remember %s: %w", args[0], err)
			}
			if f.json {
				printJSON(&out)
			} else {
				fmt.Printf("standing grant %s: %s\n", escape.Terminal(out.GetGrant().GetId()), grantScope(out.GetGrant()))
			}
			if noApprove || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
				return nil
			}
			// The call it was made from is the first call the grant is
			// for: approve it too (the revision remembered, no other).
			rev := max(rec.GetCall().GetRevision(), 1)
			var dr airlockv1.DecideResponse
			if err := c.do(cmd.Context(), http.MethodPost, path+"/approve", map[string]any{"revision": rev, "reason": "remembered as standing grant " + out.GetGrant().GetId()}, &dr); err != nil {
				return fmt.Errorf("standing grant %s was created, but approving %s failed: %w (approve it with `airlock approvals approve %s --revision %d`)", out.GetGrant().GetId(), args[0], err, args[0], rev)
			}
			if f.json {
				printJSON(&dr)
			} else {
				fmt.Printf("%s: %s\n", escape.Terminal(args[0]), escape.Terminal(dr.GetMessage()))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noApprove, "no-approve", false, "only remember: leave the pending call it was made from undecided")
	cmd.Flags().StringVar(&prefix, "prefix", "", "remember shell commands starting with these words (the call's /command argument)")
	cmd.Flags().BoolVar(&exact, "exact", false, "remember only these exact arguments")
	cmd.Flags().DurationVar(&ttl, "for", 8*time.Hour, "how long the grant lasts (0: until revoked)")
	cmd.Flags().IntVar(&uses, "uses", 20, "how many calls it answers (0: unlimited)")
	return cmd
}

// grantScope says in one line what a grant lets run: its scope in the
// words every surface uses (grant.Describe), whether it was revoked, and who
// made it.
func grantScope(gr *airlockv1.StandingGrant) string {
	s := grant.Describe(gr)
	if gr.GetRevoked() {
		s += " (revoked by " + gr.GetRevokedBy().GetId() + ")"
	}
	return escape.Terminal(s + " (created by " + gr.GetCreatedBy().GetId() + ")")
}

func approvalsGrantsCmd(g *globals, f *apiFlags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "grants",
		Short: "List standing grants (remembered decisions)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(g)
			if err != nil {
				return err
			}
			q := url.Values{}
			if all {
				q.Set("all", "1")
			}
			var out airlockv1.ListGrantsResponse
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/grants?"+q.Encode(), nil, &out); err != nil {
				return fmt.Errorf("list grants: %w", err)
			}
			if f.json {
				printJSON(&out)
				return nil
			}
			if len(out.GetGrants()) == 0 {
				fmt.Println("no standing grants")
				return nil
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "GRANT\tSCOPE")
			for _, gr := range out.GetGrants() {
				fmt.Fprintf(w, "%s\t%s\n", escape.Terminal(gr.GetId()), grantScope(gr))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include revoked, expired and used-up grants")
	return cmd
}

func approvalsRevokeCmd(g *globals, f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke GRANT_ID",
		Short: "Revoke a standing grant",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(g)
			if err != nil {
				return err
			}
			var out airlockv1.RevokeGrantResponse
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/grants/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return fmt.Errorf("revoke %s: %w", args[0], err)
			}
			fmt.Printf("standing grant %s revoked\n", escape.Terminal(out.GetGrant().GetId()))
			return nil
		},
	}
}
