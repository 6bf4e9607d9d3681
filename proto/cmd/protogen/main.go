// Command protogen regenerates the Go code for proto/airlock/v1 without protoc:
// it compiles the .proto files with protocompile and runs protoc-gen-go's
// generator in process, so `go tool task generate` needs nothing installed.
//
// Usage (from the proto module): go run ./cmd/protogen [-check]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/airlock-gate/airlock/proto/internal/gen"
)

func main() {
	check := flag.Bool("check", false, "report stale generated files instead of writing them")
	flag.Parse()
	if err := run(context.Background(), *check); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, check bool) error {
	files, err := gen.Generate(ctx, ".")
	if err != nil {
		return err
	}
	stale := 0
	for name, content := range files {
		old, _ := os.ReadFile(name)
		if string(old) == string(content) {
			continue
		}
		stale++
		if check {
			fmt.Fprintf(os.Stderr, "%s is stale: run `go tool task generate`\n", name)
			continue
		}
		if err := os.WriteFile(name, content, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		fmt.Println("wrote", name)
	}
	if check && stale > 0 {
		return fmt.Errorf("%d generated file(s) out of date", stale)
	}
	return nil
}
