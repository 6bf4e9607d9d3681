package snapshot

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/calls"
)

// copyBefore copies the files t names (inside cwd, the work tree here) into
// dir, each under its index. Files past lim.MaxBytes in total are left out
// and said so: undo never touches them.
func (s Store) copyBefore(cwd string, t Target, dir string, lim Limits) (manifest, error) {
	m := manifest{Kind: KindCopy, Root: cwd}
	var n notes
	paths := t.Paths
	if t.WholeTree {
		// Outside git only the files a command names are saved.
		paths = append(append([]string(nil), paths...), commandFiles(cwd, t.Command)...)
		n.add("not a git work tree: only the files the command names are saved")
	}
	var total int64
	for _, rel := range namedPaths(cwd, cwd, paths, lim, &n) {
		st, err := stateOf(cwd, rel)
		if err != nil {
			n.add("%q not saved: %v", cut(rel), err)
			continue
		}
		if st.Exists && st.Digest == "not a regular file" {
			if !t.WholeTree {
				n.add("%q not saved: not a regular file", cut(rel))
			}
			continue
		}
		if st.Exists {
			info, err := os.Lstat(filepath.Join(cwd, filepath.FromSlash(rel)))
			if err != nil {
				continue
			}
			if total+info.Size() > lim.MaxBytes {
				n.add("%q not saved: past the %d MiB bound of a copy snapshot", cut(rel), lim.MaxBytes>>20)
				continue
			}
			total += info.Size()
			if err := copyFile(filepath.Join(cwd, filepath.FromSlash(rel)), filepath.Join(dir, "b"+strconv.Itoa(len(m.Entries)))); err != nil {
				return m, fmt.Errorf("save %s: %w", rel, err)
			}
		}
		m.Entries = append(m.Entries, entry{Path: rel, Before: st})
	}
	m.Note = n.String()
	return m, nil
}

// commandFiles are the words of a shell command that name an existing
// regular file (relative to cwd, or absolute; namedPaths then keeps those
// inside the work tree).
func commandFiles(cwd, command string) []string {
	words, ok := calls.ShellWords(command)
	if !ok {
		words = strings.Fields(command)
	}
	var out []string
	for _, w := range words {
		p := w
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if info, err := os.Lstat(p); err == nil && info.Mode().IsRegular() {
			out = append(out, w)
		}
	}
	return out
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
