package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// claudePayload is a Claude Code hook payload as Claude Code writes it.
func claudePayload(t *testing.T, event, tool, toolUseID, cwd string, input map[string]any, response any) []byte {
	t.Helper()
	m := map[string]any{"session_id": "undo-" + toolUseID, "transcript_path": "/tmp/t.jsonl", "cwd": cwd, "permission_mode": "default",
		"hook_event_name": event, "tool_name": tool, "tool_input": input, "tool_use_id": toolUseID}
	if response != nil {
		m["tool_response"] = response
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash -c %q: %v: %s", script, err, out)
	}
	return string(out)
}

// lastEvent reads the last event stored on subj, waiting up to 20 s for one.
func lastEvent(t *testing.T, js jetstream.JetStream, subj string) *airlockv1.Event {
	t.Helper()
	var msg *jetstream.RawStreamMsg
	testenv.Eventually(t, 20*time.Second, "an event on "+subj, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, config.Default().Stream.Name)
		if err == nil {
			msg, err = s.GetLastMsgForSubject(ctx, subj)
		}
		return err == nil
	})
	ev, err := envelope.Decode(msg.Data, msg.Header)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// A coding agent's edits gated through `airlock hook` are saved first and
// can be undone, as Claude Code runs the hook: the pre-tool hook waits for
// a person, snapshots, answers allow; the tool (here real bash) changes the
// file; the post-tool hook records the outcome with the snapshot; `airlock
// undo` puts the file back, recorded in the trail with who undid it, and
// refuses when a later change would be lost.
func TestACodingAgentsEditIsSavedFirstAndCanBeUndone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not on PATH: install it (apt-get install git)")
	}
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+hookDevConfig(t))
	dev.Agent(t, "laptop")
	api := dev.API(t)
	_, js := dev.Admin(t)
	state := t.TempDir()
	hook := []string{"--creds", dev.Creds("laptop"), "--nats", dev.NATSURL, "--state-dir", state, "--wait", "60s"}

	// edit runs one Edit of file (in dir) through the hook, approved by
	// bob, as change does it, then reports it.
	edit := func(t *testing.T, id, dir, file, change string) hookResult {
		t.Helper()
		input := map[string]any{"file_path": filepath.Join(dir, file), "old_string": "one", "new_string": "two"}
		ch := startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Edit", id, dir, input, nil), hook...)
		rec := decidable(t, api, "laptop", id)
		if _, err := decideAs(t, api, "bob", rec, airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine"); err != nil {
			t.Fatal(err)
		}
		r := waitHook(t, ch)
		if !allowed(t, hooks.Claude, r) {
			t.Fatalf("the approved edit: %+v", r)
		}
		sh(t, dir, change)
		post := runHook(t, hooks.Claude, claudePayload(t, "PostToolUse", "Edit", id, dir, input, map[string]any{"filePath": file}), hook...)
		if post.exit != 0 {
			t.Fatalf("post-tool hook: %+v", post)
		}
		return r
	}
	undo := func(args ...string) cliRun {
		return cli(t, dev, append([]string{"undo", "--state-dir", state, "--by", "dana"}, args...)...)
	}

	t.Run("an_edit_in_a_git_work_tree_is_saved_apart_from_the_repository_and_undone", func(t *testing.T) {
		dir := t.TempDir()
		sh(t, dir, "git init -q -b main && echo one > a.txt && git add a.txt && git -c user.name=t -c user.email=t@t commit -q -m init && echo staged > s.txt && git add s.txt")
		userState := func() string {
			return sh(t, dir, "git rev-parse HEAD main && git symbolic-ref HEAD && git ls-files -s && sha256sum .git/index")
		}
		before := userState()
		r := edit(t, "toolu_undo_git", dir, "a.txt", "sed -i s/one/two/ a.txt")
		if reason, _ := r.field(t, "hookSpecificOutput.permissionDecisionReason").(string); !strings.Contains(reason, "airlock undo laptop/toolu_undo_git") {
			t.Errorf("the allow reason does not say how to undo: %q", reason)
		}
		if refs := sh(t, dir, "git for-each-ref --format='%(refname)' refs/airlock"); refs != "" {
			t.Fatalf("the snapshot left refs in the repository: %q", refs)
		}
		if userState() != before {
			t.Fatal("the snapshot moved HEAD or the branch, or changed the index")
		}
		done := lastEvent(t, js, "airlock.evt.laptop.toolu_undo_git.exec.completed").GetCompleted()
		if s := done.GetSnapshot(); s.GetKind() != "git" || s.GetBefore() == "" || s.GetAfter() == "" || strings.Join(s.GetPaths(), ",") != "a.txt" {
			t.Fatalf("the call's outcome records the snapshot %v", s)
		}
		res := undo("laptop/toolu_undo_git")
		if res.Code != 0 || !strings.Contains(res.Stdout, "a.txt") {
			t.Fatalf("airlock undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "one\n" {
			t.Fatalf("a.txt after undo: %q", got)
		}
		if userState() != before {
			t.Fatal("undo moved HEAD or the branch, or changed the index")
		}
		ev := lastEvent(t, js, "airlock.evt.laptop.toolu_undo_git.undone")
		if ev.GetActor().GetId() != "dana" || strings.Join(ev.GetUndone().GetPaths(), ",") != "a.txt" || ev.GetUndone().GetForced() {
			t.Fatalf("undone event %v", ev)
		}
	})

	t.Run("a_later_change_makes_undo_refuse_unless_forced", func(t *testing.T) {
		dir := t.TempDir()
		sh(t, dir, "git init -q -b main && echo one > a.txt && git add a.txt && git -c user.name=t -c user.email=t@t commit -q -m init")
		edit(t, "toolu_undo_later", dir, "a.txt", "sed -i s/one/two/ a.txt")
		sh(t, dir, "echo 'a person wrote this later' >> a.txt")
		res := undo("laptop/toolu_undo_later")
		if res.Code == 0 || !strings.Contains(res.Stderr, "changed after the call") || !strings.Contains(res.Stderr, "--force") {
			t.Fatalf("undo over a later change: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "two\na person wrote this later\n" {
			t.Fatalf("a refused undo changed a.txt: %q", got)
		}
		if res := undo("laptop/toolu_undo_later", "--force"); res.Code != 0 {
			t.Fatalf("forced undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "one\n" {
			t.Fatalf("a.txt after a forced undo: %q", got)
		}
		if !lastEvent(t, js, "airlock.evt.laptop.toolu_undo_later.undone").GetUndone().GetForced() {
			t.Error("the forced undo is not recorded as forced")
		}
	})

	// Second review, finding 3: the snapshot borrowed the staged blob v2
	// from the repository (git add writes no object the repository has);
	// once git add moved the index on, git gc --prune=now deleted it and
	// undo failed on a bad file. The snapshot keeps every object no ref
	// reaches in its own object directory.
	t.Run("undo_survives_git_gc_of_a_blob_only_the_index_held", func(t *testing.T) {
		dir := t.TempDir()
		sh(t, dir, "git init -q -b main && echo v1 > a.go && git add a.go && git -c user.name=t -c user.email=t@t commit -q -m init && echo v2 > a.go && git add a.go")
		input := map[string]any{"command": "sed -i s/v2/v3/ a.go", "description": "bump"}
		id := "toolu_undo_gc"
		ch := startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Bash", id, dir, input, nil), hook...)
		rec := decidable(t, api, "laptop", id)
		if _, err := decideAs(t, api, "bob", rec, airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine"); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("the approved sed: %+v", r)
		}
		sh(t, dir, "sed -i s/v2/v3/ a.go")
		post := runHook(t, hooks.Claude, claudePayload(t, "PostToolUse", "Bash", id, dir, input, map[string]any{"stdout": "", "stderr": ""}), hook...)
		if post.exit != 0 {
			t.Fatalf("post-tool hook: %+v", post)
		}
		sh(t, dir, "git add a.go && git gc -q --prune=now")
		res := undo("laptop/" + id)
		if res.Code != 0 || !strings.Contains(res.Stdout, "a.go") {
			t.Fatalf("airlock undo after git gc --prune=now: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.go"); got != "v2\n" {
			t.Fatalf("a.go after undo: %q, want the staged v2", got)
		}
	})

	t.Run("outside_git_the_named_file_is_copied_and_undone", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		edit(t, "toolu_undo_copy", dir, "a.txt", "sed -i s/one/two/ a.txt")
		done := lastEvent(t, js, "airlock.evt.laptop.toolu_undo_copy.exec.completed").GetCompleted()
		if done.GetSnapshot().GetKind() != "copy" {
			t.Fatalf("snapshot %v", done.GetSnapshot())
		}
		if res := undo("laptop/toolu_undo_copy"); res.Code != 0 {
			t.Fatalf("airlock undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "one\n" {
			t.Fatalf("a.txt after undo: %q", got)
		}
	})

	t.Run("a_file_name_that_would_steer_a_terminal_is_shown_inertly", func(t *testing.T) {
		dir := t.TempDir()
		name := "evil\x1b]0;pwned\x07\u202e.txt"
		if err := os.WriteFile(filepath.Join(dir, name), []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sh(t, dir, "git init -q -b main")
		r := edit(t, "toolu_undo_evil", dir, name, "sed -i s/one/two/ evil*")
		res := undo("laptop/toolu_undo_evil")
		if res.Code != 0 {
			t.Fatalf("airlock undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		for what, out := range map[string]string{"the hook's answer": r.stdout + r.stderr, "undo's output": res.Stdout + res.Stderr} {
			if strings.ContainsAny(out, "\x1b\x07\u202e") {
				t.Errorf("%s carries the file name's control characters raw: %q", what, out)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != "one\n" {
			t.Fatalf("the file after undo: %q", got)
		}
	})

	t.Run("an_edit_naming_a_file_outside_the_work_tree_saves_and_restores_nothing_there", func(t *testing.T) {
		outside := t.TempDir()
		sh(t, outside, "echo outside > secret.txt")
		dir := t.TempDir()
		sh(t, dir, "git init -q -b main && ln -s "+outside+" link")
		r := edit(t, "toolu_undo_escape", dir, "link/secret.txt", "true")
		if reason, _ := r.field(t, "hookSpecificOutput.permissionDecisionReason").(string); !strings.Contains(reason, "symbolic link") {
			t.Errorf("the allow reason does not say the path was not saved: %q", reason)
		}
		sh(t, outside, "echo changed-by-the-tool > secret.txt")
		res := undo("laptop/toolu_undo_escape", "--force")
		if got := sh(t, outside, "cat secret.txt"); got != "changed-by-the-tool\n" {
			t.Fatalf("undo wrote outside the work tree: %q (%s%s)", got, res.Stdout, res.Stderr)
		}
	})
}
