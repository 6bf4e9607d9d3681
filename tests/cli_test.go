package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// cliRun is one run of the airlock command.
type cliRun struct {
	Stdout, Stderr string
	Code           int
}

// cli runs the airlock binary against dev: as its agents, its operator and
// its admin's API token, the console reachable at dev's address.
func cli(t *testing.T, dev *devProcess, args ...string) cliRun {
	t.Helper()
	return cliIn(t, "", append(os.Environ(), "AIRLOCK_DEV_DATA_DIR="+dev.DataDir, "AIRLOCK_NATS_URL="+dev.NATSURL,
		"AIRLOCK_API="+dev.HTTPURL, "AIRLOCK_HTTP_PUBLIC_URL="+dev.HTTPURL), args...)
}

// cliIn runs the airlock binary in dir ("": the test's) with env.
func cliIn(t *testing.T, dir string, env []string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(airlockBinary(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("airlock %s: %v", strings.Join(args, " "), err)
	}
	return cliRun{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// `airlock call` links to the console where the running dev listens (its
// --http address, here a random port), with no public URL configured: not
// to the default 127.0.0.1:8080, where nothing (or someone else) answers.
func TestCallLinksToTheConsoleWhereDevListens(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	dev.Agent(t, "bot")
	cmd := exec.Command(airlockBinary(t), "call", "--agent", "bot", "--tool", "demo__write_file", "--args", `{"path":"a.txt","content":"one"}`,
		"--call-id", "link1", "--wait", "2s")
	cmd.Env = append(os.Environ(), "AIRLOCK_DEV_DATA_DIR="+dev.DataDir, "AIRLOCK_NATS_URL="+dev.NATSURL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // exit 3: nobody decided within --wait
	if want := dev.HTTPURL + "/calls/bot/link1"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("airlock call should link to %s; it said:\n%s", want, stderr.String())
	}
}

// A reviewer command run on dev's data dir sends its admin token to the
// console where that dev listens (its console.url, here a random port), with
// no --api or AIRLOCK_API: not to the default 127.0.0.1:8080, where another
// person's airlock may listen and collect it.
func TestReviewerCommandsReachTheConsoleWhereDevListens(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	for _, args := range [][]string{{"approvals", "list"}, {"policy", "shadow", "status"}} {
		cmd := exec.Command(airlockBinary(t), args...)
		cmd.Env = append(os.Environ(), "AIRLOCK_DEV_DATA_DIR="+dev.DataDir, "AIRLOCK_NATS_URL="+dev.NATSURL, "AIRLOCK_API=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("airlock %s on dev's data dir: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestTheHintsOfADevOnAnotherDataDirWorkAsPrinted: a second `airlock dev`
// (its own --data, --nats-port and --http) prints hints that act on it when
// pasted as they are, in a shell with no AIRLOCK_* variables and no
// .airlock: its banner's `approvals list` and `agents add`, and the
// `call` that `agents add` suggests. They acted on ./.airlock.
func TestTheHintsOfADevOnAnotherDataDirWorkAsPrinted(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	elsewhere := t.TempDir() // the shell's directory: no .airlock there
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			env = append(env, kv)
		}
	}
	// paste runs a printed `airlock ...` line as a shell reads it.
	paste := func(line string) (string, error) {
		t.Helper()
		cmd := exec.Command("sh", "-c", `exec "$BIN"`+strings.TrimPrefix(line, "airlock"))
		cmd.Dir, cmd.Env = elsewhere, append(env, "BIN="+airlockBinary(t))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	hint := func(out, re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no hint matching %s in:\n%s", re, out)
		}
		return m[1]
	}
	for _, tc := range []struct {
		name, re, want string
		run            func(line string) string // what the printed command is run as
	}{
		{"approvals_list", `\((airlock approvals list[^)]*)\)`, "airlock approvals list --data " + dev.DataDir, nil},
		{"agents_add", `add an agent: (airlock agents add NAME[^ ]*(?: --data \S+)?)`, "airlock agents add NAME --data " + dev.DataDir,
			func(line string) string { return strings.Replace(line, "NAME", "zed", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := hint(dev.Output(), tc.re)
			if line != tc.want {
				t.Fatalf("dev on %s prints %q, want %q", dev.DataDir, line, tc.want)
			}
			if tc.run != nil {
				line = tc.run(line)
			}
			out, err := paste(line)
			if err != nil {
				t.Fatalf("%s, as printed: %v\n%s", line, err, out)
			}
			if tc.name != "agents_add" {
				return
			}
			try := hint(out, `try it: +(airlock call .*)`)
			if want := "airlock call --agent zed --data " + dev.DataDir + " --tool demo__echo"; !strings.HasPrefix(try, want) {
				t.Fatalf("agents add suggests %q, want it to start %q", try, want)
			}
			if out, err := paste(try); err != nil || !strings.Contains(out, `"status": "completed"`) {
				t.Fatalf("%s, as printed: %v, want the call completed\n%s", try, err, out)
			}
		})
	}
	// An operator's command finds the dev's NATS (another port) by --data too.
	if out, err := paste("airlock policy rules list --data " + dev.DataDir); err != nil {
		t.Fatalf("policy rules list --data %s: %v\n%s", dev.DataDir, err, out)
	}
}

// An agent's on_behalf_of is its claim until airlock verifies it: `airlock
// call --agent evil --on-behalf-of admin` must not read as fact. The
// console's call page and `airlock approvals show` say the claim is not
// verified, the named person still may not decide (separation of duties),
// and the page tells other reviewers why.
func TestAnUnverifiedOnBehalfOfIsShownAsTheAgentsClaim(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	dev.Agent(t, "evil")
	token, err := os.ReadFile(filepath.Join(dev.DataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if r := cli(t, dev, "call", "--agent", "evil", "--on-behalf-of", "admin", "--tool", "demo__write_file",
		"--args", `{"path":"a.txt","content":"x"}`, "--call-id", "obo1", "--wait", "2s"); r.Code != exitStillWaiting {
		t.Fatalf("airlock call: exit %d\n%s", r.Code, r.Stderr)
	}
	show := cli(t, dev, "approvals", "show", "evil/obo1", "--token-file", filepath.Join(dev.DataDir, "admin.token"))
	if show.Code != 0 || !strings.Contains(show.Stdout, "evil on behalf of admin (claimed by the agent, not verified)") {
		t.Errorf("approvals show must mark the claim as unverified: exit %d\n%s%s", show.Code, show.Stdout, show.Stderr)
	}
	status, page := bearerGet(t, dev.HTTPURL+"/calls/evil/obo1", strings.TrimSpace(string(token)))
	for _, want := range []string{"on behalf of admin <em id=\"on-behalf-of-unverified\">(claimed by the agent, not verified)</em>",
		"admin cannot decide this call: the agent says it acts for admin (not verified)",
		"the agent says it acts for you (claimed by the agent, not verified)"} {
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("the call page (status %d) does not say %q", status, want)
		}
	}
}

// TestTheCLIDoesWhatAReviewerNeeds drives `airlock call`, `airlock await`,
// `airlock approvals` and `airlock policy` against `airlock dev`, one case
// per thing a reviewer or an agent's developer ran into.
func TestTheCLIDoesWhatAReviewerNeeds(t *testing.T) {
	t.Parallel() // it mostly waits out the CLI's --wait
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	dev.Agent(t, "bot")
	tokenFile := filepath.Join(dev.DataDir, "admin.token")
	call := func(id string, rev int, args, wait string) []string {
		a := []string{"call", "--agent", "bot", "--tool", "demo__write_file", "--args", args, "--call-id", id, "--wait", wait}
		if rev > 0 {
			a = append(a, "--revision", fmt.Sprint(rev))
		}
		return a
	}
	approvals := func(args ...string) []string {
		return append(append([]string{"approvals"}, args...), "--token-file", tokenFile)
	}
	type step = cliStep
	steps := []step{
		{"call_says_what_it_waits_for_and_where_to_decide_then_exit_3_when_the_wait_runs_out",
			call("c1", 0, `{"path":"a.txt","content":"one"}`, "3s"), exitStillWaiting, nil,
			[]string{"waiting for a person: ", "group:reviewers may decide before", dev.HTTPURL + "/calls/bot/c1", "airlock approvals show bot/c1", "no outcome for call bot/c1 within 3s", "airlock await bot/c1"}, nil},
		{"approvals_list_of_a_state_that_is_none_is_a_usage_error", approvals("list", "--state", "bogus"), 2, nil,
			[]string{`state "bogus" is not one of pending`}, nil},
		{"approvals_show_of_no_such_call_is_a_usage_error", approvals("show", "bot/no-such-call"), 2, nil,
			[]string{"no approval for call bot/no-such-call"}, nil},
		{"approvals_changes_with_the_text_as_an_argument_points_at_feedback",
			approvals("changes", "bot/c1", "use b.txt"), 2, nil, []string{`give the text with --feedback "use b.txt"`}, nil},
		{"approvals_changes_with_feedback_sends_it", approvals("changes", "bot/c1", "--feedback", "use b.txt"), 0, []string{"changes requested by admin"}, nil, nil},
		{"call_submits_revision_2_after_changes", call("c1", 2, `{"path":"b.txt","content":"two"}`, "3s"), exitStillWaiting, nil,
			[]string{"call bot/c1 revision 2 submitted", dev.HTTPURL + "/calls/bot/c1?rev=2"}, nil},
		{"approvals_show_lists_revision_2_who_may_decide_it_and_until_when", approvals("show", "bot/c1"), 0,
			[]string{"call      bot/c1 (revision 2)", `"path": "b.txt"`, "approvers group:reviewers", "deadline  20"}, nil, nil},
		{"approving_a_call_of_two_revisions_without_naming_one_names_the_flag_and_exits_2", approvals("approve", "bot/c1"), 2, nil,
			[]string{"name the revision you reviewed with `--revision N`", "the newest is revision 2"}, nil},
		{"approvals_edit_approves_revision_2_with_edited_arguments", approvals("edit", "bot/c1", "--revision", "2", "--args", `{"path":"c.txt","content":"edited"}`), 0,
			[]string{"approved by admin with edited arguments"}, nil, nil},
		{"approvals_show_after_an_edit_shows_what_runs", approvals("show", "bot/c1"), 0,
			[]string{"arguments as the agent asked (not run)", `"path": "b.txt"`, "arguments as edited by a reviewer (these run)", `"path": "c.txt"`}, nil, nil},
		{"await_follows_the_call_to_its_outcome_and_names_the_person_who_approved", []string{"await", "bot/c1"}, 0,
			[]string{`"status": "completed"`, `"decided_by": "admin"`, `"arguments_edited": true`, `"path": "c.txt"`},
			[]string{"approved by admin with EDITED arguments", `{"content":"edited","path":"c.txt"}`}, nil},
		{"a_second_approval_changes_nothing_says_so_once_and_exits_1", approvals("approve", "bot/c1", "--revision", "2"), 1, []string{"nothing changed"}, nil, nil},
		{"call_with_arguments_that_are_not_json_exits_2", []string{"call", "--agent", "bot", "--tool", "demo__echo", "--args", "notjson"}, 2, nil, []string{"--args must be a JSON object"}, nil},
		{"a_mistyped_flag_exits_2_and_names_the_flag_meant", []string{"call", "--agent", "bot", "--tool", "demo__echo", "--wiat", "1s"}, 2, nil, []string{"unknown flag: --wiat: did you mean --wait?"}, nil},
		{"help_names_the_nats_flag_plainly", []string{"approvals", "list", "--help"}, 0, []string{"--nats string", "nats://127.0.0.1:4222 for airlock dev"}, nil, []string{"--nats airlock dev"}},
		{"policy_replay_with_a_missing_directory_says_so", []string{"policy", "replay", "--policy", "./no-such-candidate"}, 2, nil,
			[]string{"the policy directory ./no-such-candidate does not exist", "make one with `cp -r policies ./no-such-candidate`"}, nil},
		{"policy_rules_add_goes_through_the_rest_api", []string{"policy", "rules", "add", "--id", "cli-deny-secrets", "--server", "demo", "--tool", "write_file", "--arg", "/path=secret/**",
			"--effect", "deny", "--priority", "1", "--reason", "secrets stay put", "--token-file", tokenFile}, 0, []string{"rule cli-deny-secrets stored"}, nil, nil},
		{"policy_rules_add_of_an_id_in_force_says_it_replaced_that_rule", []string{"policy", "rules", "add", "--id", "cli-deny-secrets", "--server", "demo", "--tool", "write_file", "--arg", "/path=secret/**",
			"--effect", "deny", "--priority", "1", "--reason", "secrets stay put", "--token-file", tokenFile}, 0, []string{"rule cli-deny-secrets replaced the rule with that id"}, nil, nil},
		{"policy_eval_uses_the_run_time_rules_by_default", []string{"policy", "eval", "--call", writeCall(t, `{"agent_id":"bot","tool":"demo__write_file","arguments":{"path":"secret/x"}}`)}, 0,
			[]string{`"rule_id": "cli-deny-secrets"`}, []string{"decided by the running policy service"}, nil},
		{"policy_eval_of_a_candidate_dir_includes_the_run_time_rules", []string{"policy", "eval", "--dir", "../policies", "--call", writeCall(t, `{"agent_id":"bot","tool":"demo__write_file","arguments":{"path":"secret/x"}}`)}, 0,
			[]string{`"rule_id": "cli-deny-secrets"`}, []string{"with the 1 run-time rule(s) of the running airlock"}, nil},
		{"policy_rules_list_shows_the_built_in_rules_too", []string{"policy", "rules", "list"}, 0,
			[]string{"cli-deny-secrets", "run-time", "write", "built-in", "fs-delete-etc", "no rule matches: a reviewer decides"}, nil, nil},
		{"a_call_to_remember_waits_for_a_person", call("c2", 0, `{"path":"r.txt","content":"remember me"}`, "3s"), exitStillWaiting, nil, nil, nil},
		{"approvals_remember_of_a_pending_call_creates_the_grant_and_approves_the_call", approvals("remember", "bot/c2", "--exact"), 0,
			[]string{"standing grant grant_", "bot/c2: approved by admin"}, nil, nil},
		{"the_remembered_call_runs", []string{"await", "bot/c2"}, 0, []string{`"status": "completed"`, `"decided_by": "admin"`}, nil, nil},
		{"the_same_call_again_runs_by_the_grant_without_asking", call("c3", 0, `{"path":"r.txt","content":"remember me"}`, "30s"), 0,
			[]string{`"status": "completed"`}, nil, []string{"waiting for a person"}},
		{"audit_decided_by_human_lists_decisions_not_the_rule_change_a_person_made", []string{"audit", "query", "--decided-by", "human"}, 0,
			[]string{"approved", "human:admin"}, nil, []string{"policy_changed"}},
		{"audit_query_says_how_many_more_match_and_how_to_page", []string{"audit", "query", "--limit", "2"}, 0,
			[]string{"2 event(s) from stream", "more event(s) match: add --after "}, nil, nil},
		{"audit_verify_without_clickhouse_says_what_it_needs", []string{"audit", "verify"}, 1, nil,
			[]string{"no ClickHouse is configured", "--clickhouse-local", "--clickhouse DSN", "AIRLOCK_CLICKHOUSE_DSN"}, nil},
		{"call_of_an_allowed_tool_names_the_policy_as_decider", []string{"call", "--agent", "bot", "--tool", "demo__echo", "--args", `{"text":"hi"}`, "--wait", "30s"}, 0,
			[]string{`"status": "completed"`, `"decided_by": "policy"`}, nil, nil},
	}
	runCLISteps(t, dev, steps)
}

// cliStep is one run of the airlock command and what it must print.
type cliStep struct {
	name     string
	args     []string
	wantCode int
	stdout   []string // substrings
	stderr   []string
	notOut   []string // in neither stdout nor stderr
}

// runCLISteps runs steps in order against dev, each a subtest; it stops at
// the first that fails, since later steps build on earlier ones.
func runCLISteps(t *testing.T, dev *devProcess, steps []cliStep) {
	t.Helper()
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			r := cli(t, dev, s.args...)
			if r.Code != s.wantCode {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, s.wantCode, r.Stdout, r.Stderr)
			}
			for _, w := range s.stdout {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
				}
			}
			for _, w := range s.stderr {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.Stderr)
				}
			}
			for _, w := range s.notOut {
				if strings.Contains(r.Stdout+r.Stderr, w) {
					t.Errorf("the output holds %q", w)
				}
			}
			if n := strings.Count(r.Stdout, "nothing changed"); n > 1 {
				t.Errorf("says %q %d times", "nothing changed", n)
			}
		})
		if !ok {
			break // later steps build on this one
		}
	}
}

// TestAwaitAndCallSayWhatIsTrueOfTheCall: what a newcomer following the
// tour ran into. `airlock await` of a call that had already ended says so,
// in the past tense, with its outcome and when (not "the executor runs it
// now"), as `airlock call` does given the id of a call that ended (it
// used to resubmit and narrate the old end as news); of a call nobody made,
// that no such call is known and what to check, at once (not "it may still
// be decided" after the whole --wait).
// A call to a tool the registry does not have still waits for a person (no
// rule matches → ask, scenario H), but `call` and `await` say while it
// waits that it cannot run even approved, and what to do.
func TestAwaitAndCallSayWhatIsTrueOfTheCall(t *testing.T) {
	t.Parallel() // it mostly waits out the CLI's --wait
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	dev.Agent(t, "bot")
	call := func(tool, id, args, wait string) []string {
		return []string{"call", "--agent", "bot", "--tool", tool, "--args", args, "--call-id", id, "--wait", wait}
	}
	const noTool = "the tool registry has no tool demo__nope (server demo has echo, read_file, write_file): even approved, this call cannot run"
	runCLISteps(t, dev, []cliStep{
		{"an_allowed_call_completes", call("demo__echo", "e1", `{"text":"hi"}`, "30s"), 0, []string{`"status": "completed"`}, nil, nil},
		{"await_of_a_call_that_completed_says_it_already_ended_how_and_when", []string{"await", "bot/e1", "--wait", "5s"}, 0,
			[]string{`"status": "completed"`}, []string{"call bot/e1 revision 1 already ended at ", " ago): completed: the tool ran; it was allowed by the policy"},
			[]string{"the executor runs it now", "following call"}},
		{"call_with_the_id_of_a_call_that_ended_says_so_and_submits_nothing", call("demo__echo", "e1", `{"text":"other"}`, "5s"), 0,
			[]string{`"text": "hi"`}, []string{"call bot/e1 revision 1 already ended at ", "nothing was submitted: a call id names one call", "Leave out --call-id"},
			[]string{"submitted as agent", "the executor runs it now", `"text": "other"`}},
		{"a_call_waits_for_a_person", call("demo__write_file", "r1", `{"path":"r.txt","content":"x"}`, "2s"), exitStillWaiting, nil,
			[]string{"waiting for a person"}, []string{"tool registry"}},
		{"a_person_rejects_it", []string{"approvals", "reject", "bot/r1", "--reason", "not today", "--token-file", filepath.Join(dev.DataDir, "admin.token")}, 0, nil, nil, nil},
		{"await_of_a_rejected_call_says_who_rejected_it_why_and_when", []string{"await", "bot/r1", "--wait", "5s"}, 1,
			[]string{`"status": "rejected"`}, []string{"call bot/r1 revision 1 already ended at ", "rejected by admin: not today"}, []string{"waiting for a person"}},
		{"await_of_a_call_nobody_made_says_no_such_call_is_known_and_what_to_check", []string{"await", "bot/no-such-call", "--wait", "60s"}, 2, nil,
			[]string{"no call bot/no-such-call is known", "Check the call id and the agent", "airlock approvals list"}, []string{"may still be decided"}},
		{"await_of_a_call_of_a_mistyped_agent_says_no_such_call_is_known_and_what_to_check", []string{"await", "nobody/call_x", "--wait", "60s"}, 2, nil,
			[]string{"no call nobody/call_x is known", "has no agent nobody", "its agents are bot", "Check the agent and the call id", "airlock approvals list --data " + dev.DataDir},
			[]string{"agents add nobody"}},
		{"a_call_to_a_tool_the_registry_lacks_says_so_while_it_waits", call("demo__nope", "u1", `{}`, "2s"), exitStillWaiting, nil,
			[]string{"waiting for a person: no rule matches demo__nope", noTool, "cancel it (airlock approvals cancel bot/u1 --reason \"no such tool\" --data " + dev.DataDir + ")", "executor.tools_file"}, nil},
		{"await_of_that_call_says_so_too", []string{"await", "bot/u1", "--wait", "1s"}, exitStillWaiting, nil, []string{noTool}, nil},
		{"a_call_is_sent_back", call("demo__write_file", "s1", `{"path":"s.txt","content":"x"}`, "2s"), exitStillWaiting, nil, nil, nil},
		{"a_person_asks_for_changes", []string{"approvals", "changes", "bot/s1", "--feedback", "use t.txt", "--token-file", filepath.Join(dev.DataDir, "admin.token")}, 0, nil, nil, nil},
		{"call_of_the_revision_sent_back_says_to_submit_the_next", append(call("demo__write_file", "s1", `{"path":"s.txt","content":"x"}`, "2s"), "--revision", "1"), 1, nil,
			[]string{"nothing was submitted", "a reviewer asked for changes: use t.txt", "airlock call --agent bot --data " + dev.DataDir + " --call-id s1 --revision 2"}, nil},
		{"revision_2_waits_for_a_person_and_says_to_name_it_when_deciding", append(call("demo__write_file", "s1", `{"path":"t.txt","content":"x"}`, "2s"), "--revision", "2"), exitStillWaiting, nil,
			[]string{"(then approve, reject or changes with --revision 2)"}, nil},
		{"a_person_cancels_revision_2", []string{"approvals", "cancel", "bot/s1", "--reason", "not needed", "--token-file", filepath.Join(dev.DataDir, "admin.token")}, 0, nil, nil, nil},
		{"call_of_a_canceled_revision_does_not_say_to_submit_another", append(call("demo__write_file", "s1", `{"path":"t.txt","content":"x"}`, "2s"), "--revision", "2"), 1, nil,
			[]string{"canceled by admin: not needed", "nothing was submitted", "Leave out --call-id for a new call"}, []string{"--revision 3", "asked for changes"}},
	})
}

func writeCall(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "call.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCtrlCOnTaskUpIsNotAFailure: `go tool task up` runs the built binary
// (`go run` exits 1 on Ctrl-C whatever the program did), and the binary
// exits 0 when interrupted.
func TestCtrlCOnTaskUpIsNotAFailure(t *testing.T) {
	raw, err := os.ReadFile("../Taskfile.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tasks map[string]struct {
			Cmds []any `yaml:"cmds"`
		} `yaml:"tasks"`
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	for _, c := range tf.Tasks["up"].Cmds {
		if s, ok := c.(string); ok && regexp.MustCompile(`go run|\{\{\.AIRLOCK\}\}`).MatchString(s) {
			t.Fatalf("task up runs airlock through go run (%q): Ctrl-C would end it with exit status 1", s)
		}
	}
	dev := startDev(t, t.TempDir(), 0, "")
	dev.Interrupt(30 * time.Second)
	if !strings.Contains(dev.Output(), "airlock dev stopped") {
		t.Fatalf("no clean stop:\n%s", dev.Output())
	}
}

const exitStillWaiting = 3

// `airlock agents add` says when no `airlock dev` runs with that data dir,
// instead of leaving a first call to fail with "Authorization Violation".
func TestAgentsAddSaysWhenDevIsNotRunning(t *testing.T) {
	out, err := runAirlock(t, "agents", "add", "later", "--data", t.TempDir())
	if err != nil || !strings.Contains(out, "airlock dev is not running") {
		t.Fatalf("agents add without a running dev: %v\n%s", err, out)
	}
}

// Every operator command that reads airlock's NATS takes --data, as call,
// await and approvals do, so that a dev whose data dir is elsewhere is
// named the same way everywhere (its NATS URL too: dev writes where it
// listens there). Run away from it without --data, a command says that it
// has no credentials and how to name the dev, not "is the server running?"
// of a server that answered.
func TestOperatorCommandsFindADevByItsDataDir(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	away := t.TempDir()
	run := func(args ...string) cliRun { return cliIn(t, away, os.Environ(), args...) }
	for _, tc := range []struct {
		args     []string
		answered string // what the command says once it reached the dev
	}{
		{[]string{"audit", "query"}, "event(s) from stream"},
		{[]string{"audit", "stats"}, "time to decide"},
		{[]string{"audit", "export", "--format", "jsonl"}, "exported 0 event(s) from stream"},
		{[]string{"undo", "bot/none"}, "the audit trail holds no call bot/none"},
		{[]string{"policy", "suggest"}, "decided call(s) read from the stream"},
	} {
		name := strings.Join(tc.args, " ")
		r := run(append(tc.args, "--data", dev.DataDir)...)
		if strings.Contains(r.Stderr, "connect to NATS") || !strings.Contains(r.Stdout+r.Stderr, tc.answered) {
			t.Errorf("%s --data %s: exit %d, want it to reach the dev and say %q\n%s%s", name, dev.DataDir, r.Code, tc.answered, r.Stdout, r.Stderr)
		}
		r = run(append(tc.args, "--nats", dev.NATSURL)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "name its data dir with --data DIR") || strings.Contains(r.Stderr, "is the server running") {
			t.Errorf("%s away from the dev without --data: exit %d, want it to say how to name the dev's data dir\n%s%s", name, r.Code, r.Stdout, r.Stderr)
		}
	}
}

// A dev started again on another NATS port (the first choice taken, or
// --nats-port changed) left each agent's credential naming the port of the
// start that wrote it: `airlock call --data` as that agent dialed the old
// port, reaching nothing ("no servers available") or another airlock
// listening there ("Authorization Violation"). A start points them at
// where its NATS listens.
func TestAgentCredentialsFollowADevStartedOnAnotherPort(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := startDev(t, dir, 0, "")
	first.Interrupt(30 * time.Second)
	port := freePort(t)
	for port == first.natsPort {
		port = freePort(t)
	}
	second := startDev(t, dir, port, "")
	r := cliIn(t, t.TempDir(), os.Environ(), "call", "--data", dir, "--agent", "bot", "--tool", "demo__echo", "--args", `{"text":"hi"}`, "--wait", "30s")
	if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "completed") {
		t.Fatalf("airlock call --data as bot after dev moved from %s to %s: exit %d\n%s%s", first.NATSURL, second.NATSURL, r.Code, r.Stdout, r.Stderr)
	}
	cred, err := natsauth.ReadCredential(second.Creds("bot"))
	if err != nil || cred.URL != second.NATSURL {
		t.Fatalf("bot's credential names %q (%v), want %s", cred.URL, err, second.NATSURL)
	}
}

// `--http :PORT` reads like a port, and opens the console to every
// network interface: dev says so, and its links name this machine's
// loopback, not "http://[::]:PORT", which no browser opens (a newcomer's
// walkthrough, helper-182).
func TestADevListeningOnEveryInterfaceSaysSo(t *testing.T) {
	port := freePort(t)
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, fmt.Sprintf(":%d", port))
	dev.WaitForOutput("the console listens on every network interface", 30*time.Second)
	raw, err := os.ReadFile(filepath.Join(dev.DataDir, "console.url"))
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); err != nil || strings.TrimSpace(string(raw)) != want {
		t.Fatalf("console.url holds %q (%v), want %s", raw, err, want)
	}
}
