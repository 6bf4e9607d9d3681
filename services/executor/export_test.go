package executor

import (
	"testing"
	"time"
)

// SetOpenBackoffForTest makes the back-off after a failed start of an MCP
// server d, whatever the failures before, until the test ends: a test of
// what a call within the back-off is told can then make that call however
// late a loaded machine lets it (the 250 ms default can pass first).
func SetOpenBackoffForTest(t testing.TB, d time.Duration) {
	prevMin, prevMax := openBackoffMin, openBackoffMax
	openBackoffMin, openBackoffMax = d, d
	t.Cleanup(func() { openBackoffMin, openBackoffMax = prevMin, prevMax })
}
