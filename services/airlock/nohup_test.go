package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// SIGHUP stops every airlock command (signalContext). Go's
// signal.Notify takes over a signal the process was started with ignored,
// so `nohup airlock dev &` (or `airlock serve` under nohup) is stopped by
// the hangup nohup exists to ignore: it must survive it, as it did before.
func TestACommandStartedUnderNohupSurvivesAHangup(t *testing.T) {
	if os.Getenv("AIRLOCK_TEST_NOHUP_CHILD") == "1" {
		ctx, stop := signalContext()
		defer stop()
		_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
		select {
		case <-ctx.Done():
			os.Exit(3) // stopped by the hangup
		case <-time.After(time.Second):
			os.Exit(0)
		}
	}
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Fatalf("nohup not found: install coreutils (apt-get install coreutils)")
	}
	cmd := exec.Command(nohup, os.Args[0], "-test.run=^TestACommandStartedUnderNohupSurvivesAHangup$")
	cmd.Env = append(os.Environ(), "AIRLOCK_TEST_NOHUP_CHILD=1")
	cmd.Dir = t.TempDir() // nohup.out goes here
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		t.Fatal("a command started under nohup was stopped by SIGHUP: signalContext must not take over a SIGHUP the process was started with ignored (signal.Ignored)")
	} else if err != nil {
		t.Fatalf("child: %v", err)
	}
}
