package codemode

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"github.com/airlock-gate/airlock/services/shared/ingress"
)

// allocators are the global built-ins that allocate a caller-chosen size
// in one step: a script does not get them.
var allocators = []string{
	"ArrayBuffer", "SharedArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray",
	"Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float16Array", "Float32Array", "Float64Array",
	"BigInt64Array", "BigUint64Array",
}

// setup builds the script's world: the built-ins, bounded; tools; console.
func (r *run) setup(tools []string) error {
	vm := r.vm
	// eval and new Function parse too: no source maps there either.
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	vm.SetMaxCallStackSize(2000)
	g := vm.GlobalObject()
	jsonObj := g.Get("JSON").ToObject(vm)
	var ok bool
	if r.stringify, ok = goja.AssertFunction(jsonObj.Get("stringify")); !ok {
		return fmt.Errorf("JSON.stringify is missing")
	}
	if r.parse, ok = goja.AssertFunction(jsonObj.Get("parse")); !ok {
		return fmt.Errorf("JSON.parse is missing")
	}
	r.errorCtor = g.Get("Error").ToObject(vm)
	r.typeError = g.Get("TypeError").ToObject(vm)
	for _, name := range allocators {
		if err := g.Delete(name); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	if err := r.bound(); err != nil {
		return err
	}
	t := vm.NewObject()
	if err := t.SetPrototype(nil); err != nil {
		return err
	}
	for _, name := range tools {
		if err := t.Set(name, r.toolFunc(name)); err != nil {
			return fmt.Errorf("add tool %s: %w", name, err)
		}
	}
	console := vm.NewObject()
	if err := console.Set("log", r.log); err != nil {
		return err
	}
	for name, v := range map[string]*goja.Object{"tools": t, "console": console} {
		if err := freeze(vm, v); err != nil {
			return err
		}
		if err := g.DefineDataProperty(name, v, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
			return fmt.Errorf("define %s: %w", name, err)
		}
	}
	return nil
}

func freeze(vm *goja.Runtime, o *goja.Object) error {
	f, _ := goja.AssertFunction(vm.GlobalObject().Get("Object").ToObject(vm).Get("freeze"))
	_, err := f(goja.Undefined(), o)
	return err
}

// bound wraps the built-ins that allocate a size the script chooses in one
// step (which the memory watchdog cannot interrupt) with a check of that size.
func (r *run) bound() error {
	vm := r.vm
	maxStr, maxLen := int64(r.lim.MaxStringBytes), int64(r.lim.MaxArrayLength)
	lengthOf := func(v goja.Value) int64 {
		o, ok := v.(*goja.Object)
		if !ok {
			return 0
		}
		return o.Get("length").ToInteger()
	}
	strLen := func(this goja.Value) int64 { return int64(len(this.String())) }
	tooBig := func(what string, n, limit int64) {
		panic(vm.NewGoError(fmt.Errorf("RangeError: %s of %d is over the sandbox's limit of %d", what, n, limit)))
	}
	thisLength := func(c goja.FunctionCall) {
		if n := lengthOf(c.This); n > maxLen {
			tooBig("an array length", n, maxLen)
		}
	}
	guards := []struct {
		obj, name string
		check     func(c goja.FunctionCall)
	}{
		{"String.prototype", "repeat", func(c goja.FunctionCall) {
			if n := c.Argument(0).ToInteger(); n > 0 && strLen(c.This)*n > maxStr {
				tooBig("a string", strLen(c.This)*n, maxStr)
			}
		}},
		{"String.prototype", "padStart", func(c goja.FunctionCall) {
			if n := c.Argument(0).ToInteger(); n > maxStr {
				tooBig("a string", n, maxStr)
			}
		}},
		{"String.prototype", "padEnd", func(c goja.FunctionCall) {
			if n := c.Argument(0).ToInteger(); n > maxStr {
				tooBig("a string", n, maxStr)
			}
		}},
		{"Array.prototype", "join", thisLength},
		{"Array.prototype", "toString", thisLength},
		{"Array.prototype", "toLocaleString", thisLength},
		{"Array.prototype", "fill", thisLength},
		{"Array", "from", func(c goja.FunctionCall) {
			if n := lengthOf(c.Argument(0)); n > maxLen {
				tooBig("an array length", n, maxLen)
			}
		}},
		{"Function.prototype", "apply", func(c goja.FunctionCall) {
			if n := lengthOf(c.Argument(1)); n > maxLen {
				tooBig("an argument list", n, maxLen)
			}
		}},
		{"Reflect", "apply", func(c goja.FunctionCall) {
			if n := lengthOf(c.Argument(2)); n > maxLen {
				tooBig("an argument list", n, maxLen)
			}
		}},
		{"Reflect", "construct", func(c goja.FunctionCall) {
			if n := lengthOf(c.Argument(1)); n > maxLen {
				tooBig("an argument list", n, maxLen)
			}
		}},
	}
	for _, gd := range guards {
		holder, err := vm.RunString(gd.obj)
		if err != nil {
			return fmt.Errorf("find %s: %w", gd.obj, err)
		}
		obj := holder.ToObject(vm)
		orig, ok := goja.AssertFunction(obj.Get(gd.name))
		if !ok {
			return fmt.Errorf("%s.%s is not a function", gd.obj, gd.name)
		}
		check := gd.check
		wrapped := vm.ToValue(func(c goja.FunctionCall) goja.Value {
			check(c)
			v, err := orig(c.This, c.Arguments...)
			if err != nil {
				panic(err)
			}
			return v
		})
		if err := obj.DefineDataProperty(gd.name, wrapped, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return fmt.Errorf("bound %s.%s: %w", gd.obj, gd.name, err)
		}
	}
	return nil
}

// toolFunc is tools[name]: it reads the arguments once, counts the call and
// returns a promise the call settles once the script yields.
func (r *run) toolFunc(name string) func(goja.FunctionCall) goja.Value {
	return func(c goja.FunctionCall) goja.Value {
		vm := r.vm
		p, resolve, reject := vm.NewPromise()
		args, err := r.readArgs(name, c.Argument(0))
		if err != nil {
			e, nerr := vm.New(r.typeError, vm.ToValue(err.Error()))
			if nerr != nil {
				panic(nerr)
			}
			_ = reject(e)
			return vm.ToValue(p)
		}
		r.calls++
		if r.calls > r.lim.MaxCalls {
			vm.Interrupt(errCalls)
			return goja.Undefined()
		}
		r.queued = append(r.queued, pending{c: Call{Index: r.calls, Tool: name, Args: args}, resolve: resolve, reject: reject})
		return vm.ToValue(p)
	}
}

// readArgs reads a call's arguments once, as JSON of the object's own
// enumerable properties (JSON.stringify as it was before the script ran):
// inherited properties are not arguments, and a getter is read once, so
// what the policy decides is what runs.
func (r *run) readArgs(name string, v goja.Value) (map[string]any, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return map[string]any{}, nil
	}
	if _, ok := v.(*goja.Object); !ok {
		return nil, fmt.Errorf("tools.%s takes one object of arguments, e.g. tools.%s({path: \"a.txt\"})", name, name)
	}
	s, err := r.stringify(goja.Undefined(), v)
	if err != nil {
		if isUncatchable(err) {
			panic(err)
		}
		return nil, fmt.Errorf("the arguments of tools.%s cannot be read as JSON: %v", name, err)
	}
	if s == nil || goja.IsUndefined(s) {
		return nil, fmt.Errorf("the arguments of tools.%s cannot be read as JSON", name)
	}
	text := s.String()
	if len(text) > r.lim.MaxArgBytes {
		return nil, fmt.Errorf("the arguments of tools.%s are %d bytes of JSON, over the limit of %d", name, len(text), r.lim.MaxArgBytes)
	}
	// The gateway decodes them again, and then encodes them: a list of
	// numbers costs 40 times its JSON in memory, so what cannot fit is
	// refused before either.
	if refusal := ingress.ArgumentsFit([]byte(text), r.lim.MaxArgBytes); refusal != nil {
		return nil, fmt.Errorf("the arguments of tools.%s: %s", name, refusal.Reason)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(text), &args); err != nil || args == nil {
		return nil, fmt.Errorf("tools.%s takes one object of arguments (not an array or a value)", name)
	}
	return args, nil
}

func isUncatchable(err error) bool {
	switch err.(type) {
	case *goja.InterruptedError, *goja.StackOverflowError:
		return true
	}
	return false
}

// log is console.log: one line of its arguments, counted in the output.
func (r *run) log(c goja.FunctionCall) goja.Value {
	parts := make([]string, 0, len(c.Arguments))
	for _, a := range c.Arguments {
		if _, ok := a.(*goja.Object); ok {
			if s, err := r.stringify(goja.Undefined(), a); err == nil && s != nil && !goja.IsUndefined(s) {
				parts = append(parts, s.String())
				continue
			} else if err != nil && isUncatchable(err) {
				panic(err)
			}
		}
		parts = append(parts, safeString(a))
	}
	line := strings.Join(parts, " ")
	r.output += len(line) + 1
	if r.output > r.lim.MaxOutputBytes {
		r.vm.Interrupt(errOutput)
		return goja.Undefined()
	}
	r.logs = append(r.logs, line)
	return goja.Undefined()
}
