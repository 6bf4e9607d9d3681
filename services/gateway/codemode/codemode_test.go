package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeChild() // this test binary is also the isolated runs' child
	os.Exit(m.Run())
}

// modes are the ways a script runs: in this process, and in a child
// process of this test binary.
func modes(t *testing.T) map[string]Limits {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	isolated := fast
	isolated.Isolate = exe
	return map[string]Limits{"in_process": fast, "isolated": isolated}
}

// recorder is the Caller of these tests: it records each call and answers
// what answer says (the gateway's real path is tested in tests/).
type recorder struct {
	mu     sync.Mutex
	calls  []Call
	answer func(Call) (any, error)
}

func (r *recorder) call(ctx context.Context, c Call) (any, error) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.answer != nil {
		return r.answer(c)
	}
	return map[string]any{"tool": c.Tool, "args": c.Args}, nil
}

var fast = Limits{Busy: 500 * time.Millisecond, Timeout: 5 * time.Second, MaxMemoryBytes: 32 << 20, MaxCalls: 5}

func TestScriptsRunWithTools(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
		calls           int
	}{
		{"a_script_returns_what_its_calls_resolve_with", `const a = await tools.fs__read({path: "a"}); return {got: a.args.path};`, `{"got":"a"}`, 1},
		{"calls_may_run_together", `const [a, b] = await Promise.all([tools.fs__read({path: "a"}), tools["fs__read"]({path: "b"})]); return [a.args.path, b.args.path];`, `["a","b"]`, 2},
		{"a_script_without_return_answers_null", `await tools.fs__read({});`, `null`, 1},
		{"a_script_may_make_no_call", `return 1 + 1;`, `2`, 0},
		{"a_rejected_call_can_be_caught", `try { await tools.fs__write({}); } catch (e) { return "caught: " + e.message; }`, `"caught: denied: not here"`, 1},
	} {
		for mode, lim := range modes(t) {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				rec := &recorder{answer: func(call Call) (any, error) {
					if call.Tool == "fs__write" {
						return nil, errors.New("denied: not here")
					}
					return map[string]any{"tool": call.Tool, "args": call.Args}, nil
				}}
				res, err := Run(context.Background(), c.src, []string{"fs__read", "fs__write"}, rec.call, lim)
				if err != nil {
					t.Fatal(err)
				}
				if string(res.Value) != c.want || len(rec.calls) != c.calls || res.Calls != c.calls {
					t.Fatalf("got %s with %d calls (%d recorded), want %s with %d", res.Value, res.Calls, len(rec.calls), c.want, c.calls)
				}
			})
		}
	}
}

// TestBadScriptsEndWithAClearErrorAndNothingElse: every attempt ends with an
// error for the model of the kind expected, and makes no tool call.
func TestBadScriptsEndWithAClearErrorAndNothingElse(t *testing.T) {
	dir := t.TempDir()
	notMap := filepath.Join(dir, "secret.map")
	if err := os.WriteFile(notMap, []byte("not a source map"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, src, kind, says string
		busy                  time.Duration // 0: fast.Busy
	}{
		{"a_script_that_does_not_parse", `return (;`, KindSyntax, "does not parse", 0},
		{"a_script_that_throws", `throw new Error("boom")`, KindThrown, "Error: boom", 0},
		{"an_endless_loop", `for (;;) {}`, KindTimeout, "without waiting", 0},
		{"an_endless_loop_in_promise_jobs", `const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {});`, KindTimeout + "|" + KindMemory, "it was stopped", 0}, // its chain of promises grows: either limit may come first
		{"an_endless_loop_caught_and_retried", `for (;;) { try { for (;;) {} } catch (e) {} }`, KindTimeout, "without waiting", 0},
		{"unbounded_allocation", `const s = "y".repeat(3000000); const a = []; for (let i = 0; ; i++) a.push(s + i);`, KindMemory, "MiB", 5 * time.Second},
		{"one_huge_string", `return "x".repeat(1e9).length;`, KindThrown, "over the sandbox's limit", 0},
		{"one_huge_padding", `return "x".padEnd(2e9).length;`, KindThrown, "over the sandbox's limit", 0},
		{"a_huge_sparse_join", `return new Array(1e9).join("x").length;`, KindThrown, "over the sandbox's limit", 0},
		{"a_huge_array_like_apply", `return Math.max.apply(null, {length: 1e9});`, KindThrown, "over the sandbox's limit", 0},
		{"a_huge_array_buffer", `return new ArrayBuffer(1e9).byteLength;`, KindThrown, "ArrayBuffer is not defined", 0},
		{"require", `return require("fs");`, KindThrown, "require is not defined", 0},
		{"a_dynamic_import", `return await import("fs");`, KindSyntax, "does not parse", 0},
		{"a_static_import", `import fs from "fs";`, KindSyntax, "does not parse", 0},
		{"process", `return process.env;`, KindThrown, "process is not defined", 0},
		{"globalThis_tricks", `return globalThis.process.mainModule.require("child_process");`, KindThrown, "TypeError", 0},
		{"the_Function_constructor", `return Function("return process")();`, KindThrown, "process is not defined", 0},
		{"a_constructor_chain", `return tools.fs__read.constructor("return this.process || require")();`, KindThrown, "not defined", 0},
		{"timers", `setTimeout(() => {}, 1);`, KindThrown, "setTimeout is not defined", 0},
		{"a_source_map_naming_a_host_file", "//# sourceMappingURL=" + notMap + "\nthrow new Error('ran without reading the map')", KindThrown, "ran without reading the map", 0},
		{"eval_with_a_source_map_naming_a_host_file", "eval('//# sourceMappingURL=" + notMap + "\\n1'); throw new Error('ran without reading the map')", KindThrown, "ran without reading the map", 0},
		{"a_promise_that_never_settles", `await new Promise(() => {});`, KindStalled, "never finished", 0},
		{"too_much_output", `for (let i = 0; i < 1e6; i++) console.log("line " + i);`, KindLimit, "output", 0},
		{"replacing_tools", `tools.fs__read = () => 1; return tools.fs__read();`, KindThrown, "TypeError", 0},
		{"more_calls_than_allowed_in_a_loop", `for (let i = 0; i < 100000; i++) tools.fs__read({i});`, KindLimit, "more than 5 tool calls", 0},
		{"a_call_issued_then_a_throw", `tools.fs__read({path: "x"}); throw new Error("after the call")`, KindThrown, "after the call", 0},
		{"a_call_issued_then_an_endless_loop", `tools.fs__read({path: "x"}); for (;;) {}`, KindTimeout, "without waiting", 0},
		{"a_thrown_error_whose_message_loops", `throw {get message() { for (;;) {} }}`, KindThrown, "cannot be shown", 0},
		{"a_getter_on_arguments_that_loops", `await tools.fs__read({get path() { for (;;) {} }});`, KindTimeout, "without waiting", 0},
		{"a_getter_on_arguments_that_throws", `await tools.fs__read({get path() { throw new Error("getter") }});`, KindThrown, "getter", 0},
		{"a_replaced_TypeError", `TypeError = function () { for (;;) {} }; await tools.fs__read("not an object");`, KindThrown, "one object of arguments", 0},
		{"a_deep_recursion", `const f = () => f(); f();`, KindThrown, "stack", 0},
		// Only the child's operating-system limits stop these (in this
		// process they would take the test binary down).
		{"isolated/one_join_of_terabytes", `tools.fs__read({}); return new Array(1000000).fill("x".repeat(4000000)).join("").length;`, KindMemory + "|" + KindTimeout, "it was stopped", 0},
		{"isolated/one_replaceAll_of_terabytes", `const s = "x".repeat(4000000); tools.fs__read({}); return s.replaceAll("x", s).length;`, KindMemory + "|" + KindTimeout, "it was stopped", 0},
		{"isolated/a_backtracking_regular_expression", `tools.fs__read({}); return /^(a+)+(?=c)/.test("a".repeat(40) + "b");`, KindTimeout, "it was stopped", 0}, // by the CPU limit, or on a loaded machine the run's timeout
	} {
		for mode, base := range modes(t) {
			if strings.HasPrefix(c.name, "isolated/") && mode != "isolated" {
				continue
			}
			t.Run(mode+"/"+strings.TrimPrefix(c.name, "isolated/"), func(t *testing.T) {
				rec := &recorder{}
				lim := base
				if c.busy > 0 {
					lim.Busy = c.busy
				}
				_, err := Run(context.Background(), c.src, []string{"fs__read"}, rec.call, lim)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, want a script error", err)
				}
				if !slices.Contains(strings.Split(c.kind, "|"), e.Kind) || !strings.Contains(e.Message, c.says) {
					t.Fatalf("got %s: %q, want %s saying %q", e.Kind, e.Message, c.kind, c.says)
				}
				if len(rec.calls) != 0 {
					t.Fatalf("the script made calls: %+v", rec.calls)
				}
			})
		}
	}
}

// TestArgumentsAreReadOnce: what a call submits is its arguments' own
// properties read once; inherited ones and later changes are not arguments.
func TestArgumentsAreReadOnce(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"prototype_pollution_adds_no_argument", `Object.prototype.path = "/etc/passwd"; await tools.fs__read({}); return 1;`, `{}`},
		{"a_getter_is_read_once", `let n = 0; const a = {get path() { n++; return n === 1 ? "/tmp/ok" : "/etc/passwd"; }}; await tools.fs__read(a); return n;`, `{"path":"/tmp/ok"}`},
		{"changing_the_object_after_the_call_changes_nothing", `const a = {path: "/tmp/ok"}; const p = tools.fs__read(a); a.path = "/etc/passwd"; await p; return 1;`, `{"path":"/tmp/ok"}`},
		{"a_replaced_JSON_stringify_is_not_used", `JSON.stringify = () => '{"path":"/etc/passwd"}'; await tools.fs__read({path: "/tmp/ok"}); return 1;`, `{"path":"/tmp/ok"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			if _, err := Run(context.Background(), c.src, []string{"fs__read"}, rec.call, fast); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(rec.calls[0].Args)
			if len(rec.calls) != 1 || string(got) != c.want {
				t.Fatalf("calls %d, args %s, want %s", len(rec.calls), got, c.want)
			}
		})
	}
	t.Run("a_call_the_script_did_not_wait_for_before_it_returned_is_not_made", func(t *testing.T) {
		rec := &recorder{}
		res, err := Run(context.Background(), `tools.fs__read({path: "x"}); return 1;`, []string{"fs__read"}, rec.call, fast)
		if err != nil || string(res.Value) != "1" || len(rec.calls) != 0 {
			t.Fatalf("%s %v, calls %+v", res.Value, err, rec.calls)
		}
	})
	t.Run("arguments_that_are_not_an_object_reject_without_a_call", func(t *testing.T) {
		rec := &recorder{}
		res, err := Run(context.Background(), `try { await tools.fs__read("a"); } catch (e) { return e.message; }`, []string{"fs__read"}, rec.call, fast)
		if err != nil || !strings.Contains(string(res.Value), "one object of arguments") || len(rec.calls) != 0 {
			t.Fatalf("%s %v %d", res.Value, err, len(rec.calls))
		}
	})
}

// TestTheRunEndingEndsItsCalls: a call still out when the script ends (it
// returned, or its time ran out) sees its context end, so it is withdrawn.
func TestTheRunEndingEndsItsCalls(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"the_script_returned", `tools.fs__read({}); await tools.fs__fast({}); return 1;`},
		{"the_script_timed_out", `await tools.fs__read({});`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ended := make(chan struct{})
			call := func(ctx context.Context, c Call) (any, error) {
				if c.Tool == "fs__fast" {
					return 1, nil
				}
				<-ctx.Done()
				close(ended)
				return nil, ctx.Err()
			}
			lim := fast
			lim.Timeout = 300 * time.Millisecond
			_, _ = Run(context.Background(), c.src, []string{"fs__read", "fs__fast"}, call, lim)
			select {
			case <-ended:
			default:
				t.Fatal("Run returned while a call it started was still waiting")
			}
		})
	}
}

// TestASourceMapCommentReadsNoFile: goja's parser reads the file a
// `//# sourceMappingURL=` comment names unless told not to. The file here is
// a FIFO, so a read is seen: the writer's open returns only when a reader
// opens it.
func TestASourceMapCommentReadsNoFile(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		// The parser looks at the last line (after the wrapper's).
		{"in_the_script", "return 1\n//# sourceMappingURL=%s"},
		{"in_eval", "return eval('1\\n//# sourceMappingURL=%s')"},
		{"in_new_Function", "return new Function('return 1\\n//# sourceMappingURL=%s')()"},
	} {
		for mode, lim := range modes(t) {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				// goja resolves the path against the script's name, which
				// makes it relative: to this test's working directory in
				// process, to the child's ("/") isolated.
				fifo, named := filepath.Join(t.TempDir(), "map"), ""
				if lim.Isolate == "" {
					fifo = fmt.Sprintf(".map-%d", time.Now().UnixNano())
					named = fifo
					t.Cleanup(func() { _ = os.Remove(fifo) })
				}
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				if named == "" {
					named = fifo
				}
				// The writer opens the FIFO (which waits for a reader), writes
				// a mark and closes it. A parser that reads the file takes the
				// mark (os.ReadFile reads to the end, so by the time Run
				// returns the writer is done); otherwise the mark is left for
				// the reader this test opens after Run.
				const mark = "source map"
				wrote := make(chan error, 1)
				go func() {
					f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
					if err == nil {
						_, err = f.WriteString(mark)
						err = errors.Join(err, f.Close())
					}
					wrote <- err
				}()
				res, err := Run(context.Background(), fmt.Sprintf(c.src, named), nil, (&recorder{}).call, lim)
				// Non-blocking: a reader now lets a writer still waiting go.
				r, rerr := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
				if rerr != nil {
					t.Fatal(rerr)
				}
				defer r.Close()
				select {
				case werr := <-wrote:
					if werr != nil {
						t.Fatal(werr)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the FIFO's writer never finished, though the FIFO had a reader")
				}
				left, rerr := io.ReadAll(r)
				if rerr != nil {
					t.Fatal(rerr)
				}
				if string(left) != mark {
					t.Fatalf("running the script read the file its source-map comment names (this test's reader found %q of %q)", left, mark)
				}
				if err != nil || string(res.Value) != "1" {
					t.Fatalf("%s %v", res.Value, err)
				}
			})
		}
	}
}

func TestPreview(t *testing.T) {
	src := `const a = await tools.fs__read({path: "a.txt", n: 2, deep: {x: [1, null, true]}});
await tools["fs__write"]({path: "b.txt", content: a + "!"});
const f = tools.fs__delete; await f({path: "c"});
await tools[name]({});
await tools.fs__list();
await tools.ev__echo({get x() { return 1 }, ...rest, y});`
	calls, more, err := Preview(src, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.String())
	}
	want := []string{
		`tools.fs__read({"path":"a.txt","n":2,"deep":{"x":[1,null,true]}})`,
		`tools.fs__write({"path":"b.txt","content":…})`,
		`tools.fs__list()`,
		`tools.ev__echo({"x":…,…,"y":…})`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || more {
		t.Fatalf("preview:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if calls[0].Line != 1 || calls[1].Line != 2 {
		t.Fatalf("lines %d %d", calls[0].Line, calls[1].Line)
	}
	if _, more, _ := Preview(src, 2); !more {
		t.Fatal("a preview cut to 2 calls does not say more were left out")
	}
	if _, _, err := Preview("return (;", 10); err == nil {
		t.Fatal("a script that does not parse has a preview")
	}
}

// Arguments within the limit pass from the sandbox whatever their
// characters: JSON escaping can make each byte six ('<' is "\u003c") on the
// way from the child, and a call of 200 KB of '<' (under the 256 KiB
// argument limit) failed with a vague error before the child's line was
// sized for it.
func TestArgumentsThatGrowWhenEscapedStillPassFromTheSandbox(t *testing.T) {
	lim := modes(t)["isolated"]
	rec := &recorder{answer: func(call Call) (any, error) { return "read", nil }}
	res, err := Run(context.Background(), `const r = await tools.fs__read({d: "<".repeat(200000)}); return r === "read";`, []string{"fs__read"}, rec.call, lim)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != "true" || len(rec.calls) != 1 {
		t.Fatalf("got %s with %d calls, want true with 1", res.Value, len(rec.calls))
	}
}

// A script's call whose arguments are under MaxArgBytes as JSON but not
// once encoded (a list of numbers: 2 bytes of JSON each, 11 encoded) is
// refused in the sandbox, saying why, before the gateway decodes it (R9
// F1's shape, through run_code).
func TestArgumentsThatCannotFitOnceEncodedAreRefusedInTheSandbox(t *testing.T) {
	for mode, lim := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			rec := &recorder{}
			res, err := Run(context.Background(), `try { await tools.fs__read({a: new Array(100000).fill(0)}); return "sent"; } catch (e) { return e.message; }`, []string{"fs__read"}, rec.call, lim)
			if err != nil {
				t.Fatal(err)
			}
			var said string
			if err := json.Unmarshal(res.Value, &said); err != nil || !strings.Contains(said, "limits.max_request_bytes") || !strings.Contains(said, "by reference") || len(rec.calls) != 0 {
				t.Fatalf("the script got %s with %d calls made; want a refusal naming limits.max_request_bytes and what to do, and no call", res.Value, len(rec.calls))
			}
		})
	}
}
