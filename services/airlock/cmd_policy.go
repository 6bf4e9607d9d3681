package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-gate/airlock/policies"
	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/pbjson"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Test, dry-run and change the policy: Rego tests, eval, run-time rules, replay, shadow, suggested grants",
	}
	cmd.AddCommand(newPolicyTestCmd(g), newPolicyEvalCmd(g), newPolicyRulesCmd(g), newPolicyReplayCmd(g), newPolicySuggestCmd(g), newPolicySuggestBenchCmd(), newPolicyShadowCmd(g))
	return cmd
}

// policyDirExists says, as a sentence, why dir cannot be a policy directory.
func policyDirExists(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the policy directory %s does not exist: give a directory with the policy's *.rego files and data.json (make one with `cp -r policies %s` in airlock's repository, then edit it)", dir, dir)
	case err != nil:
		return fmt.Errorf("the policy directory %s cannot be read: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a policy directory: give the directory that holds the *.rego files and data.json", dir)
	}
	return nil
}

// policyFS is the policy directory to use: the argument, else policy.dir
// from the configuration, else the built-in default policy.
func policyFS(cfg config.Config, dir string) (fs.FS, string) {
	if dir == "" {
		dir = cfg.Policy.Dir
	}
	if dir == "" {
		return policies.Default(), "built-in default policy"
	}
	return os.DirFS(dir), dir
}

func newPolicyTestCmd(g *globals) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the Rego unit tests (*_test.rego) of a policy directory",
		Long: `Runs every test_* rule of the *_test.rego files in DIR (default: policy.dir,
else the built-in default policy) against the policy and its data.json, like
opa test. Exit status 1 when a test fails or the policy does not compile.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			dir := ""
			if len(args) == 1 {
				dir = args[0]
				if err := policyDirExists(dir); err != nil {
					return usageErr(cmd, "%v", err)
				}
			}
			fsys, name := policyFS(cfg, dir)
			results, err := decide.RunRegoTests(cmd.Context(), fsys)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(results) == 0 {
				return fmt.Errorf("%s has no tests: add test_* rules in *_test.rego files", name)
			}
			failed := 0
			for _, r := range results {
				switch {
				case r.Error != "":
					failed++
					fmt.Printf("ERROR %s: %s\n", r.Name, r.Error)
				case !r.Pass:
					failed++
					fmt.Printf("FAIL  %s\n", r.Name)
				case verbose:
					fmt.Printf("PASS  %s (%s)\n", r.Name, r.Duration.Round(time.Microsecond))
				}
			}
			fmt.Printf("%s: %d/%d passed\n", name, len(results)-failed, len(results))
			if failed > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing tests too")
	return cmd
}

func newPolicyEvalCmd(g *globals) *cobra.Command {
	var file, dir string
	var live, offline bool
	cmd := &cobra.Command{
		Use:   "eval --call FILE|-",
		Short: "Dry-run one call and print the decision document as JSON",
		Long: `Reads a tool call as JSON (FILE, or - for stdin), for example
  {"agent_id": "bot", "tool": "fs__delete_file", "arguments": {"path": "/etc/passwd"}}
and prints the decision the policy makes about it, saying on stderr what
decided it:

  (default)   the running policy service: the policy in force with its
              run-time rules; when no airlock answers, the policy here
              (policy.dir or the built-in default) without run-time rules
  --dir DIR   the policy in DIR, with the run-time rules of the running
              airlock when it answers (a candidate tried against today's rules)
  --live      the running policy service, or fail
  --offline   the policy here only, without connecting

Profile bindings come from the configuration. Standing grants are never
used and nothing is published.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErr(cmd, "--call is required (a JSON file, or - for stdin)")
			}
			var raw []byte
			var err error
			if file == "-" {
				raw, err = io.ReadAll(os.Stdin)
			} else {
				raw, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("read call: %w", err)
			}
			call := &airlockv1.ToolCall{}
			if err := protojson.Unmarshal(raw, call); err != nil {
				return fmt.Errorf("the call is not a JSON airlock.v1.ToolCall such as {\"agent_id\":\"bot\",\"tool\":\"fs__read_file\",\"arguments\":{}}: %w", err)
			}
			if call.AgentId == "" {
				call.AgentId = "cli"
			}
			if call.CallId == "" {
				call.CallId = "eval"
			}
			if r := ingress.Call(call); r != nil {
				return fmt.Errorf("call refused: %s", r.Reason)
			}
			if live && offline {
				return usageErr(cmd, "--live and --offline contradict each other: choose one")
			}
			if dir != "" {
				if err := policyDirExists(dir); err != nil {
					return usageErr(cmd, "--dir: %v", err)
				}
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			d, source, err := evalCall(cmd.Context(), g, cfg, call, dir, live, offline)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "decided by %s\n", source)
			return printProtoJSON(os.Stdout, d)
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "call", "", "JSON file holding the call, or - for stdin")
	f.StringVar(&dir, "dir", "", "policy directory (default policy.dir, else the built-in policy)")
	f.BoolVar(&live, "live", false, "ask the running policy service, or fail")
	f.BoolVar(&offline, "offline", false, "evaluate here only, without the run-time rules of a running airlock")
	g.dataFlag(cmd)
	return cmd
}

// evalCall decides call as `airlock policy eval` says, and names what decided.
func evalCall(ctx context.Context, g *globals, cfg config.Config, call *airlockv1.ToolCall, dir string, live, offline bool) (*airlockv1.Decision, string, error) {
	var client *policyapi.Client
	var why error
	if !offline {
		// A running airlock answers at once; do not make a person wait long
		// to learn there is none.
		cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		nc, _, err := g.connect(cctx, cfg)
		cancel()
		if err == nil {
			defer nc.Close()
			client = policyapi.New(nc, seal.Key{}, "cli")
		}
		why = err
	}
	if dir == "" && client != nil {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := client.Eval(qctx, call)
		cancel()
		if err == nil {
			return d, "the running policy service (the policy in force, with its run-time rules)", nil
		}
		why = err
	}
	if live {
		return nil, "", fmt.Errorf("no running policy service answered (%v): start airlock, or drop --live to evaluate here", why)
	}
	var rules []*airlockv1.PolicyRule
	source := ""
	if client != nil {
		if rules, why = runtimeRules(ctx, client); why == nil {
			source = fmt.Sprintf(", with the %d run-time rule(s) of the running airlock", len(rules))
		}
	}
	if source == "" {
		source = ", without run-time rules"
		if !offline {
			source += fmt.Sprintf(" (no running airlock answered: %v)", why)
		}
	}
	ev, name, err := evaluatorWith(ctx, cfg, dir, rules)
	if err != nil {
		return nil, "", err
	}
	d, _ := ev.Evaluate(ctx, call, time.Now())
	return d, "the " + name + source, nil
}

// runtimeRules are the rules put at run time in the running airlock.
func runtimeRules(ctx context.Context, client *policyapi.Client) ([]*airlockv1.PolicyRule, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := client.ListRules(qctx)
	if err != nil {
		return nil, err
	}
	return resp.GetRules(), nil
}

// evaluatorWith is the policy in dir (policy.dir or the built-in one when
// empty) with rules put at run time and the configuration's profile
// bindings and ask defaults — how the policy service decides with it — and
// the policy's name.
func evaluatorWith(ctx context.Context, cfg config.Config, dir string, rules []*airlockv1.PolicyRule) (*decide.Evaluator, string, error) {
	fsys, name := policyFS(cfg, dir)
	code, err := decide.CodeFromFS(fsys)
	if err != nil {
		return nil, name, fmt.Errorf("%s: %w", name, err)
	}
	ev, err := decide.NewEvaluator(ctx, code, rules, cfg.Policy.Profiles, decide.WithAskDefaults(decide.AskDefaultsFrom(cfg)))
	if err != nil {
		return nil, name, fmt.Errorf("%s with the run-time rules: %w", name, err)
	}
	return ev, name, nil
}

func newPolicyRulesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List, add and remove run-time rules (take effect on every replica without restart)",
		Long: `Rules are changed through the console's REST API, as the person who owns the
API token (by default the admin token ` + "`airlock dev`" + ` writes): the change is
recorded with that person, and only admins may make it. Listing reads the
policy service over NATS.`,
	}
	api := &apiFlags{}
	pf := cmd.PersistentFlags()
	pf.StringVar(&api.api, "api", "", apiFlagHelp)
	pf.StringVar(&api.tokenFile, "token-file", "", "file holding an admin's API token (default <data dir>/admin.token)")
	g.dataFlag(cmd)
	client := func(cmd *cobra.Command) (*policyapi.Client, func(), error) {
		cfg, err := g.load()
		if err != nil {
			return nil, nil, err
		}
		nc, _, err := g.connect(cmd.Context(), cfg)
		if err != nil {
			return nil, nil, err
		}
		return policyapi.New(nc, seal.Key{}, "cli"), nc.Close, nil
	}

	// listRules asks the policy service for every rule that decides.
	listRules := func(cmd *cobra.Command) (*airlockv1.RulesListResponse, error) {
		c, done, err := client(cmd)
		if err != nil {
			return nil, err
		}
		defer done()
		resp, err := c.ListRules(cmd.Context())
		if err != nil {
			return nil, fmt.Errorf("list the rules: %w (is airlock running?)", err)
		}
		return resp, nil
	}

	var listJSON, listWide bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List every rule that decides calls: the run-time rules and the policy's built-in ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := listRules(cmd)
			if err != nil {
				return err
			}
			if listJSON {
				return printProtoJSON(os.Stdout, resp)
			}
			printRules(os.Stdout, resp, listWide)
			return nil
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print the policy service's JSON")
	list.Flags().BoolVar(&listWide, "wide", false, "print MATCHES and REASON whole, however wide")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one rule (run-time or built-in) whole, as the policy service holds it",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := listRules(cmd)
			if err != nil {
				return err
			}
			for _, x := range ruleRows(resp) {
				if x.r.GetId() == args[0] {
					fmt.Printf("rule %s (%s), matches %s\n", x.r.GetId(), x.source, ruleMatch(x.r))
					return printProtoJSON(os.Stdout, x.r)
				}
			}
			return fmt.Errorf("no rule %q: `airlock policy rules list` shows every rule's id", args[0])
		},
	}

	var (
		r                 airlockv1.PolicyRule
		jsonRule          string
		argGlobs          []string
		approvers, notify []string
		redact, words     []string
	)
	add := &cobra.Command{
		Use:   "add --id ID --effect allow|ask|deny [conditions...]",
		Short: "Create or replace a run-time rule",
		Long: `Creates or replaces rule ID. Conditions that are set must all hold: --server,
--tool (exact, "*" for any), --tool-pattern (glob on the tool name),
--pattern (glob on server__tool), --agent, --arg /json/pointer=GLOB,
--tool-word WORD. The matching rule with the lowest --priority decides; a
matching deny rule always wins. Or give the whole rule with --json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rule := &r
			if jsonRule != "" {
				rule = &airlockv1.PolicyRule{}
				if err := protojson.Unmarshal([]byte(jsonRule), rule); err != nil {
					return usageErr(cmd, "--json is not a rule: %v", err)
				}
			}
			for _, a := range argGlobs {
				ptr, glob, ok := strings.Cut(a, "=")
				if !ok {
					return usageErr(cmd, "--arg %q must be /json/pointer=GLOB, e.g. /path=/tmp/**", a)
				}
				if rule.Args == nil {
					rule.Args = map[string]string{}
				}
				rule.Args[ptr] = glob
			}
			rule.Approvers = append(rule.Approvers, approvers...)
			rule.Notify = append(rule.Notify, notify...)
			rule.Redact = append(rule.Redact, redact...)
			rule.ToolWords = append(rule.ToolWords, words...)
			if err := decide.ValidateRule(rule); err != nil {
				return usageErr(cmd, "%v", err)
			}
			c, err := api.client(g)
			if err != nil {
				return err
			}
			var resp airlockv1.RulePutResponse
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/rules", protoBody{rule}, &resp); err != nil {
				return fmt.Errorf("add rule %s: %w", rule.GetId(), err)
			}
			stored := "stored"
			if resp.GetReplaced() {
				stored = "replaced the rule with that id" // the operator may have meant a new id
			}
			fmt.Printf("rule %s %s (bucket revision %d); every policy replica applies it within moments\n", resp.GetRule().GetId(), stored, resp.GetKvRevision())
			return nil
		},
	}
	f := add.Flags()
	f.StringVar(&r.Id, "id", "", "rule id ([A-Za-z0-9_-])")
	f.Int32Var(&r.Priority, "priority", 50, "lower is evaluated first (the built-in rules use 0-210; airlock policy rules list shows them)")
	f.StringVar(&r.Effect, "effect", "", "allow, ask or deny")
	f.StringVar(&r.Server, "server", "", "exact server name")
	f.StringVar(&r.Tool, "tool", "", "exact tool name")
	f.StringVar(&r.ToolPattern, "tool-pattern", "", "glob on the tool name, e.g. delete_*")
	f.StringVar(&r.Pattern, "pattern", "", "glob on server__tool, e.g. fs__*")
	f.StringVar(&r.Agent, "agent", "", "exact agent id")
	f.StringArrayVar(&argGlobs, "arg", nil, "argument constraint /json/pointer=GLOB (repeatable); an allow rule then allows only the arguments its --arg names")
	f.StringVar(&r.OtherArguments, "other-arguments", "", `"any": an allow rule with --arg lets arguments it does not name take any value`)
	f.StringArrayVar(&words, "tool-word", nil, "word of the tool name (repeatable)")
	f.StringVar(&r.Risk, "risk", "", "low, medium, high or critical")
	f.StringVar(&r.Reason, "reason", "", "why, shown to reviewers and agents")
	f.StringArrayVar(&approvers, "approver", nil, "principal or group:name allowed to decide (repeatable)")
	f.Uint32Var(&r.Quorum, "quorum", 0, "distinct approvals needed (default 1)")
	f.StringVar(&r.Timeout, "timeout", "", "how long a person has to decide, e.g. 10m (default 5m)")
	f.StringArrayVar(&notify, "notify", nil, "notification channel, e.g. console or slack:#ops (repeatable)")
	f.StringArrayVar(&redact, "redact", nil, "argument JSON pointer to mask in the audit copy (repeatable)")
	f.StringVar(&jsonRule, "json", "", "the whole rule as JSON instead of flags")

	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Delete a rule (a run-time rule, or one of the policy's data.json)",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := api.client(g)
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/rules/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete rule %s: %w", args[0], err)
			}
			fmt.Printf("rule %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, show, add, rm)
	return cmd
}

// printProtoJSON prints m as indented protojson with stable spacing (protojson
// varies its whitespace on purpose; scripts and people want the same text).
func printProtoJSON(w io.Writer, m proto.Message) error {
	data, err := pbjson.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode the answer as JSON: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return fmt.Errorf("indent the answer: %w", err)
	}
	buf.WriteByte('\n')
	// The same JSON, with what JSON leaves raw (bidi and zero-width
	// characters, tag characters) as \u escapes: a person may read it.
	_, err = w.Write(escape.JSON(buf.Bytes()))
	return err
}

// ruleRow is a rule and where it comes from (run-time or built-in).
type ruleRow struct {
	r      *airlockv1.PolicyRule
	source string
}

// ruleRows are every rule in priority order, run-time and built-in
// together, as the policy weighs them.
func ruleRows(resp *airlockv1.RulesListResponse) []ruleRow {
	var rows []ruleRow
	for _, r := range resp.GetRules() {
		rows = append(rows, ruleRow{r, "run-time"})
	}
	for _, r := range resp.GetBuiltinRules() {
		rows = append(rows, ruleRow{r, "built-in"})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].r.GetPriority() < rows[j].r.GetPriority() })
	return rows
}

// Widths of the rules table's free-text columns unless --wide: a rule that
// matches many tools must not push the table off a terminal.
const (
	ruleMatchWidth  = 48
	ruleReasonWidth = 60
)

// printRules prints every rule as a table, its MATCHES and REASON cut to
// a bounded width (with "..." and a pointer to the whole) unless wide.
func printRules(w io.Writer, resp *airlockv1.RulesListResponse, wide bool) {
	cut := func(s string, n int) string {
		if wide {
			return strings.Join(strings.Fields(s), " ")
		}
		return cliOneLine(s, n)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "PRIORITY\tRULE\tSOURCE\tMATCHES\tEFFECT\tRISK\tREASON")
	cutAny := false
	for _, x := range ruleRows(resp) {
		match, reason := cut(ruleMatch(x.r), ruleMatchWidth), cut(x.r.GetReason(), ruleReasonWidth)
		cutAny = cutAny || match != ruleMatch(x.r) || reason != strings.Join(strings.Fields(x.r.GetReason()), " ")
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", x.r.GetPriority(), x.r.GetId(), x.source, match, x.r.GetEffect(), dash(x.r.GetRisk()), reason)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "policy revision %s; a matching deny always wins, otherwise the lowest priority decides; %s\n", resp.GetPolicyRevision(), resp.GetFallback())
	if cutAny {
		fmt.Fprintln(w, "(text ending in ... was cut: `airlock policy rules show ID` shows one rule whole, --wide or --json all of them)")
	}
}

// ruleMatch says in a few words which calls a rule matches.
func ruleMatch(r *airlockv1.PolicyRule) string {
	var parts []string
	for _, p := range []struct{ label, v string }{{"", r.GetPattern()}, {"server ", r.GetServer()}, {"tool ", r.GetTool()}, {"tool ", r.GetToolPattern()}, {"agent ", r.GetAgent()}} {
		if p.v != "" && p.v != "*" {
			parts = append(parts, p.label+p.v)
		}
	}
	if len(r.GetToolWords()) > 0 {
		parts = append(parts, "words "+strings.Join(r.GetToolWords(), "|"))
	}
	keys := make([]string, 0, len(r.GetArgs()))
	for k := range r.GetArgs() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+r.GetArgs()[k])
	}
	if r.GetArgumentsMatch() != "" {
		parts = append(parts, "an argument matches "+cliOneLine(r.GetArgumentsMatch(), 24))
	}
	// Each named argument against its expression, in one sorted list.
	var exprs []string
	for k, re := range r.GetArgumentsNotMatching() {
		exprs = append(exprs, k+" does not match "+cliOneLine(re, 24))
	}
	for k, re := range r.GetArgumentsMatching() {
		exprs = append(exprs, k+" matches "+cliOneLine(re, 24))
	}
	sort.Strings(exprs)
	parts = append(parts, exprs...)
	var annotations []string
	for k, b := range r.GetAnnotations() {
		annotations = append(annotations, fmt.Sprintf("annotation %s=%v", k, b))
	}
	sort.Strings(annotations)
	parts = append(parts, annotations...)
	if r.GetOtherArguments() != "" {
		parts = append(parts, "other arguments "+r.GetOtherArguments())
	}
	if len(parts) == 0 {
		return "every call"
	}
	return strings.Join(parts, ", ")
}
