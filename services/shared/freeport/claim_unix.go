//go:build unix

package freeport

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// claim takes port for this process's life, against every other process
// that claims in dir: an exclusive flock on a file named for the port. The
// descriptor is left open on purpose and closes only when the process
// ends (however it ends), releasing the claim; a port's server may stop
// and restart on it meanwhile (a cluster node killed by a failover test or
// by `airlock chaos`) without another process picking it in between. The
// files are never removed: unlinking a claimed file would let a third
// process claim a new file of the same name. false only when another
// process (or an earlier pick of this one) holds the port; any other
// failure claims nothing and leaves the choice to the probe, as before
// claims existed.
func claim(dir string, port int) bool {
	if dir == "" {
		return true
	}
	fd, err := syscall.Open(filepath.Join(dir, strconv.Itoa(port)), syscall.O_CREAT|syscall.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return true
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = syscall.Close(fd)
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	return true
}

// ownedAlone reports whether dir is a directory (not a link to one) that
// this user owns and no one else may write in or read.
func ownedAlone(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
