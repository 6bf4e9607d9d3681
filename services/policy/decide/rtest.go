package decide

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is the outcome of one Rego test_* rule.
type TestResult struct {
	Name     string        `json:"name"`
	Pass     bool          `json:"pass"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// RunRegoTests runs every test_* rule in the *_test.rego files of fsys
// against its policy and data.json, as `opa test` does. An error means the
// tests could not run (the policy does not parse or compile).
func RunRegoTests(ctx context.Context, fsys fs.FS) ([]TestResult, error) {
	res, err := loader.NewFileLoader().WithFS(fsys).Filtered([]string{"."}, func(_ string, info fs.FileInfo, depth int) bool {
		return info.IsDir() && depth > 0 // the policy directory itself, not sub-directories
	})
	if err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	modules := map[string]*ast.Module{}
	for name, m := range res.ParsedModules() {
		modules[name] = m
	}
	ch, err := tester.NewRunner().
		SetStore(inmem.NewFromObject(res.Documents)).
		SetModules(modules).
		RaiseBuiltinErrors(true).
		SetTimeout(30*time.Second).
		RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("run rego tests: %w", err)
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Name: r.Package + "." + r.Name, Pass: r.Pass(), Duration: r.Duration}
		if r.Error != nil {
			tr.Error = r.Error.Error()
		}
		out = append(out, tr)
	}
	return out, nil
}
