package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/airlock-gate/airlock/policies"
)

// Code is a policy's source: its Rego modules (test modules excluded) and
// its base data document. It is immutable once loaded.
type Code struct {
	// Modules maps a file name to its Rego text.
	Modules map[string]string
	// Data is the base data document (data.json), e.g. {"airlock": {"rules": [...]}}.
	Data map[string]any
	// Hash is a short hex digest of Modules and Data, computed by NewCode
	// alone: a policy's id whatever the run-time rules. A candidate goes by
	// it everywhere — `airlock policy replay` names it, `policy shadow`
	// starts it and records its divergences under it (candidate_digest),
	// and `shadow divergences --candidate` takes it.
	Hash string

	parsed map[string]*ast.Module
}

// DefaultCode returns the default policy built into the binary.
func DefaultCode() (*Code, error) {
	c, err := CodeFromFS(policies.Default())
	if err != nil {
		return nil, fmt.Errorf("built-in default policy: %w", err)
	}
	return c, nil
}

// CodeFromDir reads every *.rego file (except *_test.rego) and data.json in
// dir (not recursive) and compiles them. A policy that does not compile is
// an error that names the file and line.
func CodeFromDir(dir string) (*Code, error) {
	c, err := CodeFromFS(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("policy dir %s: %w", dir, err)
	}
	return c, nil
}

// CodeFromFS is CodeFromDir over a file system.
func CodeFromFS(fsys fs.FS) (*Code, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read policy files: %w", err)
	}
	c := &Code{Modules: map[string]string{}, Data: map[string]any{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, "_test.rego"):
		case strings.HasSuffix(name, ".rego"):
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			c.Modules[name] = string(b)
		case name == "data.json":
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			if err := json.Unmarshal(b, &c.Data); err != nil {
				return nil, fmt.Errorf("%s is not a JSON object: %w", name, err)
			}
		}
	}
	return NewCode(c.Modules, c.Data)
}

// NewCode compiles modules (file name → Rego) with base data.
func NewCode(modules map[string]string, data map[string]any) (*Code, error) {
	if len(modules) == 0 {
		return nil, fmt.Errorf("no .rego files: a policy needs at least one module defining %s", Query)
	}
	if data == nil {
		data = map[string]any{}
	}
	parsed := map[string]*ast.Module{}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		m, err := ast.ParseModuleWithOpts(name, modules[name], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("policy does not parse: %w", err)
		}
		parsed[name] = m
		fmt.Fprintf(h, "%s\x00%s\x00", name, modules[name])
	}
	dj, err := json.Marshal(data) // map keys sort, so this is canonical
	if err != nil {
		return nil, fmt.Errorf("policy data: %w", err)
	}
	h.Write(dj)
	comp := ast.NewCompiler().WithEnablePrintStatements(false)
	if comp.Compile(parsed); comp.Failed() {
		return nil, fmt.Errorf("policy does not compile: %w", comp.Errors)
	}
	return &Code{Modules: modules, Data: data, Hash: hex.EncodeToString(h.Sum(nil))[:12], parsed: parsed}, nil
}
