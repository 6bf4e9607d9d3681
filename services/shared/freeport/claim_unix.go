//go:build unix

package freeport

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
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
	// The directory is checked and used through one handle: checked by
	// path, another user could swap it for a link between the check and
	// the open (in a shared TMPDIR without the sticky bit).
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil || !ownedAloneStat(&st) {
		return true
	}
	fd, err := unix.Openat(dfd, strconv.Itoa(port), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return true
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = unix.Close(fd)
		return !errors.Is(err, unix.EWOULDBLOCK)
	}
	return true
}

// ownedAlone reports whether dir is a directory (not a link to one) that
// this user owns and no one else may write in or read.
func ownedAlone(dir string) bool {
	var st unix.Stat_t
	return unix.Lstat(dir, &st) == nil && ownedAloneStat(&st)
}

// ownedAloneStat is ownedAlone of what st describes.
func ownedAloneStat(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o077 == 0 && int(st.Uid) == os.Getuid()
}
