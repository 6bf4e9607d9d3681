package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLaterChanges: undo would lose changes made after the call; it is
// refused unless forced.
var ErrLaterChanges = errors.New("later changes would be lost")

// ErrNoSnapshot: no snapshot of that call is kept here.
var ErrNoSnapshot = errors.New("no snapshot")

// Result is what an undo put back.
type Result struct {
	Kind, Root, Ref string
	// Paths are the paths restored (or deleted: the call created them).
	Paths  []string
	Forced bool
}

// Call is what the audit trail recorded about the call airlock approved:
// undo acts only within it. The manifest lies in the hook's state dir, which
// the agent may be able to write, so its root, its paths and its saved
// copies are checked against the call, never taken on their own word.
type Call struct {
	// Cwd is the working directory the call was approved with ("" when the
	// trail recorded none).
	Cwd string
	// Paths are the files an edit or write tool named, as the agent wrote
	// them (absolute, or relative to Cwd).
	Paths []string
	// Shell: a shell command, which may change anything under its work tree.
	Shell bool
}

// Undo puts back the files the call changed as they were before it. It
// refuses (ErrLaterChanges, with the paths in the sentence) when a file
// the call changed differs now from what the call left, or when what the
// call left is not known, unless force. The snapshot must be of call's work
// tree (the git work tree holding its recorded cwd, or that cwd), and only
// files call named (any file under the work tree for a shell command) are
// written, through real directories; without a recorded cwd undo refuses
// unless force.
func (s Store) Undo(ctx context.Context, agent, call string, rec Call, force bool) (Result, error) {
	lim := s.limits()
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	dir, err := s.dirOf(agent, call)
	if err != nil {
		return Result{}, err
	}
	m, err := readManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return Result{}, fmt.Errorf("%w of call %s/%s in %s: airlock's hook keeps snapshots on the machine the agent ran on (run undo there, with the hook's --state-dir if it set one), only of calls that change files, and for %s", ErrNoSnapshot, agent, call, s.Dir, lim.MaxAge)
	}
	if err != nil {
		return Result{}, err
	}
	if m.Undone {
		return Result{}, fmt.Errorf("call %s/%s was undone already", agent, call)
	}
	root, err := realDir(m.Root)
	if err != nil || root != m.Root {
		return Result{}, fmt.Errorf("the work tree of call %s/%s (%s) is gone or moved: nothing was restored", agent, call, m.Root)
	}
	named, err := s.callScope(ctx, agent, call, m, dir, rec, force, lim)
	if err != nil {
		return Result{}, err
	}
	res := Result{Kind: m.Kind, Root: root, Forced: force}
	switch m.Kind {
	case KindGit:
		res.Ref = refOf(agent, call)
		if m.Objects != "" {
			res.Ref = m.Objects
		}
		res.Paths, err = s.undoGit(ctx, m, dir, named, force, lim)
	case KindCopy:
		res.Ref = dir
		res.Paths, err = undoCopy(m, dir, named, force, lim)
	default:
		err = fmt.Errorf("snapshot of %s/%s: unknown kind %q", agent, call, m.Kind)
	}
	if err != nil {
		return res, err
	}
	m.Undone = true
	return res, writeManifest(dir, m)
}

// callScope checks the manifest against the recorded call: its work tree
// must be the call's, and (for an edit or write tool) every path it holds
// one the call named. It returns the paths the call named, relative to the
// work tree, or nil for a shell command (any path under the work tree).
func (s Store) callScope(ctx context.Context, agent, call string, m manifest, dir string, rec Call, force bool, lim Limits) (map[string]bool, error) {
	forged := func(what string) error {
		return fmt.Errorf("the snapshot of call %s/%s %s: its manifest (%s) was changed after airlock's hook wrote it, or the work tree moved, so nothing was restored. Look at what the call did in the audit trail and put files back by hand", agent, call, what, filepath.Join(dir, "manifest.json"))
	}
	if m.Kind == KindGit && m.Objects != "" {
		if own, err := filepath.Abs(filepath.Join(dir, "objects")); err != nil || m.Objects != own {
			return nil, forged(fmt.Sprintf("keeps its commits in %s, not in its own directory", m.Objects))
		}
	}
	cwd := m.Root
	if rec.Cwd == "" {
		if !force {
			return nil, fmt.Errorf("the audit trail records no working directory for call %s/%s, so airlock cannot check that its snapshot's work tree (%s) is the one the call ran in; nothing was restored. Run again with --force to put the snapshot's files back in %s anyway", agent, call, m.Root, m.Root)
		}
	} else {
		real, err := realDir(rec.Cwd)
		if err != nil {
			return nil, fmt.Errorf("the working directory call %s/%s was approved with (%s) is gone or moved: nothing was restored", agent, call, rec.Cwd)
		}
		want := real
		if m.Kind == KindGit {
			if top, ok := gitRoot(ctx, real); ok {
				want = top
			}
		}
		if m.Root != want {
			return nil, forged(fmt.Sprintf("names the work tree %s, but the call was approved in %s", m.Root, want))
		}
		cwd = real
	}
	if rec.Shell {
		return nil, nil
	}
	if m.WholeTree {
		return nil, forged("covers the whole work tree, but the call was an edit of named files")
	}
	var n notes
	named := map[string]bool{}
	for _, p := range namedPaths(m.Root, cwd, rec.Paths, lim, &n) {
		named[p] = true
	}
	held := m.Paths
	for _, e := range m.Entries {
		held = append(held, e.Path)
	}
	for _, p := range held {
		if !named[p] {
			return nil, forged(fmt.Sprintf("holds %q, a file the call did not name", cut(p)))
		}
	}
	return named, nil
}

// validRel checks a path the manifest holds: relative, clean, inside.
func validRel(root, rel string) error {
	if rel == "" || filepath.IsAbs(rel) || strings.ContainsRune(rel, 0) || filepath.ToSlash(filepath.Clean(filepath.FromSlash(rel))) != rel ||
		rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%q is not a path inside the work tree: nothing was restored", rel)
	}
	return realParents(root, rel)
}

func (s Store) undoGit(ctx context.Context, m manifest, dir string, named map[string]bool, force bool, lim Limits) ([]string, error) {
	for _, p := range m.Paths {
		if err := validRel(m.Root, p); err != nil {
			return nil, err
		}
	}
	now, err := gitCapture(ctx, m.Root, m.Objects, m.Paths, m.WholeTree, dir, lim)
	if err != nil {
		return nil, err
	}
	var changed []string
	if m.After == "" {
		// What the call left is unknown: any difference may be a later change.
		if changed, err = gitChanged(ctx, m.Root, m.Objects, m.Before, now.tree, m.Paths, m.WholeTree); err != nil {
			return nil, err
		}
		if len(changed) > 0 && !force {
			return nil, fmt.Errorf("%w: airlock does not know what the call left (its post-tool hook recorded nothing), so it cannot tell the call's changes from later ones in %s; run again with --force to put these files back as they were before the call", ErrLaterChanges, list(changed))
		}
	} else {
		if changed, err = gitChanged(ctx, m.Root, m.Objects, m.Before, m.After, m.Paths, m.WholeTree); err != nil {
			return nil, err
		}
		later, err := gitChanged(ctx, m.Root, m.Objects, m.After, now.tree, changed, false)
		if err != nil {
			return nil, err
		}
		// The tree of now leaves out what git ignores or the bound drops, as
		// the tree of after may have: read the files on disk too, so a later
		// change to such a file is never erased unasked.
		onDisk, err := gitDiffersOnDisk(ctx, m.Root, m.Objects, m.After, changed)
		if err != nil {
			return nil, err
		}
		for _, p := range onDisk {
			if !slices.Contains(later, p) {
				later = append(later, p)
			}
		}
		if len(later) > 0 && !force {
			look := "git diff " + m.After[:min(12, len(m.After))]
			if m.Objects != "" {
				look = "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + m.Objects + " " + look
			}
			return nil, fmt.Errorf("%w: %s changed after the call; undoing it would lose those changes. Look at them (%s), then run again with --force to put the files back as they were before the call", ErrLaterChanges, list(later), look)
		}
	}
	for _, p := range changed {
		if err := validRel(m.Root, p); err != nil {
			return nil, err
		}
		if named != nil && !named[p] {
			return nil, fmt.Errorf("%q is not a file the call named: nothing was restored", cut(p))
		}
	}
	return changed, gitRestore(ctx, m.Root, m.Objects, m.Before, changed)
}

func undoCopy(m manifest, dir string, named map[string]bool, force bool, lim Limits) ([]string, error) {
	var changed, later []string
	idx := map[string]int{}
	for i, e := range m.Entries {
		if err := validRel(m.Root, e.Path); err != nil {
			return nil, err
		}
		if named != nil && !named[e.Path] {
			return nil, fmt.Errorf("%q is not a file the call named: nothing was restored", cut(e.Path))
		}
		now, err := stateOf(m.Root, e.Path)
		if err != nil {
			return nil, err
		}
		switch {
		case e.After == nil:
			if now != e.Before {
				changed, later = append(changed, e.Path), append(later, e.Path)
			}
		case *e.After != e.Before:
			changed = append(changed, e.Path)
			if now != *e.After {
				later = append(later, e.Path)
			}
		}
		idx[e.Path] = i
	}
	if len(later) > 0 && !force {
		return nil, fmt.Errorf("%w: %s changed after the call (or airlock does not know what the call left); undoing it would lose those changes. Run again with --force to put the files back as they were before the call", ErrLaterChanges, list(later))
	}
	// Every saved copy is read and checked before any file is written, so
	// a bad copy leaves the work tree as it was.
	data := map[string][]byte{}
	for _, p := range changed {
		e := m.Entries[idx[p]]
		if !e.Before.Exists {
			continue
		}
		b, err := readSaved(dir, "b"+strconv.Itoa(idx[p]), lim.MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("the saved copy of %s: %w; nothing was restored", p, err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != e.Before.Digest {
			return nil, fmt.Errorf("the saved copy of %s is not the file the hook saved (its digest differs): nothing was restored", p)
		}
		data[p] = b
	}
	for _, p := range changed {
		e := m.Entries[idx[p]]
		if !e.Before.Exists {
			if err := removeInside(m.Root, p); err != nil {
				return nil, err
			}
			continue
		}
		if err := writeInside(m.Root, p, data[p], restoredMode(m.Root, p, e.Before.Mode), false); err != nil {
			return nil, err
		}
	}
	return changed, nil
}

// restoredMode is the permission a restored file gets: what the manifest
// says it had, only the permission bits (never set-id or sticky), and no
// wider than the file has now when it is there (the process umask narrows
// a file created anew).
func restoredMode(root, rel string, before os.FileMode) os.FileMode {
	mode := before.Perm()
	if info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel))); err == nil && info.Mode().IsRegular() {
		mode &= info.Mode().Perm()
	}
	return mode
}

// readSaved reads the saved copy name of the snapshot in dir: opened
// relative to dir without following a symbolic link there (nor at dir's
// last two components, the agent's and the call's directories), a regular
// file with no other link to it, at most max bytes.
func readSaved(dir, name string, max int64) ([]byte, error) {
	parent, call := filepath.Split(filepath.Clean(dir))
	fd, err := unix.Open(filepath.Dir(filepath.Clean(parent)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the snapshots directory: %w", err)
	}
	for _, part := range []string{filepath.Base(filepath.Clean(parent)), call, name} {
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if part != name {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK // a FIFO planted there must not hang undo
		}
		next, err := unix.Openat(fd, part, flags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("%s is not a file airlock saved (%w)", part, err)
		}
		fd = next
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, name))
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return nil, errors.New("not a regular file of its own (a link or a device): not a copy airlock saved")
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than the %d MiB a copy snapshot holds", max>>20)
	}
	return b, nil
}

// list names paths for a sentence, bounded.
func list(paths []string) string {
	q := make([]string, 0, min(len(paths), 5))
	for _, p := range paths[:min(len(paths), 5)] {
		q = append(q, strconv.Quote(cut(p)))
	}
	s := strings.Join(q, ", ")
	if len(paths) > 5 {
		s += fmt.Sprintf(" and %d more", len(paths)-5)
	}
	return s
}

// gitDiffersOnDisk lists the paths whose file on disk is not what commit
// holds (present, absent, content, link target or executable bit).
func gitDiffersOnDisk(ctx context.Context, root, objects, commit string, paths []string) ([]string, error) {
	entries, err := gitEntries(ctx, root, objects, commit, paths)
	if err != nil {
		return nil, err
	}
	var differ []string
	// Regular files are hashed together after the loop, in one git process;
	// blobs holds what commit has for each.
	var files []string
	blobs := map[string]string{}
	for _, p := range paths {
		if err := validRel(root, p); err != nil {
			return nil, err
		}
		e, held := entries[p]
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		exists := err == nil
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		same := !held && !exists
		if held && exists {
			switch {
			case e.mode == "160000":
				same = true // a submodule: undo leaves it alone
			case e.mode == "120000" && info.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(filepath.Join(root, filepath.FromSlash(p)))
				blob, berr := git(ctx, root, objects, "", nil, "cat-file", "blob", e.oid)
				same = err == nil && berr == nil && target == string(blob)
			case (e.mode == "100644" || e.mode == "100755") && info.Mode().IsRegular() && (info.Mode()&0o100 != 0) == (e.mode == "100755"):
				files, blobs[p] = append(files, p), e.oid
				continue
			}
		}
		if !same {
			differ = append(differ, p)
		}
	}
	for i, oid := range hashFiles(ctx, root, files) {
		if oid != blobs[files[i]] {
			differ = append(differ, files[i])
		}
	}
	return differ, nil
}

// hashFiles is the blob id of each file (paths relative to root) as git
// hash-object --no-filters makes it; "" for a file that could not be
// hashed. One git process hashes them all (--stdin-paths) rather than one
// per file; should it fail (a file removed or unreadable meanwhile), each
// file is hashed alone, so that one file's failure is only its own.
func hashFiles(ctx context.Context, root string, paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(cQuote(p))
		in.WriteByte('\n')
	}
	if out, err := git(ctx, root, "", "", []byte(in.String()), "hash-object", "--no-filters", "--stdin-paths"); err == nil {
		if oids := strings.Fields(string(out)); len(oids) == len(paths) {
			return oids
		}
	}
	oids := make([]string, len(paths))
	for i, p := range paths {
		if out, err := git(ctx, root, "", "", nil, "hash-object", "--no-filters", "--", p); err == nil {
			oids[i] = strings.TrimSpace(string(out))
		}
	}
	return oids
}

// cQuote is p as a line of git's --stdin-paths: as it is, unless it holds
// a line break or control character, or starts with a double quote or ends
// with white space, then quoted in C style (which git unquotes).
func cQuote(p string) string {
	if p != "" && p[0] != '"' && !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) && strings.TrimRight(p, " \t") == p {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
