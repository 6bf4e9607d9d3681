package console_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTheOpenAPIDocumentNamesEverySuccessStatusAHandlerAnswers reads the
// handlers' source: for every route Register mounts under /api/v1, the
// http.Status constants its handler (and the package's functions it calls,
// transitively) answers with must each be a response of that operation in
// openapi.json. (The error statuses, which apierr decides, are checked by
// TestTheOpenAPIDocumentDescribesEveryRoute.)
func TestTheOpenAPIDocumentNamesEverySuccessStatusAHandlerAnswers(t *testing.T) {
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{} // by name; methods by their name alone
	var register *ast.FuncDecl
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[fd.Name.Name] = fd
				if fd.Name.Name == "Register" {
					register = fd
				}
			}
		}
	}
	if register == nil {
		t.Fatal("Register not found in services/console")
	}
	// r(http.MethodX, "/api/v1/...", con.handler, ...)
	type route struct{ method, path, handler string }
	var routes []route
	ast.Inspect(register, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 3 {
			return true
		}
		m, ok1 := call.Args[0].(*ast.SelectorExpr)
		p, ok2 := call.Args[1].(*ast.BasicLit)
		h, ok3 := call.Args[2].(*ast.SelectorExpr)
		if !ok1 || !ok2 || !ok3 || !strings.HasPrefix(m.Sel.Name, "Method") {
			return true
		}
		path, _ := strconv.Unquote(p.Value)
		if strings.HasPrefix(path, "/api/v1/") {
			routes = append(routes, route{strings.ToLower(strings.TrimPrefix(m.Sel.Name, "Method")), path, h.Sel.Name})
		}
		return true
	})
	if len(routes) < 20 {
		t.Fatalf("found %d /api/v1 routes in Register; the parse no longer matches how routes are mounted", len(routes))
	}
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		path := r.path
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, ":") {
				path = strings.Replace(path, seg, "{"+seg[1:]+"}", 1)
			}
		}
		statuses := map[int]bool{}
		seen := map[string]bool{}
		var walk func(name string)
		walk = func(name string) {
			fd := funcs[name]
			if fd == nil || seen[name] {
				return
			}
			seen[name] = true
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "http" && strings.HasPrefix(x.Sel.Name, "Status") {
						if code := statusCode(x.Sel.Name); code > 0 && code < 400 {
							statuses[code] = true
						}
					} else {
						walk(x.Sel.Name)
					}
				case *ast.Ident:
					walk(x.Name)
				}
				return true
			})
		}
		walk(r.handler)
		if len(statuses) == 0 {
			t.Errorf("%s %s: no success status found in %s", r.method, r.path, r.handler)
		}
		op := doc.Paths[path][r.method]
		for code := range statuses {
			if op.Responses[strconv.Itoa(code)] == nil {
				t.Errorf("%s %s answers %d (%s) but openapi.json does not document it", strings.ToUpper(r.method), path, code, r.handler)
			}
		}
	}
}

// statusCode is the value of net/http's Status constant name (0 if none).
func statusCode(name string) int {
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" && "Status"+strings.Join(strings.Fields(strings.NewReplacer("-", " ", "'", "").Replace(text)), "") == name {
			return code
		}
	}
	return 0
}
