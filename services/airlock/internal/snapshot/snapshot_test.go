package snapshot

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// repo makes a git work tree with one committed file, a.txt.
func repo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not on PATH: install it (apt-get install git)")
	}
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q", "-b", "main")
	write(t, dir, "a.txt", "one\n")
	write(t, dir, ".gitignore", "*.log\n")
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
	return dir
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

func write(t *testing.T, dir, rel, s string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		return "<absent>"
	}
	return string(b)
}

func store(t *testing.T) Store {
	return Store{Dir: filepath.Join(t.TempDir(), "snapshots"), Limits: DefaultLimits}
}

// userState is what a snapshot must never touch: HEAD, the branch, the
// index, the refs and the objects the repository holds (a snapshot's
// objects are kept apart, where the repository's git cannot read them).
func userState(t *testing.T, dir string) string {
	idx, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	return run(t, dir, "git", "rev-parse", "HEAD", "main") + run(t, dir, "git", "symbolic-ref", "HEAD") + string(idx) +
		run(t, dir, "git", "for-each-ref") + run(t, dir, "git", "cat-file", "--batch-all-objects", "--batch-check")
}

func TestUndoPutsBackWhatTheCallChanged(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		git   bool
		shell bool
		paths []string
		// call changes the files as the tool would.
		call func(t *testing.T, dir string)
		want map[string]string
	}{
		{"an_edit_of_a_tracked_file_in_git", true, false, []string{"a.txt"},
			func(t *testing.T, dir string) { write(t, dir, "a.txt", "two\n") }, map[string]string{"a.txt": "one\n"}},
		{"a_new_file_in_git_is_removed", true, false, []string{"sub/new.txt"},
			func(t *testing.T, dir string) { write(t, dir, "sub/new.txt", "new\n") }, map[string]string{"sub/new.txt": "<absent>"}},
		{"an_untracked_file_the_call_names_in_git", true, false, []string{"notes.md"},
			func(t *testing.T, dir string) { write(t, dir, "notes.md", "changed\n") }, map[string]string{"notes.md": "draft\n"}},
		{"a_bash_command_in_git_saves_the_whole_tree", true, true, nil,
			func(t *testing.T, dir string) {
				run(t, dir, "bash", "-c", "echo two > a.txt && rm notes.md && echo x > created.txt")
			}, map[string]string{"a.txt": "one\n", "notes.md": "draft\n", "created.txt": "<absent>"}},
		{"an_edit_outside_git", false, false, []string{"a.txt"},
			func(t *testing.T, dir string) { write(t, dir, "a.txt", "two\n") }, map[string]string{"a.txt": "one\n"}},
		{"a_bash_command_outside_git_saves_the_files_it_names", false, true, nil,
			func(t *testing.T, dir string) { run(t, dir, "bash", "-c", "sed -i s/one/two/ a.txt") }, map[string]string{"a.txt": "one\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			if tc.git {
				dir = repo(t)
			} else {
				dir = t.TempDir()
				write(t, dir, "a.txt", "one\n")
			}
			write(t, dir, "notes.md", "draft\n")
			s := store(t)
			var before string
			if tc.git {
				before = userState(t, dir)
			}
			target := Target{Agent: "claude-code", Call: "toolu_1", Cwd: dir, Paths: tc.paths, WholeTree: tc.shell}
			if tc.shell && !tc.git {
				target.Command = "sed -i s/one/two/ a.txt"
			}
			rec, err := s.Before(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			if tc.git {
				if rec.GetKind() != KindGit || rec.GetRef() != filepath.Join(s.Dir, "claude-code", "toolu_1", "objects") {
					t.Fatalf("snapshot %v", rec)
				}
				if after := userState(t, dir); after != before {
					t.Fatal("taking the snapshot changed HEAD, the branch, the index, the refs or the repository's objects")
				}
			} else if rec.GetKind() != KindCopy {
				t.Fatalf("snapshot %v", rec)
			}
			tc.call(t, dir)
			if _, ok, err := s.After(ctx, "claude-code", "toolu_1"); err != nil || !ok {
				t.Fatalf("after: %v %v", ok, err)
			}
			res, err := s.Undo(ctx, "claude-code", "toolu_1", Call{Cwd: dir, Paths: tc.paths, Shell: tc.shell}, false)
			if err != nil {
				t.Fatal(err)
			}
			for rel, want := range tc.want {
				if got := read(t, dir, rel); got != want {
					t.Errorf("%s = %q after undo, want %q (restored %v)", rel, got, want, res.Paths)
				}
			}
			if tc.git && userState(t, dir) != before {
				t.Error("undo moved HEAD or the branch, or rewrote the index")
			}
			if _, err := s.Undo(ctx, "claude-code", "toolu_1", Call{Cwd: dir, Paths: tc.paths, Shell: tc.shell}, false); err == nil {
				t.Error("a second undo of the same call was not refused")
			}
		})
	}
}

func TestUndoRefusesToLoseLaterChangesUnlessForced(t *testing.T) {
	ctx := context.Background()
	for _, git := range []bool{true, false} {
		for _, after := range []bool{true, false} {
			name := map[bool]string{true: "git", false: "copy"}[git] + map[bool]string{true: "_with_the_state_after_the_call", false: "_without_it"}[after]
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				if git {
					dir = repo(t)
				} else {
					write(t, dir, "a.txt", "one\n")
				}
				s := store(t)
				if _, err := s.Before(ctx, Target{Agent: "a", Call: "c", Cwd: dir, Paths: []string{"a.txt"}}); err != nil {
					t.Fatal(err)
				}
				write(t, dir, "a.txt", "two\n")
				if after {
					if _, _, err := s.After(ctx, "a", "c"); err != nil {
						t.Fatal(err)
					}
					write(t, dir, "a.txt", "three: a person's later edit\n")
				}
				_, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Paths: []string{"a.txt"}}, false)
				if !errors.Is(err, ErrLaterChanges) || !strings.Contains(err.Error(), `"a.txt"`) || !strings.Contains(err.Error(), "--force") {
					t.Fatalf("undo over a later change: %v, want a refusal naming a.txt and --force", err)
				}
				if got := read(t, dir, "a.txt"); got == "one\n" {
					t.Fatal("a refused undo changed the file")
				}
				if _, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Paths: []string{"a.txt"}}, true); err != nil {
					t.Fatal(err)
				}
				if got := read(t, dir, "a.txt"); got != "one\n" {
					t.Fatalf("forced undo left %q", got)
				}
			})
		}
	}
}

// An agent names paths; none outside the work tree is ever read into a
// snapshot or written by an undo, whether by .., an absolute path, a
// symbolic link to a directory outside, or a manifest rewritten afterwards.
func TestNoPathOutsideTheWorkTreeIsSavedOrRestored(t *testing.T) {
	ctx := context.Background()
	for _, git := range []bool{true, false} {
		t.Run(map[bool]string{true: "git", false: "copy"}[git], func(t *testing.T) {
			outside := t.TempDir()
			write(t, outside, "secret.txt", "outside\n")
			dir := t.TempDir()
			if git {
				dir = repo(t)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			s := store(t)
			rel, _ := filepath.Rel(dir, filepath.Join(outside, "secret.txt"))
			named := []string{rel, filepath.Join(outside, "secret.txt"), "link/secret.txt", "../../etc/passwd", ".git/config"}
			rec, err := s.Before(ctx, Target{Agent: "a", Call: "c", Cwd: dir, Paths: named})
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.GetPaths()) != 0 {
				t.Fatalf("saved %v: paths outside the work tree", rec.GetPaths())
			}
			for _, why := range []string{"outside the work tree", "symbolic link", ".git"} {
				if !strings.Contains(rec.GetNote(), why) {
					t.Errorf("the note %q does not say %q", rec.GetNote(), why)
				}
			}
			// The agent (or anyone) rewrites the manifest to point outside.
			mdir := filepath.Join(s.Dir, "a", "c")
			m, err := readManifest(mdir)
			if err != nil {
				t.Fatal(err)
			}
			m.Paths = []string{"link/secret.txt"}
			m.Entries = []entry{{Path: "link/secret.txt", Before: state{}, After: &state{Exists: true, Digest: "x"}}}
			if err := writeManifest(mdir, m); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Paths: named}, true); err == nil {
				t.Error("undo through a symbolic link was not refused")
			}
			m.Paths = []string{"../x"}
			m.Entries = []entry{{Path: "../x", Before: state{}, After: &state{Exists: true}}}
			if err := writeManifest(mdir, m); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Paths: named}, true); err == nil {
				t.Error("undo of ../x was not refused")
			}
			if got := read(t, outside, "secret.txt"); got != "outside\n" {
				t.Fatalf("a file outside the work tree became %q", got)
			}
		})
	}
}

func TestACopySnapshotIsBounded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, "small.txt", "small\n")
	write(t, dir, "big.bin", strings.Repeat("x", 4096))
	s := Store{Dir: filepath.Join(t.TempDir(), "s"), Limits: Limits{MaxBytes: 1024}}
	rec, err := s.Before(ctx, Target{Agent: "a", Call: "c", Cwd: dir, Paths: []string{"small.txt", "big.bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rec.GetPaths(), ",") != "small.txt" || !strings.Contains(rec.GetNote(), `"big.bin" not saved: past the`) {
		t.Fatalf("paths %v, note %q", rec.GetPaths(), rec.GetNote())
	}
	write(t, dir, "big.bin", "changed")
	write(t, dir, "small.txt", "changed")
	if _, _, err := s.After(ctx, "a", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Paths: []string{"small.txt", "big.bin"}}, false); err != nil {
		t.Fatal(err)
	}
	if read(t, dir, "small.txt") != "small\n" || read(t, dir, "big.bin") != "changed" {
		t.Fatal("undo restored what it did not save, or missed what it saved")
	}
}

func TestSnapshotsOlderThanTheirAgeAreRemovedWithTheirRefs(t *testing.T) {
	ctx := context.Background()
	dir := repo(t)
	s := store(t)
	if _, err := s.Before(ctx, Target{Agent: "a", Call: "old", Cwd: dir, Paths: []string{"a.txt"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.After(ctx, "a", "old"); err != nil {
		t.Fatal(err)
	}
	// The old snapshot is of the kind airlock took before it kept their
	// objects apart: its commits on hidden refs of the repository.
	manifest := filepath.Join(s.Dir, "a", "old", "manifest.json")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Dir(manifest), "manifest.json", strings.Replace(string(b), `"objects"`, `"objects_gone"`, 1))
	run(t, dir, "git", "update-ref", "refs/airlock/snapshots/a/old", "HEAD")
	run(t, dir, "git", "update-ref", "refs/airlock/snapshots/a/old.after", "HEAD")
	past := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(filepath.Join(s.Dir, "a", "old", "manifest.json"), past, past); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Before(ctx, Target{Agent: "a", Call: "new", Cwd: dir, Paths: []string{"a.txt"}}); err != nil {
		t.Fatal(err)
	}
	refs := run(t, dir, "git", "for-each-ref", "--format=%(refname)", "refs/airlock")
	if refs != "" {
		t.Fatalf("hidden refs after pruning: %q", refs)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "a", "old")); !os.IsNotExist(err) {
		t.Fatalf("the old snapshot's directory is still there: %v", err)
	}
	if _, err := s.Undo(ctx, "a", "old", Call{Cwd: dir, Paths: []string{"a.txt"}}, true); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("undo of a pruned snapshot: %v", err)
	}
}

// Undo hashes the changed files in one git process; each gets the blob id
// `git hash-object --no-filters -- <path>` gives it alone, whatever its
// name (a line break, quotes, a backslash, white space at its end, a
// leading double quote), and a file that cannot be hashed leaves the
// others theirs.
func TestFilesHashedTogetherHashAsEachAlone(t *testing.T) {
	dir := repo(t)
	names := []string{"a.txt", "sub dir/b c.txt", "line\nbreak.txt", `"quoted".txt`, `back\slash.txt`, "trailing space ", "tab\there", "ünï ☃.txt", "cr\r.txt", "\x01ctl"}
	for i, n := range names {
		write(t, dir, n, strings.Repeat("x", i)+"\n")
	}
	want := make([]string, len(names))
	for i, n := range names {
		want[i] = strings.TrimSpace(run(t, dir, "git", "hash-object", "--no-filters", "--", n))
	}
	ctx := context.Background()
	if got := hashFiles(ctx, dir, names); !slices.Equal(got, want) {
		t.Fatalf("hashed together %q, each alone %q", got, want)
	}
	withMissing := append([]string{"missing.txt"}, names...)
	if got := hashFiles(ctx, dir, withMissing); got[0] != "" || !slices.Equal(got[1:], want) {
		t.Fatalf("with a missing file hashed %q, want \"\" for it and %q", got, want)
	}
}

// editedA snapshots a.txt in dir for call a/c, changes it to "two" as the
// call would and records that; it returns the store, the snapshot's
// directory and its manifest.
func editedA(t *testing.T, dir string) (Store, string, manifest) {
	t.Helper()
	ctx := context.Background()
	s := store(t)
	if _, err := s.Before(ctx, Target{Agent: "a", Call: "c", Cwd: dir, Paths: []string{"a.txt"}}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "two\n")
	if _, _, err := s.After(ctx, "a", "c"); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(s.Dir, "a", "c")
	m, err := readManifest(snap)
	if err != nil {
		t.Fatal(err)
	}
	return s, snap, m
}

// The manifest and the saved copies lie in the hook's state dir, which the
// agent may be able to write: undo checks each against the recorded call
// and refuses what it cannot trust, writing nothing.
func TestUndoTrustsTheRecordedCallNotTheManifest(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	write(t, outside, "secret", "one\n") // the digest of a.txt before the call
	tests := []struct {
		name string
		git  bool
		// tamper changes the snapshot in snap (its manifest m) before undo.
		tamper func(t *testing.T, snap string, m *manifest)
		call   func(dir string) Call
		force  bool
		why    string
	}{
		{"a_saved_copy_that_is_a_symbolic_link", false, func(t *testing.T, snap string, m *manifest) {
			os.Remove(filepath.Join(snap, "b0"))
			if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(snap, "b0")); err != nil {
				t.Fatal(err)
			}
		}, nil, true, "not a file airlock saved"},
		{"a_saved_copy_that_is_a_hard_link", false, func(t *testing.T, snap string, m *manifest) {
			os.Remove(filepath.Join(snap, "b0"))
			if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(snap, "b0")); err != nil {
				t.Fatal(err)
			}
		}, nil, true, "not a copy airlock saved"},
		{"a_saved_copy_that_is_not_what_was_saved", false, func(t *testing.T, snap string, m *manifest) {
			write(t, snap, "b0", "planted\n")
		}, nil, true, "digest differs"},
		{"a_call_that_recorded_no_working_directory", false, nil, func(string) Call { return Call{Paths: []string{"a.txt"}} }, false, "records no working directory"},
		{"a_work_tree_that_is_not_the_calls", false, nil, func(string) Call { return Call{Cwd: outside, Paths: []string{"a.txt"}} }, true, "was approved in"},
		{"a_file_the_call_did_not_name", false, nil, func(dir string) Call { return Call{Cwd: dir, Paths: []string{"b.txt"}} }, true, "did not name"},
		{"a_git_edit_made_whole_tree", true, func(t *testing.T, snap string, m *manifest) { m.WholeTree = true }, nil, true, "whole work tree"},
		{"a_git_snapshot_read_from_other_objects", true, func(t *testing.T, snap string, m *manifest) { m.Objects = outside }, nil, true, "not in its own directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.git {
				dir = repo(t)
			} else {
				write(t, dir, "a.txt", "one\n")
			}
			s, snap, m := editedA(t, dir)
			if tc.tamper != nil {
				tc.tamper(t, snap, &m)
			}
			if err := writeManifest(snap, m); err != nil {
				t.Fatal(err)
			}
			call := Call{Cwd: dir, Paths: []string{"a.txt"}}
			if tc.call != nil {
				call = tc.call(dir)
			}
			if _, err := s.Undo(ctx, "a", "c", call, tc.force); err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("undo: %v, want a refusal saying %q", err, tc.why)
			}
			if got := read(t, dir, "a.txt"); got != "two\n" {
				t.Fatalf("a refused undo left a.txt %q", got)
			}
		})
	}
}

// A restored file never gets a mode wider than it has now: a manifest that
// says the file was set-uid and world-writable before the call is not
// believed.
func TestUndoNeverWidensAFilesMode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, "a.txt", "one\n")
	if err := os.Chmod(filepath.Join(dir, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, snap, m := editedA(t, dir)
	m.Entries[0].Before.Mode = os.ModeSetuid | 0o777
	if err := writeManifest(snap, m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Paths: []string{"a.txt"}}, true); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if read(t, dir, "a.txt") != "one\n" || info.Mode() != 0o600 {
		t.Fatalf("a.txt after undo: %q, mode %v, want one and -rw-------", read(t, dir, "a.txt"), info.Mode())
	}
}

// writeRandom writes n incompressible bytes to dir/rel.
func writeRandom(t *testing.T, dir, rel string, n int) {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// R9 F7: a whole-tree snapshot kept an untracked file loose and packed,
// and the after-state packed it once more: three copies per call, where
// one does.
func TestACallsSnapshotsStoreAnUnchangedUntrackedFileOnce(t *testing.T) {
	ctx := context.Background()
	dir := repo(t)
	const size = 4 << 20
	writeRandom(t, dir, "build.bin", size)
	s := store(t)
	if _, err := s.Before(ctx, Target{Agent: "a", Call: "c", Cwd: dir, WholeTree: true, Command: "go test ./..."}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "out.txt", "the call's change\n") // build.bin it leaves as it was
	if _, _, err := s.After(ctx, "a", "c"); err != nil {
		t.Fatal(err)
	}
	if got := diskBytes(filepath.Join(s.Dir, "a", "c")); got > size*5/4 {
		t.Fatalf("the call's before and after snapshots take %d bytes for a %d-byte untracked file: want about one copy\n%s", got, size,
			run(t, s.Dir, "find", ".", "-type", "f", "-size", "+100k"))
	}
	writeRandom(t, dir, "build.bin", 1<<10)
	if _, err := s.Undo(ctx, "a", "c", Call{Cwd: dir, Shell: true}, true); err != nil {
		t.Fatalf("undo from the packed snapshot: %v", err)
	}
	if got := read(t, dir, "out.txt"); got != "<absent>" {
		t.Fatalf("undo left out.txt: %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "build.bin")); err != nil || fi.Size() != 1<<10 {
		t.Fatalf("undo touched build.bin, which the call left as it was: %v (%v)", fi, err)
	}
}

func TestTheOldestSnapshotsGoWhenTheStoreIsOverItsSize(t *testing.T) {
	ctx := context.Background()
	dir := repo(t)
	const size = 2 << 20
	s := store(t)
	s.Limits.MaxTotalBytes = 3 << 20
	calls := []string{"first", "second", "third"}
	for i, call := range calls {
		writeRandom(t, dir, "build.bin", size) // new content: nothing shared
		if _, err := s.Before(ctx, Target{Agent: "a", Call: call, Cwd: dir, WholeTree: true, Command: "make"}); err != nil {
			t.Fatal(err)
		}
		// Older calls' manifests are older, whatever the clock's grain.
		at := time.Now().Add(time.Duration(i-len(calls)) * time.Hour)
		if err := os.Chtimes(filepath.Join(s.Dir, "a", call, "manifest.json"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		call string
		kept bool
	}{{"first", false}, {"second", true}, {"third", true}} {
		if _, err := os.Stat(filepath.Join(s.Dir, "a", tt.call)); (err == nil) != tt.kept {
			t.Errorf("snapshot %s kept: %v, want %v", tt.call, err == nil, tt.kept)
		}
	}
}
