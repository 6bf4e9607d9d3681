package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/escape"
)

// newPolicyShadowCmd is `airlock policy shadow`: run a candidate policy
// beside the policy in force, through the console's REST API.
func newPolicyShadowCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shadow",
		Short: "Run a candidate policy in shadow: it decides every live call too, decides nothing, and its divergences are recorded",
		Long: `A candidate policy (a directory of *.rego files and data.json, as ` + "`policy eval --dir`" + `
and ` + "`policy replay`" + ` take) runs in shadow on every policy replica: each live call is
also decided by the candidate, with the same run-time rules, profile bindings
and standing grants, on its own goroutine; the live decision never waits for
it, and a candidate that fails, panics or is slow changes nothing. Where the
two decide differently a shadow_divergence event is recorded in the audit
trail (never on the agent's own subjects). Turning shadow on or off is
recorded as shadow_changed with who did it and the candidate's digest.

Commands go through the console's REST API as the owner of the API token
(start and stop: admins; divergences: auditors and admins).`,
	}
	api := &apiFlags{}
	pf := cmd.PersistentFlags()
	pf.StringVar(&api.api, "api", "", apiFlagHelp)
	pf.StringVar(&api.tokenFile, "token-file", "", "file holding an API token (default <data dir>/admin.token)")
	g.dataFlag(cmd)

	// call sends one request to the shadow endpoint and reads the state back.
	call := func(cmd *cobra.Command, method string, body any) (*airlockv1.ShadowStatusResponse, error) {
		c, err := api.client(g)
		if err != nil {
			return nil, err
		}
		st := &airlockv1.ShadowStatusResponse{}
		return st, c.do(cmd.Context(), method, "/api/v1/policy/shadow", body, st)
	}

	var dir string
	start := &cobra.Command{
		Use:   "start --dir DIR",
		Short: "Run the policy in DIR in shadow on every replica (replaces a candidate already running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageErr(cmd, "--dir is required: the candidate policy's directory (*.rego and data.json)")
			}
			if err := policyDirExists(dir); err != nil {
				return err
			}
			// Compiled here first, so a broken candidate is reported with
			// its file and line before anything is sent.
			code, err := decide.CodeFromDir(dir)
			if err != nil {
				return err
			}
			data, err := json.Marshal(code.Data)
			if err != nil {
				return fmt.Errorf("encode %s/data.json: %w", dir, err)
			}
			req := &airlockv1.ShadowStartRequest{Modules: code.Modules, DataJson: string(data), Source: dir}
			st, err := call(cmd, http.MethodPost, protoBody{req})
			if err != nil {
				return fmt.Errorf("start shadow: %w", err)
			}
			fmt.Printf("candidate %s (%s) runs in shadow on every policy replica within moments; `airlock policy shadow divergences` shows where it decides otherwise\n",
				escape.Terminal(st.GetState().GetCandidateDigest()), terminalList(st.GetModules()))
			return nil
		},
	}
	start.Flags().StringVar(&dir, "dir", "", "the candidate policy's directory")

	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop shadow evaluation on every replica",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := call(cmd, http.MethodDelete, nil)
			if err != nil {
				return fmt.Errorf("stop shadow: %w", err)
			}
			fmt.Printf("shadow stopped on every policy replica (candidate %s)\n", escape.Terminal(st.GetState().GetCandidateDigest()))
			return nil
		},
	}

	var statusJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Say whether a candidate runs in shadow, which, who started it, and what one replica did with it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := call(cmd, http.MethodGet, nil)
			if err != nil {
				return fmt.Errorf("read the shadow state: %w", err)
			}
			if statusJSON {
				return printProtoJSON(os.Stdout, st)
			}
			printShadowStatus(os.Stdout, st)
			return nil
		},
	}
	status.Flags().BoolVar(&statusJSON, "json", false, "print the policy service's JSON")

	var since, candidate string
	var divJSON bool
	divergences := &cobra.Command{
		Use:   "divergences [--since 720h] [--candidate DIGEST]",
		Short: "List the live calls the candidate decided otherwise, by rule and tool, with examples",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := api.client(g)
			if err != nil {
				return err
			}
			q := url.Values{}
			q.Set("since", since)
			if candidate != "" {
				q.Set("candidate", candidate)
			}
			var sum console.ShadowSummary
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/policy/shadow/divergences?"+q.Encode(), nil, &sum); err != nil {
				return fmt.Errorf("read the divergences: %w", err)
			}
			if divJSON {
				b, err := json.MarshalIndent(sum, "", "  ")
				if err != nil {
					return fmt.Errorf("encode the divergences: %w", err)
				}
				// As every --json: what JSON leaves raw (bidi and
				// zero-width characters, tag characters) as \u escapes.
				_, err = fmt.Fprintf(os.Stdout, "%s\n", escape.JSON(b))
				return err
			}
			printDivergences(os.Stdout, &sum)
			return nil
		},
	}
	df := divergences.Flags()
	df.StringVar(&since, "since", "720h", "divergences recorded since: a duration back from now (24h) or a date")
	df.StringVar(&candidate, "candidate", "", "a candidate's digest (default: the one in shadow, or the last one)")
	df.BoolVar(&divJSON, "json", false, "print the summary as JSON")

	cmd.AddCommand(start, stop, status, divergences)
	return cmd
}

func printShadowStatus(w io.Writer, st *airlockv1.ShadowStatusResponse) {
	s := st.GetState()
	switch {
	case s.GetOn():
		fmt.Fprintf(w, "on: candidate %s from %s (%s), started by %s at %s\n", escape.Terminal(s.GetCandidateDigest()), escape.Terminal(s.GetSource()),
			terminalList(st.GetModules()), escape.Terminal(s.GetBy().GetId()), s.GetAt().AsTime().Format(time.RFC3339))
	case s.GetCandidateDigest() != "":
		fmt.Fprintf(w, "off: candidate %s stopped by %s at %s\n", escape.Terminal(s.GetCandidateDigest()), escape.Terminal(s.GetBy().GetId()), s.GetAt().AsTime().Format(time.RFC3339))
	default:
		fmt.Fprintln(w, "off: no candidate has run in shadow (start one with `airlock policy shadow start --dir DIR`)")
	}
	fmt.Fprintf(w, "the replica that answered: %d decided by the candidate, %d diverged, %d failed, %d dropped\n", st.GetEvaluated(), st.GetDiverged(), st.GetFailed(), st.GetDropped())
	if st.GetError() != "" {
		fmt.Fprintf(w, "it cannot run the candidate: %s\n", escape.Terminal(st.GetError()))
	}
}

func printDivergences(w io.Writer, sum *console.ShadowSummary) {
	name := sum.Candidate
	if name == "" {
		name = "every candidate"
	}
	fmt.Fprintf(w, "%d divergence(s) of %s since %s (from %s)", sum.Total, escape.Terminal(name), sum.Since.Format(time.RFC3339), escape.Terminal(sum.Source))
	if sum.Truncated {
		fmt.Fprint(w, ", only the first rows read: narrow with --since")
	}
	fmt.Fprintln(w)
	if len(sum.Capped) > 0 {
		fmt.Fprintf(w, "only the first %d divergences of %s were read, so that no agent's flood hides the others'\n", sum.AgentRows, terminalList(sum.Capped))
	}
	if len(sum.Groups) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CALLS\tTOOL\tLIVE\tCANDIDATE\tEXAMPLE")
	for _, g := range sum.Groups {
		ex := ""
		if len(g.Examples) > 0 {
			e := g.Examples[0]
			ex = escape.Terminal(e.Agent + "/" + e.Call)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s by %s\t%s by %s\t%s\n", g.Count, escape.Terminal(g.Tool), escape.Terminal(g.Live), escape.Terminal(g.LiveRule),
			escape.Terminal(g.Candidate), escape.Terminal(g.CandidateRule), ex)
	}
	_ = tw.Flush()
}

// terminalList is names joined for one terminal line, each escaped (a
// candidate's module names are whatever its author sent).
func terminalList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = escape.Terminal(n)
	}
	return strings.Join(out, ", ")
}
