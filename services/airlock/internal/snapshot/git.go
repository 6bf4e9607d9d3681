package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// git runs git in root with the snapshot's own object directory (when
// objects is not empty: see objectDir), the temporary index (when index is
// not empty), literal pathspecs (an agent's "*" names a file called "*"),
// no prompts, no hooks and no fsmonitor program, and a fixed identity for
// commits.
func git(ctx context.Context, root, objects, index string, stdin []byte, args ...string) ([]byte, error) {
	full := append([]string{"-c", "core.fsmonitor=false", "-c", "core.hooksPath=" + os.DevNull, "-c", "core.quotePath=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	if args[0] != "check-ignore" { // it takes paths, not pathspecs, and refuses the setting
		cmd.Env = append(cmd.Env, "GIT_LITERAL_PATHSPECS=1")
	}
	cmd.Env = append(cmd.Env, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0",
		"GIT_AUTHOR_NAME=airlock", "GIT_AUTHOR_EMAIL=airlock@localhost", "GIT_COMMITTER_NAME=airlock", "GIT_COMMITTER_EMAIL=airlock@localhost")
	if index != "" {
		cmd.Env = append(cmd.Env, "GIT_INDEX_FILE="+index)
	}
	if objects != "" {
		cmd.Env = append(cmd.Env, "GIT_OBJECT_DIRECTORY="+objects)
	}
	if args[0] != "config" { // add, and write-tree refreshing racy entries, run clean filters
		off, err := filtersOff(ctx, root)
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, off...)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// filtersOff is the environment that turns off every filter driver the
// repository's configuration names: a clean filter is a command, and the
// agent writes .gitattributes and .git/config, so `git add` would run the
// agent's program, ungated, in the hook and in the person's `airlock undo`.
// Without filters the snapshot holds the bytes on disk, which is what undo
// writes back.
func filtersOff(ctx context.Context, root string) ([]string, error) {
	out, err := git(ctx, root, "", "", nil, "config", "-z", "--get-regexp", `^filter\.`)
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: none configured
		return nil, err
	}
	var drivers []string
	for _, kv := range splitNul(out) {
		key, _, _ := strings.Cut(kv, "\n")
		if i := strings.LastIndexByte(key, '.'); i > len("filter.") && !slices.Contains(drivers, key[len("filter."):i]) {
			drivers = append(drivers, key[len("filter."):i])
		}
	}
	n := 0
	if c, err := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT")); err == nil && c > 0 {
		n = c // keep the settings the environment makes already
	}
	var env []string
	for _, d := range drivers {
		for _, kv := range [][2]string{{"clean", ""}, {"smudge", ""}, {"process", ""}, {"required", "false"}} {
			env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=filter.%s.%s", n, d, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, kv[1]))
			n++
		}
	}
	if len(env) > 0 {
		env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", n))
	}
	return env, nil
}

// gitRoot is the top level of the git work tree holding dir.
func gitRoot(ctx context.Context, dir string) (string, bool) {
	out, err := git(ctx, dir, "", "", nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", false
	}
	root, err := realDir(strings.TrimSpace(string(out)))
	return root, err == nil
}

// nul joins paths for --pathspec-from-file / --stdin with -z.
func nul(paths []string) []byte { return []byte(strings.Join(paths, "\x00") + "\x00") }

func splitNul(b []byte) []string {
	var out []string
	for _, s := range strings.Split(string(b), "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// captured is a tree of the work tree's state and what was left out.
type captured struct {
	tree  string
	notes notes
}

// gitCapture writes a tree of the work tree as it is now: HEAD's tree with
// paths (or, wholeTree, every tracked and untracked-but-not-ignored file)
// as they are on disk, through a temporary index in dir.
func gitCapture(ctx context.Context, root, objects string, paths []string, wholeTree bool, dir string, lim Limits) (captured, error) {
	var c captured
	idx, err := os.CreateTemp(dir, "index-")
	if err != nil {
		return c, fmt.Errorf("temporary index: %w", err)
	}
	index := idx.Name()
	idx.Close()
	os.Remove(index) // git writes it afresh
	defer os.Remove(index)
	if _, err := git(ctx, root, objects, "", nil, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		_, err = git(ctx, root, objects, index, nil, "read-tree", "HEAD")
		if err != nil {
			return c, err
		}
	} else if _, err := git(ctx, root, objects, index, nil, "read-tree", "--empty"); err != nil {
		return c, err
	}
	if wholeTree {
		if _, err := git(ctx, root, objects, index, nil, "add", "-u"); err != nil {
			return c, err
		}
		out, err := git(ctx, root, objects, index, nil, "ls-files", "-z", "-o", "--exclude-standard")
		if err != nil {
			return c, err
		}
		paths = boundUntracked(root, splitNul(out), lim, &c.notes)
	} else if len(paths) > 0 {
		paths, err = notIgnored(ctx, root, objects, index, paths, &c.notes)
		if err != nil {
			return c, err
		}
		paths, err = onDiskOrTracked(ctx, root, objects, index, paths)
		if err != nil {
			return c, err
		}
	}
	if len(paths) > 0 {
		if _, err := git(ctx, root, objects, index, nul(paths), "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return c, err
		}
	}
	out, err := git(ctx, root, objects, index, nil, "write-tree")
	if err != nil {
		return c, err
	}
	c.tree = strings.TrimSpace(string(out))
	return c, nil
}

// boundUntracked keeps untracked files while their sizes add up to at most
// lim.MaxBytes; the others are left out of the snapshot, and said so.
func boundUntracked(root string, paths []string, lim Limits, n *notes) []string {
	var kept []string
	var total int64
	left := 0
	for _, p := range paths {
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			continue
		}
		if total+info.Size() > lim.MaxBytes {
			left++
			continue
		}
		total += info.Size()
		kept = append(kept, p)
	}
	if left > 0 {
		n.add("%d untracked files past the %d MiB bound of untracked files were not saved", left, lim.MaxBytes>>20)
	}
	return kept
}

// notIgnored drops the paths git ignores (and that HEAD does not track):
// a snapshot takes untracked files only when they are not ignored.
func notIgnored(ctx context.Context, root, objects, index string, paths []string, n *notes) ([]string, error) {
	out, err := git(ctx, root, objects, index, nul(paths), "check-ignore", "-z", "--stdin")
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: none ignored
		return nil, err
	}
	ignored := splitNul(out)
	var kept []string
	for _, p := range paths {
		if slices.Contains(ignored, p) {
			n.add("%q not saved: git ignores it", cut(p))
			continue
		}
		kept = append(kept, p)
	}
	return kept, nil
}

// onDiskOrTracked keeps the paths git can add: on disk, or tracked (then
// their absence is recorded). A path that is neither is absent in the
// snapshot as it is in HEAD's tree.
func onDiskOrTracked(ctx context.Context, root, objects, index string, paths []string) ([]string, error) {
	out, err := git(ctx, root, objects, index, nil, append([]string{"ls-files", "-z", "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	tracked := splitNul(out)
	var kept []string
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p))); err == nil || slices.Contains(tracked, p) {
			kept = append(kept, p)
		}
	}
	return kept, nil
}

// gitCommit makes a commit of tree (parent HEAD when there is one) in the
// snapshot's object directory; nothing in the repository moves, and no ref
// names it: the manifest does. Then it keeps the commit's objects there.
func gitCommit(ctx context.Context, root, objects, tree, msg string) (string, error) {
	args := []string{"commit-tree", tree, "-m", msg}
	if head, err := git(ctx, root, objects, "", nil, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		args = append(args, "-p", strings.TrimSpace(string(head)))
	}
	out, err := git(ctx, root, objects, "", nil, args...)
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(out))
	if objects != "" {
		if err := keepObjects(ctx, root, objects, commit); err != nil {
			return "", err
		}
	}
	return commit, nil
}

// keepObjects copies into the snapshot's object directory every object of
// commit that no ref of the repository reaches. git add writes nothing
// for a file whose blob the repository already has (staged, say), so the
// snapshot borrows it through the alternates; once the index moves on,
// git gc --prune would delete it and undo could not read it. Only an object
// a ref reaches stays borrowed: a history rewrite and a prune can still
// lose it.
//
// Each object is stored once (R9 F7): one the directory's packs hold
// already (the before commit's, for the after one) is left out, so an
// after-state that left a large untracked file as it was costs nothing
// more; and the loose copies git wrote are removed once packed
// (prune-packed), where they used to double every snapshot.
func keepObjects(ctx context.Context, root, objects, commit string) error {
	all, err := git(ctx, root, objects, "", nil, "rev-list", "--objects", commit, "--not", "--all")
	if err != nil {
		return fmt.Errorf("list the snapshot's objects: %w", err)
	}
	packed, err := packedObjects(ctx, root, objects)
	if err != nil {
		return err
	}
	var list []byte
	for _, line := range bytes.SplitAfter(all, []byte("\n")) {
		oid, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if len(oid) > 0 && !packed[string(oid)] {
			list = append(list, line...)
		}
	}
	if len(list) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(objects, "pack"), 0o700); err != nil {
		return fmt.Errorf("keep the snapshot's objects: %w", err)
	}
	if _, err := git(ctx, root, objects, "", list, "pack-objects", "-q", filepath.Join(objects, "pack", "pack")); err != nil {
		return fmt.Errorf("keep the snapshot's objects: %w", err)
	}
	if _, err := git(ctx, root, objects, "", nil, "prune-packed", "-q"); err != nil {
		return fmt.Errorf("remove the snapshot's loose objects once packed: %w", err)
	}
	return nil
}

// packedObjects are the ids of the objects in the packs of the snapshot's
// own object directory (not the repository's, reached through alternates).
func packedObjects(ctx context.Context, root, objects string) (map[string]bool, error) {
	idxs, err := filepath.Glob(filepath.Join(objects, "pack", "*.idx"))
	if err != nil {
		return nil, fmt.Errorf("list the snapshot's packs: %w", err)
	}
	packed := map[string]bool{}
	for _, idx := range idxs {
		b, err := os.ReadFile(idx)
		if err != nil {
			return nil, fmt.Errorf("read the snapshot's pack index: %w", err)
		}
		out, err := git(ctx, root, objects, "", b, "show-index")
		if err != nil {
			return nil, fmt.Errorf("read the snapshot's pack index %s: %w", idx, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				packed[f[1]] = true // "<offset> <oid> (<crc>)"
			}
		}
	}
	return packed, nil
}

// objectDir makes the snapshot's own object directory in dir: git writes
// the snapshot's blobs, trees and commits there and reads the repository's
// objects through its alternates. The repository gains no object and no
// ref, so nothing run in it (git show, git log -p --all, a push of every
// ref) reaches what a snapshot saved, such as an untracked key.
func objectDir(ctx context.Context, root, dir string) (string, error) {
	out, err := git(ctx, root, "", "", nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	objects, err := filepath.Abs(filepath.Join(dir, "objects"))
	if err != nil {
		return "", fmt.Errorf("snapshot object directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(objects, "info"), 0o700); err != nil {
		return "", fmt.Errorf("snapshot object directory: %w", err)
	}
	alternates := filepath.Join(strings.TrimSpace(string(out)), "objects") + "\n"
	if err := os.WriteFile(filepath.Join(objects, "info", "alternates"), []byte(alternates), 0o600); err != nil {
		return "", fmt.Errorf("snapshot object directory: %w", err)
	}
	return objects, nil
}

// gitBefore saves the state before the call.
func (s Store) gitBefore(ctx context.Context, root, cwd string, t Target, dir string, lim Limits) (manifest, error) {
	m := manifest{Kind: KindGit, Root: root, WholeTree: t.WholeTree}
	var n notes
	if !t.WholeTree {
		m.Paths = namedPaths(root, cwd, t.Paths, lim, &n)
	}
	var err error
	if m.Objects, err = objectDir(ctx, root, dir); err != nil {
		return m, err
	}
	c, err := gitCapture(ctx, root, m.Objects, m.Paths, m.WholeTree, dir, lim)
	if err != nil {
		return m, err
	}
	n.lines, n.more = append(n.lines, c.notes.lines...), n.more+c.notes.more
	if m.Before, err = gitCommit(ctx, root, m.Objects, c.tree, "airlock: state before call "+t.Agent+"/"+t.Call); err != nil {
		return m, err
	}
	m.Note = n.String()
	return m, nil
}

// gitChanged lists the paths that differ between two trees (limited to
// paths unless wholeTree).
func gitChanged(ctx context.Context, root, objects, a, b string, paths []string, wholeTree bool) ([]string, error) {
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b}
	if !wholeTree {
		if len(paths) == 0 {
			return nil, nil
		}
		args = append(append(args, "--"), paths...)
	}
	out, err := git(ctx, root, objects, "", nil, args...)
	if err != nil {
		return nil, err
	}
	return splitNul(out), nil
}

// gitEntry is one path of a tree: its mode and blob.
type gitEntry struct{ mode, oid string }

// gitEntries reads the entries of paths in commit.
func gitEntries(ctx context.Context, root, objects, commit string, paths []string) (map[string]gitEntry, error) {
	out, err := git(ctx, root, objects, "", nil, append([]string{"ls-tree", "-r", "-z", "--full-tree", commit, "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	m := map[string]gitEntry{}
	for _, line := range splitNul(out) {
		meta, path, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		m[path] = gitEntry{mode: f[0], oid: f[2]}
	}
	return m, nil
}

// gitRestore puts each path back as it is in commit (deleting those it
// does not hold), inside root only.
func gitRestore(ctx context.Context, root, objects, commit string, paths []string) error {
	entries, err := gitEntries(ctx, root, objects, commit, paths)
	if err != nil {
		return err
	}
	for _, p := range paths {
		e, ok := entries[p]
		if !ok {
			if err := removeInside(root, p); err != nil {
				return err
			}
			continue
		}
		if e.mode == "160000" { // a submodule: not airlock's to rewrite
			continue
		}
		data, err := git(ctx, root, objects, "", nil, "cat-file", "blob", e.oid)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if e.mode == "100755" {
			mode = 0o755
		}
		if err := writeInside(root, p, data, mode, e.mode == "120000"); err != nil {
			return err
		}
	}
	return nil
}
