package policies_test

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/airlock-gate/airlock/policies"
)

// TestRego runs every test_* rule of the embedded *_test.rego files against
// the embedded policy and data, so `go test work` runs the Rego unit tests.
func TestRego(t *testing.T) {
	res, err := loader.NewFileLoader().WithFS(policies.Default()).All([]string{"."})
	if err != nil {
		t.Fatalf("load embedded policy: %v", err)
	}
	modules := map[string]*ast.Module{}
	for name, m := range res.ParsedModules() {
		modules[name] = m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := tester.NewRunner().
		SetStore(inmem.NewFromObject(res.Documents)).
		SetModules(modules).
		RaiseBuiltinErrors(true).
		SetTimeout(30*time.Second).
		RunTests(ctx, nil)
	if err != nil {
		t.Fatalf("run rego tests: %v", err)
	}
	n := 0
	for r := range ch {
		n++
		name := r.Package + "." + r.Name
		switch {
		case r.Error != nil:
			t.Errorf("%s: error: %v", name, r.Error)
		case r.Fail:
			t.Errorf("%s: failed", name)
		}
	}
	if n < 30 {
		t.Fatalf("ran %d Rego tests, expected the whole suite (30+): were the test files embedded?", n)
	}
	t.Logf("%d Rego tests ran", n)
}

func TestEmbeddedFilesArePresent(t *testing.T) {
	for _, f := range []string{"airlock.rego", "airlock_test.rego", "data.json"} {
		if _, err := fs.Stat(policies.Default(), f); err != nil {
			t.Errorf("%s is not embedded: %v", f, err)
		}
	}
}
