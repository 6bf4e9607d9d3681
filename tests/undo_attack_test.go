package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/testenv"
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

// The manifest of a snapshot lies in the hook's state dir, which the agent
// may be able to write. Undo acts only within the call the audit trail
// recorded (its working directory and the files it named), reads saved
// copies without following links, never widens a file's mode, and undoes a
// call once, as the trail says: each rewritten manifest below was a
// reviewer's reproduction against a real `airlock dev`.
func TestUndoActsOnlyOnWhatTheRecordedCallTouched(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+hookDevConfig(t))
	dev.Agent(t, "laptop")
	api := dev.API(t)
	_, js := dev.Admin(t)
	state := t.TempDir()
	hook := []string{"--creds", dev.Creds("laptop"), "--nats", dev.NATSURL, "--state-dir", state, "--wait", "60s"}
	// edit runs an approved Edit of a.txt outside git (a copy snapshot),
	// the change, and its report; it returns the snapshot's directory.
	edit := func(t *testing.T, id string) (dir, snap string) {
		t.Helper()
		dir = t.TempDir()
		sh(t, dir, "echo one > a.txt")
		input := map[string]any{"file_path": filepath.Join(dir, "a.txt"), "old_string": "one", "new_string": "two"}
		ch := startHook(t, hooks.Claude, claudePayload(t, "PreToolUse", "Edit", id, dir, input, nil), hook...)
		if _, err := decideAs(t, api, "bob", decidable(t, api, "laptop", id), airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine"); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("the approved edit: %+v", r)
		}
		sh(t, dir, "sed -i s/one/two/ a.txt")
		if r := runHook(t, hooks.Claude, claudePayload(t, "PostToolUse", "Edit", id, dir, input, map[string]any{"filePath": "a.txt"}), hook...); r.exit != 0 {
			t.Fatalf("post-tool hook: %+v", r)
		}
		return dir, filepath.Join(state, "snapshots", "laptop", id)
	}
	undo := func(args ...string) cliRun {
		return cli(t, dev, append([]string{"undo", "--state-dir", state, "--by", "dana"}, args...)...)
	}
	digest := func(b []byte) string { sum := sha256.Sum256(b); return hex.EncodeToString(sum[:]) }
	forge := func(t *testing.T, snap string, m map[string]any) {
		t.Helper()
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snap, "manifest.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// refused checks that undo refused and the trail records no undo.
	refused := func(t *testing.T, id string, res cliRun, why string) {
		t.Helper()
		if res.Code == 0 || !strings.Contains(res.Stderr, why) || !strings.Contains(res.Stderr, "nothing was restored") {
			t.Fatalf("airlock undo of a forged manifest: %d, want a refusal saying %q\n%s%s", res.Code, why, res.Stdout, res.Stderr)
		}
		if evs := testenv.Events(t, js, "airlock.evt.laptop."+id+".undone"); len(evs) != 0 {
			t.Fatalf("the trail records an undo of %s: %v", id, evs)
		}
	}

	t.Run("a_manifest_rooted_elsewhere_writes_nothing_there", func(t *testing.T) {
		const id = "toolu_forge_root"
		_, snap := edit(t, id)
		victim := t.TempDir()
		sh(t, victim, "mkdir .ssh && echo 'ssh-ed25519 AAAA the-owner' > .ssh/authorized_keys")
		planted := []byte("ssh-ed25519 AAAA the-attacker\n")
		if err := os.WriteFile(filepath.Join(snap, "b0"), planted, 0o600); err != nil {
			t.Fatal(err)
		}
		now, _ := os.ReadFile(filepath.Join(victim, ".ssh", "authorized_keys"))
		forge(t, snap, map[string]any{"kind": "copy", "root": victim, "recorded": true, "entries": []any{map[string]any{
			"path":   ".ssh/authorized_keys",
			"before": map[string]any{"exists": true, "digest": digest(planted), "mode": 0o600},
			"after":  map[string]any{"exists": true, "digest": digest(now), "mode": 0o644},
		}}})
		refused(t, id, undo("laptop/"+id), "the call was approved in")
		if got := sh(t, victim, "cat .ssh/authorized_keys"); got != "ssh-ed25519 AAAA the-owner\n" {
			t.Fatalf("undo wrote outside the call's work tree: %q", got)
		}
	})

	t.Run("a_saved_copy_that_is_a_link_to_a_secret_is_never_read", func(t *testing.T) {
		const id = "toolu_forge_link"
		dir, snap := edit(t, id)
		secret := filepath.Join(t.TempDir(), "secret")
		content := []byte("the owner's secret\n")
		if err := os.WriteFile(secret, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(snap, "b0")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(snap, "b0")); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ path, why string }{
			{"leak.txt", "did not name"},             // a file the call never named
			{"a.txt", "is not a file airlock saved"}, // the file it named, from a link
		} {
			now, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
			after := map[string]any{"exists": false}
			if tc.path == "a.txt" {
				after = map[string]any{"exists": true, "digest": digest(now), "mode": 0o644}
			}
			forge(t, snap, map[string]any{"kind": "copy", "root": dir, "recorded": true, "entries": []any{map[string]any{
				"path": tc.path, "before": map[string]any{"exists": true, "digest": digest(content), "mode": 0o644}, "after": after,
			}}})
			refused(t, id, undo("laptop/"+id), tc.why)
			if _, err := os.Stat(filepath.Join(dir, "leak.txt")); err == nil {
				t.Fatal("undo wrote the secret into the work tree as leak.txt")
			}
			if got := sh(t, dir, "cat a.txt"); got != "two\n" {
				t.Fatalf("undo wrote the secret into a.txt: %q", got)
			}
		}
	})

	t.Run("a_call_is_undone_once_as_the_trail_says_whatever_its_manifest", func(t *testing.T) {
		const id = "toolu_forge_twice"
		dir, snap := edit(t, id)
		if res := undo("laptop/" + id); res.Code != 0 {
			t.Fatalf("airlock undo: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		b, err := os.ReadFile(filepath.Join(snap, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "undone")
		forge(t, snap, m)
		sh(t, dir, "echo 'a person wrote this later' > a.txt")
		res := undo("laptop/"+id, "--force")
		if res.Code == 0 || !strings.Contains(res.Stderr, "undone already") {
			t.Fatalf("a second undo of the same call: %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if got := sh(t, dir, "cat a.txt"); got != "a person wrote this later\n" {
			t.Fatalf("a second undo changed a.txt: %q", got)
		}
		if evs := testenv.Events(t, js, "airlock.evt.laptop."+id+".undone"); len(evs) != 1 {
			t.Fatalf("the trail records %d undos of the call, want 1", len(evs))
		}
	})
}
