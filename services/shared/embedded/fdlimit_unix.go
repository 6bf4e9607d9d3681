//go:build unix

package embedded

import "syscall"

// openFileLimit is the process's soft limit on open files (Go raises it to
// the hard limit at start), 0 if unknown.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
