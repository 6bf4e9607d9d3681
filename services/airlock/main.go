// Command airlock runs airlock: every service in one process (`airlock dev`),
// one service against an external NATS (`airlock serve <service>`), and the
// agent, reviewer, auditor and operator commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlock-gate/airlock/services/airlock/internal/bench"
	"github.com/airlock-gate/airlock/services/gateway/codemode"
)

func main() {
	codemode.MaybeChild() // a run_code script's sandbox runs as this program's child
	ctx, stop := signalContext()
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		var ex exitError
		if errors.As(err, &ex) {
			os.Exit(ex.code)
		}
		if errors.Is(err, bench.ErrGoalMissed) {
			os.Exit(1) // the benchmark printed its figures and which goal it missed
		}
		fmt.Fprintln(os.Stderr, "airlock:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// exitError ends the process with a code and no further message, e.g. when
// `airlock call` printed an outcome that was not "completed".
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// signalContext is canceled on the first SIGINT/SIGTERM/SIGHUP (SIGHUP: the
// terminal dev runs in was closed, which must clean up like a Ctrl-C); a
// second one exits at once, for when a graceful drain hangs.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	// A closed terminal stops a command as Ctrl-C does (a dev killed without
	// its clean-up leaves its address files), but not one started under
	// nohup: Notify would undo the ignoring nohup asked for.
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(sigs, syscall.SIGHUP)
	}
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "airlock: shutting down (Ctrl-C again to force)")
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "airlock: forced exit")
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}
