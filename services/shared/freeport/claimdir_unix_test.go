//go:build unix

package freeport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Anyone may make a directory in /tmp: one another local user made first
// under this user's claim directory's name (or may write in) would let its
// owner hold every claim, or put a link where a claim file is opened. Such
// a directory is not used: no port is claimed and the probe alone decides.
func TestAClaimDirectoryThisUserDoesNotOwnAloneIsNotUsed(t *testing.T) {
	name := fmt.Sprintf("airlock-ports-%d", os.Getuid())
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		usable  bool
	}{
		{"made here", func(*testing.T, string) {}, true},
		{"made before, this user's alone", func(t *testing.T, dir string) { mkdir(t, dir, 0o700) }, true},
		{"others may write in it", func(t *testing.T, dir string) { mkdir(t, dir, 0o700); chmod(t, dir, 0o777) }, false},
		{"others may read it", func(t *testing.T, dir string) { mkdir(t, dir, 0o700); chmod(t, dir, 0o755) }, false},
		{"a link to a directory of this user's", func(t *testing.T, dir string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			mkdir(t, target, 0o700)
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another user's (made as root, given away)", func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
			if err := os.Chown(dir, 65534, 65534); errors.Is(err, syscall.EPERM) {
				t.Skip("only root can give a directory away; this case needs it")
			} else if err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			tc.prepare(t, filepath.Join(base, name))
			got := claimDirIn(base)
			if tc.usable && got != filepath.Join(base, name) {
				t.Fatalf("the claim directory is %q, want %s", got, filepath.Join(base, name))
			}
			if !tc.usable && got != "" {
				t.Fatalf("claims are made in %s, which is not this user's alone", got)
			}
		})
	}
}

// A claim file that is a link is not followed: claiming opens no file
// elsewhere.
func TestAClaimFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o700) // a directory claims are made in
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(target, filepath.Join(dir, "20001")); err != nil {
		t.Fatal(err)
	}
	claim(dir, 20001)
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("claiming port 20001 through a link made %s (%v)", target, err)
	}
}

func mkdir(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
}

// The claim directory is checked and used through one handle: one swapped
// for a link after claimDir checked it (another user's doing, in a shared
// TMPDIR without the sticky bit) gets no claim file, in it or where it
// points; the probe alone decides.
func TestAClaimDirectorySwappedAfterItsCheckIsNotUsed(t *testing.T) {
	base := t.TempDir()
	dir := claimDirIn(base)
	if dir == "" {
		t.Fatal("setup: no claim directory under a fresh base")
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	mkdir(t, elsewhere, 0o777)
	chmod(t, elsewhere, 0o777) // another user's, that anyone may write in
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	if !claim(dir, 20002) {
		t.Fatal("a port was refused as claimed in a directory that must not be used")
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Fatalf("claiming through the swapped directory made %d files in %s", len(entries), elsewhere)
	}
}
