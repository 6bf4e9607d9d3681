package codemode

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/dop251/goja/ast"
)

// Planned is one tool call the static preview found.
type Planned struct {
	Tool string
	// Args is the first argument as JSON-like text: literals as written,
	// anything computed as "…"; "" when the call has no argument.
	Args string
	// Line counts from the script's first line.
	Line int
}

// String is the call as the preview shows it.
func (p Planned) String() string { return fmt.Sprintf("tools.%s(%s)", p.Tool, p.Args) }

// Preview lists, in order, the tool calls src names literally —
// tools.x(...) and tools["x"](...) — with their literal arguments; at most
// limit of them (more reports whether some were left out). It is for
// people (UX only, never enforcement): aliased or computed calls
// (const f = tools.x; tools[name]()) appear only when they run. A script
// that does not parse has no preview.
func Preview(src string, limit int) (calls []Planned, more bool, err error) {
	prg, err := parse(src)
	if err != nil {
		return nil, false, err
	}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if ce, ok := v.Interface().(*ast.CallExpression); ok {
				if name, ok := toolName(ce.Callee); ok {
					if len(calls) == limit {
						more = true
					} else {
						p := Planned{Tool: name, Line: prg.File.Position(int(ce.Idx0())).Line - 1}
						if len(ce.ArgumentList) > 0 {
							p.Args = literal(ce.ArgumentList[0], 0)
						}
						calls = append(calls, p)
					}
				}
			}
			walk(v.Elem())
		case reflect.Struct:
			if v.Type().PkgPath() != astPkg {
				return
			}
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(prg.Body))
	return calls, more, nil
}

var astPkg = reflect.TypeOf(ast.Identifier{}).PkgPath()

// toolName is x of tools.x or tools["x"].
func toolName(callee ast.Expression) (string, bool) {
	switch c := callee.(type) {
	case *ast.DotExpression:
		if id, ok := c.Left.(*ast.Identifier); ok && id.Name == "tools" {
			return string(c.Identifier.Name), true
		}
	case *ast.BracketExpression:
		id, ok := c.Left.(*ast.Identifier)
		s, lit := c.Member.(*ast.StringLiteral)
		if ok && lit && id.Name == "tools" {
			return string(s.Value), true
		}
	}
	return "", false
}

// literal renders e as JSON where it is a literal, "…" where it is not.
func literal(e ast.Expression, depth int) string {
	const unknown = "…"
	if depth > 8 {
		return unknown
	}
	switch x := e.(type) {
	case *ast.StringLiteral:
		return quote(string(x.Value))
	case *ast.NumberLiteral:
		b, err := json.Marshal(x.Value)
		if err != nil {
			return unknown
		}
		return string(b)
	case *ast.BooleanLiteral:
		return strconv.FormatBool(x.Value)
	case *ast.NullLiteral:
		return "null"
	case *ast.TemplateLiteral:
		if len(x.Expressions) == 0 && len(x.Elements) == 1 {
			return quote(string(x.Elements[0].Parsed))
		}
	case *ast.ArrayLiteral:
		out := "["
		for i, v := range x.Value {
			if i > 0 {
				out += ","
			}
			out += literal(v, depth+1)
		}
		return out + "]"
	case *ast.ObjectLiteral:
		out := "{"
		for i, p := range x.Value {
			if i > 0 {
				out += ","
			}
			switch p := p.(type) {
			case *ast.PropertyKeyed:
				key := unknown
				switch k := p.Key.(type) {
				case *ast.StringLiteral:
					if !p.Computed {
						key = quote(string(k.Value))
					}
				case *ast.NumberLiteral:
					if !p.Computed {
						key = quote(k.Literal)
					}
				}
				if p.Kind != ast.PropertyKindValue {
					out += key + ":" + unknown // a getter or method: known only when it runs
					continue
				}
				out += key + ":" + literal(p.Value, depth+1)
			case *ast.PropertyShort:
				out += quote(string(p.Name.Name)) + ":" + unknown
			default:
				out += unknown // a spread
			}
		}
		return out + "}"
	}
	return unknown
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
