// Package policies holds airlock's default Rego policy (airlock.rego), its
// unit tests (airlock_test.rego) and its data (data.json: the default rules
// of seeds 000 and 004, and example profiles of seed 001), embedded so the
// airlock binary has the default policy built in.
//
// The policy's entry point is data.airlock.decision; see airlock.rego for the
// input and data it reads.
package policies

import (
	"embed"
	"io/fs"
)

//go:embed *.rego data.json
var files embed.FS

// Default returns the default policy as a file system: the .rego modules,
// their *_test.rego tests, and data.json at its root. Loaders skip the tests
// when they evaluate.
func Default() fs.FS { return files }
