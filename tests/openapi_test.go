package tests

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTheOpenAPIDocumentIsValid lints services/console/openapi.json with a
// real OpenAPI 3.1 validator from npm (@seriousme/openapi-schema-validator),
// which must also refuse a broken document.
func TestTheOpenAPIDocumentIsValid(t *testing.T) {
	bin := nodeBin(t, "validate-api")
	doc, err := filepath.Abs(filepath.Join("..", "services", "console", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken.json")
	writeFile(t, broken, `{"openapi":"3.1.0","paths":{"/x":{"get":{"responses":{"200":{}}}}}}`)
	for _, c := range []struct {
		name, file string
		valid      bool
	}{
		{"the_shipped_document_is_valid", doc, true},
		{"a_document_without_info_is_refused", broken, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _ := exec.Command("node", bin, c.file).CombinedOutput()
			var res struct {
				Valid bool `json:"valid"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("validate-api %s: %v\n%s", c.file, err, out)
			}
			if res.Valid != c.valid {
				t.Fatalf("validate-api %s: valid=%v, want %v\n%s", c.file, res.Valid, c.valid, out)
			}
		})
	}
}
