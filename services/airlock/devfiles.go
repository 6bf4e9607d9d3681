package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// runningDevFile reads file, one of the files `airlock dev` writes into its
// data dir while it runs (console.url, nats.url, clickhouse.dsn), and trusts
// it only while a dev holds the data dir's lock. A dev that ended without
// its clean-up (SIGKILL, the OOM killer, a forced exit) leaves the file
// behind, and the address it names is then anyone's to listen on: a token
// or password sent there goes to whoever took it. orElse is what else the
// caller's user may do, appended to the refusal (", or pass --api URL").
// An absent file is fs.ErrNotExist, for the caller to say what it lacks.
func runningDevFile(d natsauth.Dev, file, orElse string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	held, err := devHoldsLock(d)
	if err != nil {
		return "", err
	}
	if !held {
		return "", fmt.Errorf("no airlock dev is running on the data dir %s (%s is left from one that stopped, and the address it names may be another program's now): "+
			"start it with `airlock dev%s` (`go tool task up` in airlock's repository), name the data dir of the dev that runs with --data DIR%s",
			d.DataDir, file, dataArg(d.DataDir), orElse)
	}
	return strings.TrimSpace(string(raw)), nil
}

// devHoldsLock says whether an `airlock dev` holds the data dir's lock
// (lockDataDir). A shared lock taken without waiting is refused exactly
// while a dev holds its exclusive one; taken, it is released at once.
func devHoldsLock(d natsauth.Dev) (bool, error) {
	f, err := os.Open(d.LockFile())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // every dev creates it before it writes anything else
	}
	if err != nil {
		return false, fmt.Errorf("check that an airlock dev runs on %s: %w", d.DataDir, err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case err == nil:
		return false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	default:
		// A file system without locks: dev runs there unguarded
		// (lockDataDir), so its files are trusted as they always were.
		return true, nil
	}
}
