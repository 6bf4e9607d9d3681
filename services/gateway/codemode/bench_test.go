package codemode

import (
	"context"
	"os"
	"testing"
)

// BenchmarkRun is one run of a script making one tool call, in this
// process and isolated in a child process (what the gateway does): the
// child's start is the price of its operating-system limits.
func BenchmarkRun(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	call := func(context.Context, Call) (any, error) { return "ok", nil }
	for _, mode := range []struct {
		name    string
		isolate string
	}{{"in_process", ""}, {"isolated", exe}} {
		b.Run(mode.name, func(b *testing.B) {
			lim := Limits{Isolate: mode.isolate}
			for b.Loop() {
				if _, err := Run(context.Background(), `return await tools.fs__read({path: "a"});`, []string{"fs__read"}, call, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
