package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A test binary that crashed leaves its airlock build behind (Run never
// ran); the next build removes the builds of test binaries no longer
// running, and keeps those of running ones.
func TestTheBuildOfATestBinaryThatIsGoneIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	running := exec.Command("sleep", "30")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Process.Kill(); _ = running.Wait() })

	dirs := map[string]bool{ // name → kept
		fmt.Sprintf("%s%d-1", buildPrefix, gone.Process.Pid):    false,
		fmt.Sprintf("%s%d-2", buildPrefix, running.Process.Pid): true,
		fmt.Sprintf("%s%d-3", buildPrefix, os.Getpid()):         true,
		buildPrefix + "12345":                                   true, // an older build's name: not ours to judge
		"elsewhere-1-2":                                         true,
	}
	for name := range dirs {
		if err := os.MkdirAll(filepath.Join(tmp, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name, "airlock"), []byte("x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeOrphanBuilds(tmp)
	for name, kept := range dirs {
		_, err := os.Stat(filepath.Join(tmp, name))
		if exists := err == nil; exists != kept {
			t.Errorf("%s: exists %v, want %v", name, exists, kept)
		}
	}
}
