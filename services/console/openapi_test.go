package console_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/apierr"
)

// TestTheOpenAPIDocumentDescribesEveryRoute: the document served at
// /api/v1/openapi.json names exactly the routes Register mounts under
// /api/v1, and every operation documents every status an apierr code can
// become (handleError answers any of them from any handler).
func TestTheOpenAPIDocumentDescribesEveryRoute(t *testing.T) {
	e := newEnv(t)
	con, err := console.New(t.Context(), e.deps, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ec := echo.New()
	con.Register(ec)
	srv := httptest.NewServer(ec)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json without a token: %d %s", resp.StatusCode, raw)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("the document is not OpenAPI 3.1 JSON (%v): %.200s", err, raw)
	}
	param := regexp.MustCompile(`:([A-Za-z_]+)`)
	mounted := map[string]bool{}
	for _, r := range ec.Routes() {
		if !strings.HasPrefix(r.Path, "/api/v1/") {
			continue
		}
		path, method := param.ReplaceAllString(r.Path, "{$1}"), strings.ToLower(r.Method)
		mounted[method+" "+path] = true
		t.Run(method+"_"+path+"_is_documented_with_every_error_status", func(t *testing.T) {
			op, ok := doc.Paths[path][method]
			if !ok {
				t.Fatalf("%s %s is mounted but not in services/console/openapi.json", r.Method, path)
			}
			var o struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(op, &o); err != nil {
				t.Fatal(err)
			}
			if path == "/api/v1/openapi.json" {
				return // public and static: it answers 200
			}
			for _, code := range apierr.Codes() {
				if status := fmt.Sprint(apierr.HTTPStatus(code)); o.Responses[status] == nil {
					t.Errorf("%s %s does not document status %s (apierr code %s)", r.Method, path, status, code)
				}
			}
		})
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !mounted[method+" "+path] {
				t.Errorf("the document describes %s %s, which Register does not mount", strings.ToUpper(method), path)
			}
		}
	}
}
