//go:build !unix

package freeport

// claim claims nothing where flock is not available: the probe alone
// decides.
func claim(string, int) bool { return true }

// ownedAlone: no claims are made here, so any directory does.
func ownedAlone(string) bool { return true }
