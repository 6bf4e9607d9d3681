package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/hooks"
)

// A hostile coding agent controls its repository (.gitattributes,
// .git/config) and the hook payloads its harness sends (tool-use ids, when
// the post-tool hook fires). None of that may run its code in the hook or
// in the person's `airlock undo`, nor turn undo into a silent eraser of the
// person's later work.
func TestAHostileCodingAgentCannotTurnSnapshotsOrUndoAgainstThePerson(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+hookDevConfig(t))
	dev.Agent(t, "laptop")
	api := dev.API(t)
	state := t.TempDir()
	hook := []string{"--creds", dev.Creds("laptop"), "--nats", dev.NATSURL, "--state-dir", state, "--wait", "60s"}
	input := func(dir string) map[string]any {
		return map[string]any{"file_path": filepath.Join(dir, "a.txt"), "old_string": "one", "new_string": "two"}
	}
	pre := func(t *testing.T, id, dir string) hookResult {
		t.Helper()
		return waitHook(t, startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Edit", id, dir, input(dir), nil), hook...))
	}
	post := func(t *testing.T, id, dir string) {
		t.Helper()
		if r := runHook(t, hooks.Claude, claudePayload(t, "PostToolUse", "Edit", id, dir, input(dir), map[string]any{"filePath": "a.txt"}), hook...); r.exit != 0 {
			t.Fatalf("post-tool hook: %+v", r)
		}
	}
	// edit runs an Edit of a.txt that bob approves, the change, and its report.
	edit := func(t *testing.T, id, dir string) {
		t.Helper()
		ch := startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Edit", id, dir, input(dir), nil), hook...)
		if _, err := decideAs(t, api, "bob", decidable(t, api, "laptop", id), airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine"); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("the approved edit: %+v", r)
		}
		sh(t, dir, "sed -i s/one/two/ a.txt")
		post(t, id, dir)
	}
	undo := func(args ...string) cliRun {
		return cli(t, dev, append([]string{"undo", "--state-dir", state, "--by", "dana"}, args...)...)
	}
	repo := func(t *testing.T) string {
		dir := t.TempDir()
		sh(t, dir, "git init -q -b main && echo one > a.txt && git add a.txt && git -c user.name=t -c user.email=t@t commit -q -m init")
		return dir
	}

	t.Run("a_git_clean_filter_the_agent_configured_never_runs_in_the_hook_or_in_undo", func(t *testing.T) {
		dir := repo(t)
		marker := filepath.Join(t.TempDir(), "ran")
		sh(t, dir, "echo '* filter=evil' > .gitattributes && git config filter.evil.clean \"sh -c 'echo ran >> "+marker+"; cat'\" && git config filter.evil.required true")
		edit(t, "toolu_attack_filter", dir)
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the hook's snapshot ran the agent's clean filter")
		}
		if res := undo("laptop/toolu_attack_filter"); res.Code != 0 {
			t.Fatalf("airlock undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("airlock undo ran the agent's clean filter")
		}
		if got := sh(t, dir, "cat a.txt"); got != "one\n" {
			t.Fatalf("a.txt after undo: %q", got)
		}
	})

	t.Run("a_replayed_post_tool_report_does_not_make_undo_erase_later_work_unasked", func(t *testing.T) {
		dir := repo(t)
		edit(t, "toolu_attack_repost", dir)
		sh(t, dir, "echo 'a person wrote this later' >> a.txt")
		post(t, "toolu_attack_repost", dir) // the harness reports the call again
		res := undo("laptop/toolu_attack_repost")
		if res.Code == 0 || !strings.Contains(res.Stderr, "changed after the call") {
			t.Fatalf("undo over a later change after a replayed report: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "two\na person wrote this later\n" {
			t.Fatalf("undo erased the person's later work: %q", got)
		}
	})

	t.Run("a_replayed_pre_tool_hook_does_not_replace_the_state_before_the_call", func(t *testing.T) {
		dir := repo(t)
		ch := startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Edit", "toolu_attack_repre", dir, input(dir), nil), hook...)
		if _, err := decideAs(t, api, "bob", decidable(t, api, "laptop", "toolu_attack_repre"), airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine"); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("the approved edit: %+v", r)
		}
		sh(t, dir, "sed -i s/one/two/ a.txt")
		// The same tool use once more, before its report: a snapshot now
		// would be of the edited file.
		if r := pre(t, "toolu_attack_repre", dir); !allowed(t, hooks.Claude, r) {
			t.Fatalf("the replayed pre-tool hook was not allowed, so this attack needs another way in: %+v", r)
		}
		post(t, "toolu_attack_repre", dir)
		if res := undo("laptop/toolu_attack_repre"); res.Code != 0 {
			t.Fatalf("airlock undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "one\n" {
			t.Fatalf("a.txt after undo of a replayed call: %q (its snapshot was replaced)", got)
		}
	})

	t.Run("a_file_the_call_made_git_ignore_is_still_checked_for_later_work_before_undo", func(t *testing.T) {
		dir := repo(t)
		sh(t, dir, "echo mine > notes.txt")
		const id = "toolu_attack_ignore"
		command := "echo notes.txt >> .gitignore && echo agent >> notes.txt"
		bash := map[string]any{"command": command}
		ch := startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Bash", id, dir, bash, nil), hook...)
		if _, err := decideAs(t, api, "bob", decidable(t, api, "laptop", id), airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine"); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("the approved command: %+v", r)
		}
		sh(t, dir, command)
		if r := runHook(t, hooks.Claude, claudePayload(t, "PostToolUse", "Bash", id, dir, bash, map[string]any{"stdout": ""}), hook...); r.exit != 0 {
			t.Fatalf("post-tool hook: %+v", r)
		}
		sh(t, dir, "echo 'a person wrote this later' >> notes.txt")
		res := undo("laptop/" + id)
		if res.Code == 0 || !strings.Contains(res.Stderr, "changed after the call") {
			t.Fatalf("undo over a later change to a file the call made git ignore: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat notes.txt"); got != "mine\nagent\na person wrote this later\n" {
			t.Fatalf("undo erased the person's later work: %q", got)
		}
	})
}
