// The tests here are a newcomer's first hour: help that can be read, mistakes
// (a typo, a second dev, Ctrl-C while starting, no server up) answered with a
// sentence that says what to do.

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/freeport"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// TestAWordThatNamesNoCommandIsAUsageError: a mistyped command of a group is
// exit status 2 with a sentence naming the group's commands (and the likely
// one), never the group's help with exit status 0.
func TestAWordThatNamesNoCommandIsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"a_typo_of_a_group_command_names_the_command_meant", []string{"approvals", "lst"},
			[]string{`airlock approvals has no command "lst" (did you mean list?)`, "approve, cancel, changes,", "see `airlock approvals --help`"}},
		{"a_nested_group_says_which_group_has_no_such_command", []string{"policy", "rule", "list"},
			[]string{`airlock policy has no command "rule" (did you mean rules?)`, "see `airlock policy --help`"}},
		{"an_unknown_top_command_is_a_usage_error_too", []string{"xyzzy"},
			[]string{`airlock has no command "xyzzy": its commands are agents, approvals,`, "see `airlock --help`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(context.Background(), t, tc.args...)
			var usage usageError
			if !errors.As(err, &usage) {
				t.Fatalf("err = %v (stdout %q), want a usage error (exit status 2)", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q: %v", w, err)
				}
			}
			if out != "" {
				t.Errorf("printed help besides the error: %q", out)
			}
		})
	}
}

// TestAGroupAloneShowsItsHelp: a group named without a command still shows
// its help (exit status 0), listing its commands but no usage line of its own,
// while its commands keep theirs.
func TestAGroupAloneShowsItsHelp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant string
	}{
		{"a_group_lists_its_commands", []string{"approvals"}, []string{"airlock approvals [command]", "Available Commands:"}, "airlock approvals [flags]"},
		{"help_after_a_group_is_its_help", []string{"policy", "help"}, []string{"airlock policy [command]", "Available Commands:"}, "has no command"},
		{"the_top_lists_its_commands", []string{}, []string{"airlock [command]"}, "airlock [flags]"},
		{"a_command_of_a_group_keeps_its_usage_line", []string{"approvals", "approve", "--help"}, []string{"airlock approvals approve AGENT/CALL_ID [flags]"}, ""},
		{"the_hook_keeps_its_usage_line_beside_its_commands", []string{"hook", "--help"}, []string{"airlock hook AGENT [flags]", "airlock hook [command]"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(context.Background(), t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the help lacks %q:\n%s", w, out)
				}
			}
			if tc.notWant != "" && strings.Contains(out, tc.notWant) {
				t.Errorf("the help has %q:\n%s", tc.notWant, out)
			}
		})
	}
}

// TestHookHelpShowsTheHelp: `airlock hook --help`, which the hook's usage
// line points to, shows the hook's help, not that usage line again.
func TestHookHelpShowsTheHelp(t *testing.T) {
	for _, flag := range []string{"--help", "-h"} {
		out, err := runCLI(context.Background(), t, "hook", flag)
		if err != nil {
			t.Fatalf("hook %s: %v", flag, err)
		}
		if !strings.Contains(out, "Reads a coding agent's hook payload on stdin") || !strings.Contains(out, "install") {
			t.Errorf("hook %s printed no help:\n%s", flag, out)
		}
	}
}

// TestEveryFlagsValueNameIsOneWord: cobra takes the first `quoted` words of a
// flag's usage as the name of its value, so a command quoted in a usage
// sentence would be shown as "--data airlock dev". Every flag of every
// command shows a one-word value name.
func TestEveryFlagsValueNameIsOneWord(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s shows its value as %q: quote only the value's name in its usage, or nothing", c.CommandPath(), f.Name, name)
			}
		}
		// A group's persistent flags (approvals' --api) are in its
		// subcommands' help too, and not in Flags() until it runs.
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestASecondDevOnTheSameDataDirRefusesAtOnce: while an `airlock dev` holds
// its data dir, another on the same dir says so and what to do, and leaves
// the running one's files alone (it used to start a second NATS on the same
// store, and remove the first's nats.url when it stopped).
func TestASecondDevOnTheSameDataDirRefusesAtOnce(t *testing.T) {
	data := t.TempDir()
	dev := natsauth.Dev{DataDir: data}
	unlock, err := lockDataDir(dev, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := os.WriteFile(dev.URLFile(), []byte("nats://127.0.0.1:4222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	// Were the dir not refused, dev would run until this context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = runCLI(ctx, t, "dev", "--data", data, "--nats-port", strconv.Itoa(port), "--http", "127.0.0.1:0")
	if err == nil {
		t.Fatal("a second dev ran on a data dir another holds")
	}
	for _, want := range []string{fmt.Sprintf("another airlock dev (pid %d) already runs with the data dir %s", os.Getpid(), data), "stop it first", "--data DIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if b, err := os.ReadFile(dev.URLFile()); err != nil || string(b) != "nats://127.0.0.1:4222\n" {
		t.Errorf("the running dev's nats.url is now %q, %v", b, err)
	}
}

// TestCtrlCWhileDevStartsIsAStop: interrupted before it is up (its context
// canceled), `airlock dev` says it stopped and exits 0, as Ctrl-C does once
// it runs, never with an error chain ending in "context canceled".
func TestCtrlCWhileDevStartsIsAStop(t *testing.T) {
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := runCLI(ctx, t, "dev", "--data", t.TempDir(), "--nats-port", strconv.Itoa(port), "--http", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("interrupted while starting: %v", err)
	}
	if !strings.Contains(out, "airlock dev stopped before it had started (Ctrl-C)") {
		t.Fatalf("no word of the stop:\n%s", out)
	}
}

// TestTheCommandsOnStoredRowsSayTheyNeedClickHouse: verify and drop-before
// work on the rows stored in ClickHouse; their --clickhouse help does not
// promise the stream instead, and each says without one what it cannot do.
func TestTheCommandsOnStoredRowsSayTheyNeedClickHouse(t *testing.T) {
	t.Setenv("AIRLOCK_DEV_DATA_DIR", t.TempDir()) // no `airlock dev --clickhouse-local` there
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", "")
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		notWant string
	}{
		{"verify_has_no_stored_copy_to_check", []string{"audit", "verify"}, "and there is no stored copy to check", "nothing stored to drop"},
		{"drop_before_has_nothing_stored_to_drop", []string{"audit", "drop-before", "2026-01"}, "and there is nothing stored to drop", "no stored copy to check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(context.Background(), t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), "no ClickHouse is configured") || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.notWant) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			cmd, _, err := newRootCmd().Find(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if u := cmd.Flags().Lookup("clickhouse").Usage; !strings.Contains(u, "this command needs one") || strings.Contains(u, "events stream") {
				t.Errorf("--clickhouse says %q", u)
			}
		})
	}
}

// TestReviewerCommandsSayWhatToDoWhenNothingAnswers: with no airlock at the
// API's address, the sentence says so and how to start it or point there,
// not a chain of Go's dial errors.
func TestReviewerCommandsSayWhatToDoWhenNothingAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	token := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(token, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"approvals", "list", "--api", api, "--token-file", token},
		{"policy", "shadow", "divergences", "--api", api, "--token-file", token},
	} {
		_, err := runCLI(context.Background(), t, args...)
		want := "nothing answers at " + api + " (connection refused): start airlock (`go tool task up`, or `airlock dev`), or name where its console listens with --api or AIRLOCK_API"
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "dial tcp") {
			t.Errorf("%s: err = %v, want it to say %q", strings.Join(args[:2], " "), err, want)
		}
	}
}

// TestPolicyTestOfAMissingDirectorySaysSo: `airlock policy test DIR` with no
// such directory, or a file, says what DIR must be (as eval, replay and
// shadow do), not OPA's "stat .: no such file or directory".
func TestPolicyTestOfAMissingDirectorySaysSo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "candidate")
	for _, tc := range []struct{ dir, want string }{
		{missing, "the policy directory " + missing + " does not exist: give a directory with the policy's *.rego files and data.json"},
		{file, file + " is a file, not a policy directory"},
	} {
		_, err := runCLI(context.Background(), t, "policy", "test", tc.dir)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "stat .") {
			t.Errorf("policy test %s: err = %v, want a usage error saying %q", tc.dir, err, tc.want)
		}
	}
}

// TestDevSaysWhatTheHTTPAddressMustBe: an --http that is no address, or one
// something listens on, is a sentence saying what to give, at once.
func TestDevSaysWhatTheHTTPAddressMustBe(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct{ name, addr, want string }{
		{"a_bare_port_is_no_address", "8080", `the HTTP address "8080" (--http, http.addr) is not an address to listen on: give HOST:PORT, such as 127.0.0.1:8080`},
		{"a_taken_address_says_something_listens_there", busy.Addr().String(), "something already listens on " + busy.Addr().String() + " (another airlock?): stop it, or pick another address with --http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, err := freeport.Pick()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = runCLI(ctx, t, "dev", "--data", t.TempDir(), "--nats-port", strconv.Itoa(port), "--http", tc.addr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestDevSaysHowToSignIn: the console line says the admin's password once,
// then where it was and what to do when it is lost, and for an admin of
// console.users that the configuration gives it (not "printed at the first
// start", which it never was).
func TestDevSaysHowToSignIn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		admin console.FirstAdmin
		want  []string
	}{
		{"the_first_start_shows_the_password_once", console.FirstAdmin{User: "admin", Password: "pw123"}, []string{"sign in as admin with password pw123", "shown only now: write it down"}},
		{"a_later_start_says_how_to_do_without_a_lost_password", console.FirstAdmin{User: "admin"}, []string{"password printed at the first start", "lost it? configure an admin of your own in console.users", "airlock users hash-password", "go tool task up -- --config FILE"}},
		{"a_configured_admin_signs_in_with_its_configured_password", console.FirstAdmin{User: "dana", Configured: true}, []string{"sign in as dana with the password console.users gives it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := signInText(tc.admin)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			if tc.admin.Configured && strings.Contains(got, "first start") {
				t.Errorf("%q points a configured admin at the first start", got)
			}
		})
	}
}

// TestReviewerCommandsSayWhereTheTokenIsLookedFor: run away from dev's data
// dir, a reviewer command names where it looked for the admin token and the
// two ways to go on.
func TestReviewerCommandsSayWhereTheTokenIsLookedFor(t *testing.T) {
	data := filepath.Join(t.TempDir(), "elsewhere")
	t.Setenv("AIRLOCK_DEV_DATA_DIR", data)
	_, err := runCLI(context.Background(), t, "approvals", "list")
	want := "no API token at " + filepath.Join(data, "admin.token") + ": run this in the directory where `airlock dev` was started, name its data dir with --data DIR (or AIRLOCK_DEV_DATA_DIR=DIR), or pass --token-file FILE"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
}

// TestAWrongArgumentIsAUsageError: a missing, extra or misplaced argument is
// exit status 2 with a sentence and where the help is, whichever check found
// it (cobra's own included), as a wrong flag is.
func TestAWrongArgumentIsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a_tool_given_without_its_flag_says_which_flag_takes_it", []string{"call", "demo__echo"}, `unexpected "demo__echo": give the text with --tool "demo__echo" (see ` + "`airlock call --help`)"},
		{"a_tool_without_its_server_says_the_form", []string{"call", "--tool", "echo"}, `--tool "echo" names no server and tool: give it as server__tool, such as demo__echo`},
		{"a_missing_month_names_the_argument", []string{"audit", "drop-before"}, "missing argument: drop-before YYYY-MM (see `airlock audit drop-before --help`)"},
		{"an_extra_word_after_a_command_without_arguments", []string{"approvals", "list", "pending"}, `unknown command "pending" for "airlock approvals list" (see ` + "`airlock approvals list --help`)"},
		{"too_many_policy_directories", []string{"policy", "test", "a", "b"}, "(see `airlock policy test --help`)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(context.Background(), t, tc.args...)
			var usage usageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error (exit status 2) saying %q", err, tc.want)
			}
		})
	}
}

// TestACallThatCannotBeSubmittedIsExitStatus2: `airlock call` and `await`
// say 1 only of an outcome other than completed; a call that could not be
// submitted or followed (no credential for the agent, none at --creds) is
// 2, as their help says, so that a script does not take it for a denial.
func TestACallThatCannotBeSubmittedIsExitStatus2(t *testing.T) {
	t.Setenv("AIRLOCK_DEV_DATA_DIR", t.TempDir())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"call_as_an_agent_with_no_credential", []string{"call", "--agent", "nobody", "--tool", "demo__echo"}, "no credential for agent nobody"},
		{"call_with_a_credential_file_that_is_not_there", []string{"call", "--creds", "/nonexistent/bot.creds.json", "--tool", "demo__echo"}, "/nonexistent/bot.creds.json"},
		{"await_with_a_credential_file_that_is_not_there", []string{"await", "bot/x", "--creds", "/nonexistent/bot.creds.json"}, "/nonexistent/bot.creds.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(context.Background(), t, tc.args...)
			var usage usageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want exit status 2 (a usage error) saying %q", err, tc.want)
			}
		})
	}
}

// TestAgentsAddUsesTheDataDirTheOtherCommandsUse: without --data, `airlock
// agents add` writes where `airlock call` and `approvals` look
// (AIRLOCK_DEV_DATA_DIR), not always into ./.airlock.
func TestAgentsAddUsesTheDataDirTheOtherCommandsUse(t *testing.T) {
	data := t.TempDir()
	t.Setenv("AIRLOCK_DEV_DATA_DIR", data)
	out, err := runCLI(context.Background(), t, "agents", "add", "newcomer")
	if err != nil {
		t.Fatal(err)
	}
	file := natsauth.Dev{DataDir: data}.CredentialFile("newcomer")
	if _, err := os.Stat(file); err != nil || !strings.Contains(out, file) {
		t.Fatalf("the credential is not at %s (%v):\n%s", file, err, out)
	}
	if out, err = runCLI(context.Background(), t, "agents", "list"); err != nil || !strings.Contains(out, "newcomer\t"+file) {
		t.Fatalf("agents list: %v\n%s", err, out)
	}
}

// TestAgentsAddRefusesAnAgentWhoseConnectionsDoNotFit: the connections of
// every agent (limits.agent_connections each) and the services'
// (limits.service_connections) must fit in limits.bus_connections, or
// agents at their bound could leave a service without a connection; `agents
// add` refuses the agent past that, saying which settings to change, and
// writes no credential for it (which `airlock dev` would refuse to load).
func TestAgentsAddRefusesAnAgentWhoseConnectionsDoNotFit(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(cfg, []byte("limits:\n  bus_connections: 400\n  agent_connections: 64\n  service_connections: 256\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := natsauth.Dev{DataDir: data}
	for _, tc := range []struct {
		agent   string
		wantErr string
	}{
		{"first", ""},
		{"second", ""},
		{"third", "3 agents of 64 NATS connections each (limits.agent_connections) and 256 for services (limits.service_connections) need 448 connections, over limits.bus_connections (400), which admits 2 agents: raise limits.bus_connections"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			out, err := runCLI(context.Background(), t, "--config", cfg, "agents", "add", tc.agent, "--data", data)
			_, statErr := os.Stat(d.CredentialFile(tc.agent))
			switch {
			case tc.wantErr == "" && (err != nil || statErr != nil):
				t.Fatalf("agents add %s: %v, credential %v\n%s", tc.agent, err, statErr, out)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("agents add %s: %v; want it refused saying %q", tc.agent, err, tc.wantErr)
			case tc.wantErr != "" && statErr == nil:
				t.Fatalf("agents add %s was refused but wrote %s", tc.agent, d.CredentialFile(tc.agent))
			}
		})
	}
}

// TestAgentsListWithDataReadsNoConfiguration: `airlock agents list --data
// DIR` needs only DIR, so a configuration that does not load (here, one
// with an unknown setting) does not stop it; without --data the data dir is
// the configuration's, and its error is what the command says.
func TestAgentsListWithDataReadsNoConfiguration(t *testing.T) {
	data := t.TempDir()
	file := natsauth.Dev{DataDir: data}.CredentialFile("lister")
	if _, err := natsauth.NewCredential(file, "lister", "nats://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(broken, []byte("no_such_setting: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"with_data", []string{"--config", broken, "agents", "list", "--data", data}, "lister\t" + file, ""},
		{"without_data", []string{"--config", broken, "agents", "list"}, "", broken},
		// Run away from its dev, an empty list says how to name the dev.
		{"an_empty_data_dir_says_to_name_the_devs", []string{"--config", broken, "agents", "list", "--data", t.TempDir()}, "if airlock dev runs elsewhere, name its data dir with --data DIR", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(context.Background(), t, tc.args...)
			switch {
			case tc.wantErr == "" && (err != nil || !strings.Contains(out, tc.want)):
				t.Fatalf("err = %v, want the list naming %q:\n%s", err, tc.want, out)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want the configuration's error naming %s", err, tc.wantErr)
			}
		})
	}
}

// TestTheStdioGatewaySaysWhereItConnectsAndWhatToDo: `airlock gateway
// --stdio` writes nothing but MCP on stdout, so it says on stderr, before it
// first tries, where it connects and as whom; and when nothing answers it
// ends with a sentence saying what to do, not 30 s of silence and a dial
// error.
func TestTheStdioGatewaySaysWhereItConnectsAndWhatToDo(t *testing.T) {
	data, url := devDataAndNoNATS(t)
	line, err := startUntilItGivesUp(t, "gateway", "--stdio", "--data", data, "--nats", url, "--connect-wait", "1s")
	want := "airlock gateway: connecting to NATS at " + url + " with the nkey in " + natsauth.Dev{DataDir: data}.SeedFile(natsauth.RoleGateway) + " for endpoint bot (agent bot); trying for up to 1s"
	if !strings.Contains(line, want) {
		t.Errorf("the first line on stderr is %q, want it to say %q", line, want)
	}
	want = "cannot reach NATS at " + url + " within 1s (nats: no servers available for connection): start airlock (`airlock dev`, or `go tool task up` in its repository) and let the MCP client start the gateway again, or point --nats at the NATS airlock runs on"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
}

// devDataAndNoNATS is a data dir of `airlock dev` (its credentials and
// gateway endpoint) and a NATS URL nothing listens on.
func devDataAndNoNATS(t *testing.T) (data, url string) {
	t.Helper()
	data = t.TempDir()
	if err := (natsauth.Dev{DataDir: data}).Ensure(config.Default(), "nats://127.0.0.1:4222"); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url = "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	return data, url
}

// startUntilItGivesUp runs the command given by args until it ends, and
// returns the first line it wrote on stderr (which must come before it
// ends) and how it ended.
func startUntilItGivesUp(t *testing.T, args ...string) (first string, err error) {
	t.Helper()
	r, w := io.Pipe()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r)
	}()
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetErr(w)
		root.SetArgs(args)
		done <- root.ExecuteContext(context.Background())
		w.Close()
	}()
	select {
	case first = <-lines:
	case err := <-done:
		t.Fatalf("it ended (%v) before it said where it connects", err)
	}
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("still trying after 15s")
	}
	return first, err
}

// TestServeAndTheHTTPGatewaySayWhereTheyConnectAndWhatToDo: `airlock serve`
// and `airlock gateway` over HTTP say on stderr, before they first try,
// where they connect and as whom, and when nothing answers within
// --connect-wait they end with a sentence saying what to do, not 30 s of
// silence.
func TestServeAndTheHTTPGatewaySayWhereTheyConnectAndWhatToDo(t *testing.T) {
	data, url := devDataAndNoNATS(t)
	unreachable := "cannot reach NATS at " + url + " within 1s (nats: no servers available for connection): "
	for _, tc := range []struct {
		name      string
		args      []string
		first     string
		wantError string
	}{
		{"serve_names_its_services_and_says_to_start_nats", []string{"serve", "policy", "approval"},
			"airlock serve: connecting to NATS at " + url + " without credentials for policy, approval; trying for up to 1s",
			unreachable + "start the NATS server airlock runs on and run `airlock serve` again, or point --nats (nats.url) at it"},
		{"the_http_gateway_names_its_user_and_endpoints", []string{"gateway", "--data", data},
			"airlock gateway: connecting to NATS at " + url + " with the nkey in " + natsauth.Dev{DataDir: data}.SeedFile(natsauth.RoleGateway) + " for endpoints bot; trying for up to 1s",
			unreachable + "start airlock (`airlock dev`, or `go tool task up` in its repository) and run `airlock gateway` again, or point --nats at the NATS airlock runs on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, err := startUntilItGivesUp(t, append(tc.args, "--nats", url, "--http", "127.0.0.1:0", "--connect-wait", "1s")...)
			if !strings.Contains(line, tc.first) {
				t.Errorf("the first line on stderr is %q, want it to say %q", line, tc.first)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Fatalf("err = %v, want it to say %q", err, tc.wantError)
			}
		})
	}
}

// TestNATSConfigRendersAnAccountPerAgentNamed: `airlock nats config
// --agent` renders the shipped configuration for an operator's agents,
// each in an account of its own, and refuses a name that is no agent id
// (it would land in the configuration as written).
func TestNATSConfigRendersAnAccountPerAgentNamed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{"the_example_agent", nil, []string{`"AGENT_bot" {`}, ""},
		{"the_agents_named", []string{"--agent", "research-bot", "--agent", "ci"},
			[]string{`"AGENT_research-bot" {`, `"AGENT_ci" {`, `{ service: "airlock.req.ci.*", accounts: ["AGENT_ci"] }`, "$AIRLOCK_AGENT_RESEARCH_BOT_NKEY"}, ""},
		{"a_name_that_is_no_agent_id", []string{"--agent", "x } evil {"}, nil, "has characters outside"},
		// nats-server would refuse the rendered file: one key read twice.
		{"two_agents_whose_key_variables_fold_alike", []string{"--agent", "bot", "--agent", "BOT"}, nil, "would both read their public key from $AIRLOCK_AGENT_BOT_NKEY"},
		{"a_dash_and_an_underscore", []string{"--agent", "a-b", "--agent", "a_b"}, nil, "rename one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(context.Background(), t, append([]string{"nats", "config"}, tc.args...)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("nats config %v: %v; want it refused saying %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("nats config %v does not render %q", tc.args, w)
				}
			}
			if tc.args != nil && strings.Contains(out, `"AGENT_bot" {`) {
				t.Error("nats config --agent rendered the example agent too")
			}
		})
	}
}

// TestTheBannersAgentsLineUp: the credential files of dev's banner start in
// one column however long an agent's name is (a name over ten characters
// pushed its file out of line).
func TestTheBannersAgentsLineUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		agents []string
	}{
		{"short_names", []string{"bot", "ci"}},
		{"a_long_name", []string{"bot", "research-bot-for-the-team"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := agentBannerLines(tc.agents, func(a string) string { return ".airlock/agents/" + a + ".creds.json" })
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			if len(lines) != len(tc.agents) {
				t.Fatalf("%d lines for %d agents:\n%s", len(lines), len(tc.agents), text)
			}
			column := strings.Index(lines[0], ".airlock/")
			for _, l := range lines {
				if strings.Index(l, ".airlock/") != column || !strings.HasPrefix(l, "  agent     ") {
					t.Fatalf("the credential files do not line up:\n%s", text)
				}
			}
		})
	}
}
