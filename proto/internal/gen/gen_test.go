package gen

import (
	"context"
	"os"
	"testing"
)

// TestCommittedCodeIsCurrent fails when a .proto file changed without
// `go tool task generate` being run, so the committed Go code never drifts
// from the contract.
func TestCommittedCodeIsCurrent(t *testing.T) {
	files, err := Generate(context.Background(), "../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no generated files: the proto tree was not found")
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s is missing (%v): run `go tool task generate`", name, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run `go tool task generate` and commit the result", name)
		}
	}
}
