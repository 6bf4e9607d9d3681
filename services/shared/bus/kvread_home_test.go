package bus_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBucketsAreReadOnlyThroughBus: no code outside this package reads a
// bucket's stored entries through jetstream.KeyValue's own watch, list or
// history (a call named so with a context and a key), which wait for ever
// when what a watch counted expires before it is delivered: they go
// through Watch, Keys, History, ReadAll or ReadKey here. A watch of
// updates only (jetstream.UpdatesOnly) waits for no initial values.
func TestBucketsAreReadOnlyThroughBus(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("the workspace root is not %s: %v", root, err)
	}
	own, _ := filepath.Abs(".")
	// name: the least arguments a call of the bucket's method has.
	reads := map[string]int{"Watch": 2, "WatchAll": 1, "WatchFiltered": 2, "ListKeys": 1, "ListKeysFiltered": 1, "History": 2, "Keys": 1}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "node_modules" || strings.HasPrefix(name, ".") && path != root || path == own {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			least, named := reads[sel.Sel.Name]
			if !named || len(call.Args) < least || !isContext(call.Args[0]) {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "bus" || updatesOnly(call.Args) {
				return true
			}
			t.Errorf("%s: %s reads a bucket through jetstream: use bus.Watch, bus.Keys, bus.History, bus.ReadAll or bus.ReadKey",
				fset.Position(call.Pos()), sel.Sel.Name)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// updatesOnly says whether a watch is given jetstream.UpdatesOnly(): it
// has no initial values to wait for (bus.Watch is not for it).
func updatesOnly(args []ast.Expr) bool {
	for _, a := range args {
		if c, ok := a.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "UpdatesOnly" {
				return true
			}
		}
	}
	return false
}

// isContext says whether an argument looks like a context: ctx, a field
// or call ending in ctx or Context, or context.Something(...).
func isContext(arg ast.Expr) bool {
	switch a := arg.(type) {
	case *ast.Ident:
		return strings.HasSuffix(strings.ToLower(a.Name), "ctx")
	case *ast.CallExpr:
		if sel, ok := a.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "context" {
				return true
			}
		}
	case *ast.SelectorExpr:
		return strings.HasSuffix(strings.ToLower(a.Sel.Name), "ctx")
	}
	return false
}
