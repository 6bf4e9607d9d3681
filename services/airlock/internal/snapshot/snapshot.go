// Package snapshot saves what a coding agent's tool call may change just
// before `airlock hook` answers allow, records what the call left, and puts
// the saved state back for `airlock undo`.
//
// In a git work tree a snapshot is a commit built with a temporary index
// (GIT_INDEX_FILE) and `git commit-tree`, written to the snapshot's own
// object directory in the hook's state directory (GIT_OBJECT_DIRECTORY,
// reading the repository's objects through its alternates): the user's
// index, branch and HEAD never change, and the repository gains no object
// and no ref, so an untracked file a snapshot saved (a key, a .env) is
// never readable through the repository's git (git show, git log -p --all,
// a push). Elsewhere it is a copy of the files the call names in the hook's
// state directory, bounded in size.
//
// Every path comes from the agent. A path is saved or restored only when it
// lies inside the work tree through real directories: `..`, an absolute path
// elsewhere, or a parent directory that is a symbolic link is left out (and
// the snapshot's note says so), so no file outside the work tree is ever read
// into a snapshot or written by an undo.
package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ids"
)

// Kinds of snapshot.
const (
	KindGit  = "git"
	KindCopy = "copy"
)

// Limits bound what a snapshot holds and how long taking it may take.
type Limits struct {
	// MaxBytes bounds the bytes copied outside git, and the untracked files
	// added to a whole-tree git snapshot; files past it are left out.
	MaxBytes int64
	// MaxPaths bounds the paths one call may name.
	MaxPaths int
	// Timeout bounds each snapshot, capture and undo.
	Timeout time.Duration
	// MaxAge is how long a snapshot is kept: older ones (their copies and
	// object directories) are removed when the next snapshot is taken.
	MaxAge time.Duration
	// MaxTotalBytes bounds the store's size on disk: when the next snapshot
	// is taken, the oldest ones are removed until the rest fit (R9 F7: a
	// granted command run all day kept gigabytes for a week).
	MaxTotalBytes int64
}

// DefaultLimits are the hook's with airlock's default configuration
// (hooks.snapshots: 64 MiB, kept 7 days and 1 GiB in all), 1,000 paths
// and 20 s.
var DefaultLimits = LimitsOf(config.Default().Hooks.Snapshots)

// LimitsOf are the limits hooks.snapshots sets, with 1,000 paths and 20 s.
func LimitsOf(c config.HookSnapshots) Limits {
	return Limits{MaxBytes: c.MaxBytes, MaxPaths: 1000, Timeout: 20 * time.Second, MaxAge: c.Keep, MaxTotalBytes: c.MaxTotalBytes}
}

// maxListed bounds the paths a Snapshot record lists (the rest are counted).
const maxListed = 50

// maxPathBytes bounds one path an agent names.
const maxPathBytes = 4096

// Target is what a call may change.
type Target struct {
	Agent, Call string
	// Cwd is the call's working directory (the hook payload's cwd).
	Cwd string
	// Paths are the files the call names, as the agent wrote them.
	Paths []string
	// WholeTree: the call (a shell command) may change anything under the
	// work tree. In a git work tree the whole tree is saved; elsewhere only
	// Paths (the files the command names).
	WholeTree bool
	// Command is the shell command (WholeTree): outside git, the files its
	// words name are saved.
	Command string
}

// Store keeps snapshots: git ones in the work tree's repository, their
// manifests and copies under Dir.
type Store struct {
	// Dir is the snapshots directory (the hook's state dir + "/snapshots").
	Dir    string
	Limits Limits
}

// manifest is what the hook wrote about one call's snapshot. It lies in
// the hook's state dir, which the agent may be able to write: undo trusts it
// only within the call the audit trail recorded (Call), never the agent's
// report of the snapshot in the trail.
type manifest struct {
	Kind      string   `json:"kind"`
	Root      string   `json:"root"`
	Paths     []string `json:"paths,omitempty"`
	WholeTree bool     `json:"whole_tree,omitempty"`
	Before    string   `json:"before,omitempty"` // git commits
	After     string   `json:"after,omitempty"`
	// Objects is the git snapshot's own object directory (objectDir); ""
	// in a snapshot taken before airlock kept them apart, whose commits
	// are on hidden refs of the repository.
	Objects string  `json:"objects,omitempty"`
	Entries []entry `json:"entries,omitempty"` // copies
	Note    string  `json:"note,omitempty"`
	// Recorded: what the call left was recorded (once: a later post-tool
	// report of the same call would otherwise take a person's later work
	// for the call's, and undo would erase it without asking).
	Recorded bool `json:"recorded,omitempty"`
	Undone   bool `json:"undone,omitempty"`
}

// entry is one file of a copy snapshot; its copy is named by its index,
// never by the agent's path.
type entry struct {
	Path   string `json:"path"`
	Before state  `json:"before"`
	After  *state `json:"after,omitempty"`
}

// state is a file's content as a digest: absent, or present with a mode.
type state struct {
	Exists bool        `json:"exists"`
	Digest string      `json:"digest,omitempty"`
	Mode   os.FileMode `json:"mode,omitempty"`
}

func (s Store) dirOf(agent, call string) (string, error) {
	if err := ids.ValidateAgent(agent); err != nil {
		return "", err
	}
	if err := ids.Validate("call id", call); err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, agent, call), nil
}

func (s Store) limits() Limits {
	l := s.Limits
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxPaths <= 0 {
		l.MaxPaths = DefaultLimits.MaxPaths
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultLimits.Timeout
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultLimits.MaxAge
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultLimits.MaxTotalBytes
	}
	return l
}

// Before saves what t may change and returns the record the call carries.
// It never changes the user's index, branch, HEAD or files.
func (s Store) Before(ctx context.Context, t Target) (*airlockv1.Snapshot, error) {
	lim := s.limits()
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	dir, err := s.dirOf(t.Agent, t.Call)
	if err != nil {
		return nil, err
	}
	cwd, err := realDir(t.Cwd)
	if err != nil {
		return nil, fmt.Errorf("the call's working directory: %w", err)
	}
	s.prune(ctx, lim, time.Now())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot directory: %w", err)
	}
	// The first snapshot of a call stands: the same tool-use id sent again
	// (a replay) must not replace the state before the call with a later one.
	if m, err := readManifest(dir); err == nil {
		return m.record(refOf(t.Agent, t.Call), dir), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var m manifest
	if root, ok := gitRoot(ctx, cwd); ok {
		m, err = s.gitBefore(ctx, root, cwd, t, dir, lim)
	} else {
		m, err = s.copyBefore(cwd, t, dir, lim)
	}
	if err != nil {
		return nil, err
	}
	if err := writeManifest(dir, m); err != nil {
		return nil, err
	}
	return m.record(refOf(t.Agent, t.Call), dir), nil
}

// After records what the call left, for the report and for undo's check
// that nothing changed since. ok is false when no snapshot was taken.
func (s Store) After(ctx context.Context, agent, call string) (rec *airlockv1.Snapshot, ok bool, err error) {
	lim := s.limits()
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	dir, err := s.dirOf(agent, call)
	if err != nil {
		return nil, false, err
	}
	m, err := readManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if m.Recorded || m.Undone {
		return m.record(refOf(agent, call), dir), true, nil
	}
	switch m.Kind {
	case KindGit:
		tree, err := gitCapture(ctx, m.Root, m.Objects, m.Paths, m.WholeTree, dir, lim)
		if err != nil {
			return nil, true, err
		}
		if m.After, err = gitCommit(ctx, m.Root, m.Objects, tree.tree, "airlock: state after call "+agent+"/"+call); err != nil {
			return nil, true, err
		}
	case KindCopy:
		for i := range m.Entries {
			st, err := stateOf(m.Root, m.Entries[i].Path)
			if err != nil {
				return nil, true, err
			}
			m.Entries[i].After = &st
		}
	default:
		return nil, true, fmt.Errorf("snapshot of %s/%s: unknown kind %q", agent, call, m.Kind)
	}
	m.Recorded = true
	if err := writeManifest(dir, m); err != nil {
		return nil, true, err
	}
	return m.record(refOf(agent, call), dir), true, nil
}

// record is the Snapshot a call carries: bounded lists.
func (m manifest) record(ref, dir string) *airlockv1.Snapshot {
	r := &airlockv1.Snapshot{Kind: m.Kind, Root: m.Root, Before: m.Before, After: m.After, WholeTree: m.WholeTree, Note: m.Note}
	paths := m.Paths
	switch {
	case m.Kind == KindGit && m.Objects != "":
		r.Ref = m.Objects
	case m.Kind == KindGit:
		r.Ref = ref
	default:
		r.Ref = dir
		paths = nil
		for _, e := range m.Entries {
			paths = append(paths, e.Path)
		}
	}
	if len(paths) > maxListed {
		r.More = uint32(len(paths) - maxListed)
		paths = paths[:maxListed]
	}
	r.Paths = paths
	return r
}

// refOf is the hidden ref of a call's snapshot as airlock kept them before
// it kept their objects apart (agent and call are validated ids:
// [A-Za-z0-9_-], so the ref is well formed).
func refOf(agent, call string) string { return "refs/airlock/snapshots/" + agent + "/" + call }

func writeManifest(dir string, m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "manifest.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write the snapshot's manifest: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, "manifest.json"))
}

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("the snapshot's manifest %s is damaged: %w", dir, err)
	}
	return m, nil
}

// realDir is dir with its symbolic links resolved; it must be a directory.
func realDir(dir string) (string, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%q is not an absolute directory", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return real, nil
}

// inside maps a path the agent named to a path relative to root (slash
// separated), or says why it is left out: outside the work tree, through a
// symbolic link, or not a path at all. root and cwd have their links
// resolved.
func inside(root, cwd, p string) (string, error) {
	if p == "" || len(p) > maxPathBytes || strings.ContainsRune(p, 0) {
		return "", errors.New("not a usable path")
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, p)
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", errors.New("outside the work tree")
	}
	if err := realParents(root, rel); err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// realParents checks that every directory between root and rel is a real
// directory (or absent): a symbolic link could lead out of the work tree.
func realParents(root, rel string) error {
	parts := strings.Split(filepath.FromSlash(rel), string(filepath.Separator))
	dir := root
	for _, part := range parts[:len(parts)-1] {
		if part == ".git" {
			return errors.New("inside the repository's .git directory")
		}
		dir = filepath.Join(dir, part)
		info, err := os.Lstat(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return errors.New("through a symbolic link")
		}
		if !info.IsDir() {
			return errors.New("under a file that is not a directory")
		}
	}
	if parts[len(parts)-1] == ".git" {
		return errors.New("the repository's .git")
	}
	return nil
}

// notes collects what was left out, bounded.
type notes struct {
	lines []string
	more  int
}

func (n *notes) add(format string, args ...any) {
	if len(n.lines) >= 10 {
		n.more++
		return
	}
	n.lines = append(n.lines, fmt.Sprintf(format, args...))
}

func (n *notes) String() string {
	s := strings.Join(n.lines, "; ")
	if n.more > 0 {
		s += fmt.Sprintf("; and %d more left out", n.more)
	}
	return s
}

// namedPaths maps the paths a target names into the work tree, noting
// those left out.
func namedPaths(root, cwd string, paths []string, lim Limits, n *notes) []string {
	var out []string
	for i, p := range paths {
		if i >= lim.MaxPaths {
			n.add("%d more paths than the %d a snapshot takes were not saved", len(paths)-lim.MaxPaths, lim.MaxPaths)
			break
		}
		rel, err := inside(root, cwd, p)
		if err != nil {
			n.add("%q not saved: %v", cut(p), err)
			continue
		}
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	return out
}

// cut shortens an agent's path for a note (the note is escaped where shown).
func cut(p string) string {
	if len(p) > 200 {
		return calls.Cut(p, 200) + "…"
	}
	return p
}

// stateOf reads the state of root/rel without following a final link.
func stateOf(root, rel string) (state, error) {
	if err := realParents(root, rel); err != nil {
		return state{}, fmt.Errorf("%s: %w", rel, err)
	}
	abs := filepath.Join(root, filepath.FromSlash(rel))
	info, err := os.Lstat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return state{}, nil
	}
	if err != nil {
		return state{}, err
	}
	if !info.Mode().IsRegular() {
		return state{Exists: true, Mode: info.Mode(), Digest: "not a regular file"}, nil
	}
	d, err := digestFile(abs)
	return state{Exists: true, Digest: d, Mode: info.Mode().Perm()}, err
}

func digestFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeInside writes data to root/rel: each missing parent directory is
// created, none may be a symbolic link, and a link at rel itself is
// replaced, never followed.
func writeInside(root, rel string, data []byte, mode os.FileMode, link bool) error {
	if err := realParents(root, rel); err != nil {
		return fmt.Errorf("%s is not restored: %w", rel, err)
	}
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	if err := realParents(root, rel); err != nil { // created meanwhile?
		return fmt.Errorf("%s is not restored: %w", rel, err)
	}
	tmp := filepath.Join(filepath.Dir(abs), ".airlock-undo-"+filepath.Base(abs))
	_ = os.Remove(tmp)
	if link {
		if err := os.Symlink(string(data), tmp); err != nil {
			return err
		}
	} else if err := writeNew(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, abs); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeNew creates path exclusively (never through a link planted there).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// removeInside deletes root/rel (a link itself, never its target).
func removeInside(root, rel string) error {
	if err := realParents(root, rel); err != nil {
		return fmt.Errorf("%s is not removed: %w", rel, err)
	}
	err := os.Remove(filepath.Join(root, filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// maxPrunedAtOnce bounds the old snapshots one call removes, so a hook
// never spends long on housekeeping.
const maxPrunedAtOnce = 20

// prune removes snapshots whose manifest is older than lim.MaxAge, then
// the oldest ones while the store holds more than lim.MaxTotalBytes: their
// directories (copies, object directories) and, for git snapshots taken
// before airlock kept their objects apart, their hidden refs. What cannot
// be removed stays for the next time.
func (s Store) prune(ctx context.Context, lim Limits, now time.Time) {
	type kept struct {
		agent, call, dir string
		at               time.Time
		bytes            int64
	}
	var all []kept
	var total int64
	removed := 0
	agents, err := os.ReadDir(s.Dir)
	if err != nil {
		return
	}
	for _, a := range agents {
		callDirs, err := os.ReadDir(filepath.Join(s.Dir, a.Name()))
		if err != nil {
			continue
		}
		for _, c := range callDirs {
			dir := filepath.Join(s.Dir, a.Name(), c.Name())
			info, err := os.Stat(filepath.Join(dir, "manifest.json"))
			if err != nil {
				continue // being taken, or not a snapshot
			}
			if now.Sub(info.ModTime()) >= lim.MaxAge && removed < maxPrunedAtOnce {
				if s.remove(ctx, a.Name(), c.Name(), dir) {
					removed++
				}
				continue
			}
			k := kept{agent: a.Name(), call: c.Name(), dir: dir, at: info.ModTime(), bytes: diskBytes(dir)}
			all = append(all, k)
			total += k.bytes
		}
	}
	slices.SortFunc(all, func(a, b kept) int { return a.at.Compare(b.at) })
	for _, k := range all {
		if total <= lim.MaxTotalBytes || removed >= maxPrunedAtOnce {
			return
		}
		if s.remove(ctx, k.agent, k.call, k.dir) {
			removed++
			total -= k.bytes
		}
	}
}

// remove deletes one snapshot; false when it could not.
func (s Store) remove(ctx context.Context, agent, call, dir string) bool {
	// A snapshot taken before airlock kept its objects apart has hidden
	// refs in the repository; its own object directory goes with dir.
	if m, err := readManifest(dir); err == nil && m.Kind == KindGit && m.Objects == "" {
		ref := refOf(agent, call)
		for _, r := range []string{ref, ref + ".after"} {
			_, _ = git(ctx, m.Root, "", "", nil, "update-ref", "-d", r)
		}
	}
	return os.RemoveAll(dir) == nil
}

// diskBytes is the size of the regular files under dir.
func diskBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
