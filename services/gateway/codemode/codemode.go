// Package codemode runs a model's JavaScript (the gateway's run_code tool,
// seed 001's "code mode") in goja, a JavaScript interpreter in Go, with
// nothing but the tools it is given — in this process, or isolated in a
// child process (Limits.Isolate).
//
// What a script can reach: the ECMAScript built-ins (without ArrayBuffer,
// typed arrays and DataView, which allocate in one step), `tools` — one
// async function per tool, tools.server__tool(args) — and console.log. There
// is no require, import, timer, file system, network or process: goja has
// none unless the host adds them, and this host adds none.
//
// What is enforced:
//   - Timeout: wall-clock time of the whole run, waits for people included.
//   - Busy: wall-clock time the script itself may spend running (between
//     its awaits), summed; an endless loop ends here (vm.Interrupt, which
//     no try/catch can catch).
//   - MaxScriptBytes, MaxCalls (the tool calls of one run), MaxArgBytes
//     (one call's arguments as JSON, and as airlock encodes them, which a
//     list of numbers is 5 times: ingress.ArgumentsFit), MaxOutputBytes
//     (the returned value as JSON plus console output).
//   - Memory: goja has no heap limit, so a watchdog samples the process's
//     heap every millisecond while the script runs JavaScript (never while
//     it waits for its calls: a wait for a person may last minutes, and a
//     ticking watchdog would spend CPU through it), and once more each time
//     it yields; when it is more than
//     MaxMemoryBytes over the live heap at the start, a garbage collection
//     confirms that the live heap grew that much and the script is
//     interrupted. The built-ins that allocate a caller-chosen size in one
//     step (String repeat/padStart/padEnd, Array join/fill, Function apply
//     with an array-like) refuse sizes over MaxStringBytes / MaxArrayLength
//     first, since an interrupt lands only between JavaScript steps.
//
// In this process that is a bound on growth, not a hard cap, and a built-in
// that runs long in one Go step (a backtracking regular expression) cannot
// be interrupted. Isolate (child.go) runs the script in a child process
// with an address-space and a CPU-time limit, which are hard caps; the
// gateway always isolates.
//
// Every tool call runs through Caller on its own goroutine; its promise is
// settled on the run's goroutine only (goja is not goroutine-safe). Calls a
// script issues in one stretch of running are started only when it yields
// still running: a script that goes over MaxCalls in a loop, is stopped, or
// ends without waiting for them starts none of that stretch. When a run
// ends, the context of the calls still out ends, and the gateway withdraws
// those still waiting for a person.
package codemode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// Limits bound one run. Zero fields take the defaults (Defaults).
type Limits struct {
	Timeout        time.Duration
	Busy           time.Duration
	MaxScriptBytes int
	MaxCalls       int
	MaxArgBytes    int
	MaxOutputBytes int
	MaxMemoryBytes uint64
	MaxStringBytes int
	MaxArrayLength int
	// Isolate is the program to run the script in, as a child process (its
	// main calls MaybeChild); "" runs it in this process.
	Isolate string
}

// Defaults are the limits of a run unless configured otherwise.
var Defaults = Limits{
	Timeout: 10 * time.Minute, Busy: 5 * time.Second, MaxScriptBytes: 64 << 10, MaxCalls: 50,
	MaxArgBytes: 256 << 10, MaxOutputBytes: 64 << 10, MaxMemoryBytes: 128 << 20,
	MaxStringBytes: 4 << 20, MaxArrayLength: 1 << 20,
}

// WithDefaults fills l's zero fields from Defaults.
func (l Limits) WithDefaults() Limits {
	d := Defaults
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.Busy <= 0 {
		l.Busy = d.Busy
	}
	if l.MaxMemoryBytes == 0 {
		l.MaxMemoryBytes = d.MaxMemoryBytes
	}
	pick(&l.MaxScriptBytes, d.MaxScriptBytes)
	pick(&l.MaxCalls, d.MaxCalls)
	pick(&l.MaxArgBytes, d.MaxArgBytes)
	pick(&l.MaxOutputBytes, d.MaxOutputBytes)
	pick(&l.MaxStringBytes, d.MaxStringBytes)
	pick(&l.MaxArrayLength, d.MaxArrayLength)
	return l
}

// CheckSize is the *Error for a script over MaxScriptBytes, else nil.
// Check it before anything parses the script (Preview too): goja's parser
// recurses once per nesting level, and a deep enough script overflows the
// stack, which ends the whole process.
func (l Limits) CheckSize(src string) error {
	if len(src) > l.MaxScriptBytes {
		return fail(KindLimit, "the script is %d bytes, over the limit of %d: send a shorter script", len(src), l.MaxScriptBytes)
	}
	return nil
}

// Call is one tool call a script makes.
type Call struct {
	// Index counts the run's calls from 1.
	Index int
	// Tool is the qualified name, "server__tool".
	Tool string
	// Args is the script's argument object, read once (JSON of its own
	// enumerable properties): what the policy decides is what runs.
	Args map[string]any
}

// Caller runs one call and blocks until its outcome: the value the
// script's promise resolves with (JSON-like: maps, slices, strings, numbers,
// bools, nil), or an error whose message the promise rejects with. ctx ends
// when the run ends; a call still waiting then must be withdrawn.
type Caller func(ctx context.Context, c Call) (any, error)

// Result is what a run returned.
type Result struct {
	// Value is the script's return value as JSON ("null" for none).
	Value json.RawMessage
	// Logs is what the script wrote with console.log, one line per call.
	Logs []string
	// Calls is how many tool calls it made.
	Calls int
}

// Kinds of Error.
const (
	KindSyntax  = "syntax"  // the script does not parse
	KindThrown  = "thrown"  // it threw, or its promise rejected
	KindTimeout = "timeout" // Timeout or Busy passed
	KindMemory  = "memory"  // it allocated more than allowed
	KindLimit   = "limit"   // script size, calls, output
	KindStalled = "stalled" // it awaits something that can never happen
)

// Error is why a run ended without a result; Message is written for the
// model.
type Error struct {
	Kind    string
	Message string
}

func (e *Error) Error() string { return e.Message }

func fail(kind, format string, a ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, a...)}
}

// Digest is "sha256:" and the hex SHA-256 of a script's text.
func Digest(src string) string {
	h := sha256.Sum256([]byte(src))
	return "sha256:" + hex.EncodeToString(h[:])
}

// prefix and suffix make the script the body of an async function, so it
// may await and return; the preview parses the same text.
const (
	prefix = "(async function () {\n"
	suffix = "\n})()"
)

// wrap is the program a script runs as.
func wrap(src string) string { return prefix + src + suffix }

// Run runs src with one async function per name in tools and returns what it
// returned. It returns an *Error for anything the script did (its message is
// for the model); nothing the script does reaches past call.
func Run(ctx context.Context, src string, tools []string, call Caller, lim Limits) (Result, error) {
	return runWith(ctx, src, tools, call, lim, nil)
}

// runWith is Run with arm, when not nil, called each time the script is
// about to run JavaScript with the busy time it has left (the child re-arms
// its CPU-time limit with it, so time spent waiting never counts).
func runWith(ctx context.Context, src string, tools []string, call Caller, lim Limits, arm func(left time.Duration) error) (Result, error) {
	lim = lim.WithDefaults()
	if err := lim.CheckSize(src); err != nil {
		return Result{}, err
	}
	if lim.Isolate != "" {
		return runIsolated(ctx, src, tools, call, lim)
	}
	prog, err := compile(src)
	if err != nil {
		return Result{}, fail(KindSyntax, "the script does not parse: %s. Fix it and send it again (it runs as the body of an async function: use await and return).", syntaxMessage(err))
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	r := &run{ctx: ctx, lim: lim, call: call, arm: arm, vm: goja.New(), settled: make(chan settle, lim.MaxCalls)}
	defer r.wg.Wait()
	defer cancel() // before Wait: calls still out are withdrawn
	if err := r.setup(tools); err != nil {
		return Result{}, fmt.Errorf("set up the script's runtime: %w", err)
	}
	r.memLimit = r.heapLimit()
	return r.loop(prog)
}

// settle is a finished call, to be settled on the run's goroutine.
type settle struct {
	p     pending
	value any
	err   error
}

type pending struct {
	c       Call
	resolve func(any) error
	reject  func(any) error
}

type run struct {
	ctx  context.Context
	lim  Limits
	call Caller
	arm  func(left time.Duration) error
	vm   *goja.Runtime
	wg   sync.WaitGroup
	// memLimit is the heap the script may reach (heapLimit).
	memLimit uint64

	// Touched only on the run's goroutine.
	queued   []pending // issued, started when the script yields
	out      int       // calls started and not yet settled
	calls    int
	output   int
	logs     []string
	busyUsed time.Duration
	settled  chan settle
	// The original built-ins, taken before the script can replace them.
	stringify, parse     goja.Callable
	errorCtor, typeError *goja.Object
}

// Interrupt values: why the script was stopped.
var (
	errBusy   = errors.New("busy")
	errMemory = errors.New("memory")
	errCalls  = errors.New("calls")
	errOutput = errors.New("output")
)

func (r *run) loop(prog *goja.Program) (Result, error) {
	var top goja.Value
	if err := r.enter(func() (err error) { top, err = r.vm.RunProgram(prog); return err }); err != nil {
		return Result{}, err
	}
	promise, ok := top.Export().(*goja.Promise)
	if !ok {
		return Result{}, fmt.Errorf("the script's wrapper returned %T, not a promise", top.Export())
	}
	for {
		// A script that ended does not make the calls it issued in its last
		// stretch (it did not wait for them); calls still out are withdrawn.
		switch promise.State() {
		case goja.PromiseStateFulfilled:
			return r.result(promise.Result())
		case goja.PromiseStateRejected:
			return Result{}, fail(KindThrown, "the script failed: %s", r.describe(promise.Result()))
		}
		r.startQueued()
		if r.out == 0 {
			return Result{}, fail(KindStalled, "the script never finished: it awaits something that can never happen (only tools.* calls settle; there are no timers)")
		}
		select {
		case <-r.ctx.Done():
			return Result{}, fail(KindTimeout, "the script did not finish within %s (waits for people included): it was stopped, and calls still waiting were withdrawn", r.lim.Timeout)
		case s := <-r.settled:
			r.out--
			if err := r.enter(func() error { return r.settleCall(s) }); err != nil {
				return Result{}, err
			}
		}
	}
}

// enter runs fn (which runs JavaScript) under the busy budget and the
// memory watchdog, and turns an interrupt into the error the model sees.
// Only here does anything watch the script: between two enters it waits
// for its calls, and nothing of it runs.
func (r *run) enter(fn func() error) error {
	left := r.lim.Busy - r.busyUsed
	if left <= 0 {
		return r.stopped(errBusy)
	}
	if r.arm != nil {
		if err := r.arm(left); err != nil {
			return err
		}
	}
	start := time.Now()
	t := time.AfterFunc(left, func() { r.vm.Interrupt(errBusy) })
	stopWatch := r.watchMemory()
	err := fn()
	stopWatch()
	t.Stop()
	r.busyUsed += time.Since(start)
	// A stretch shorter than the watchdog's tick is looked at here, before
	// the script waits: its growth is never left for the next stretch.
	if err == nil && r.overMemory() {
		return r.stopped(errMemory)
	}
	var ie *goja.InterruptedError
	var ex *goja.Exception
	var so *goja.StackOverflowError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ie):
		if v, ok := ie.Value().(error); ok {
			return r.stopped(v)
		}
		return fail(KindThrown, "the script was stopped: %v", ie.Value())
	case errors.As(err, &so):
		return fail(KindThrown, "the script recursed too deeply (stack overflow)")
	case errors.As(err, &ex):
		return fail(KindThrown, "the script failed: %s", r.describe(ex.Value()))
	}
	return fail(KindThrown, "the script failed: %v", err)
}

// stopped is the error for an interrupt; queued calls are dropped unstarted.
func (r *run) stopped(why error) error {
	r.queued = nil
	switch why {
	case errBusy:
		return fail(KindTimeout, "the script ran for more than %s without waiting (an endless loop?): it was stopped, and calls still waiting were withdrawn", r.lim.Busy)
	case errMemory:
		return fail(KindMemory, "the script allocated more than %d MiB: it was stopped, and calls still waiting were withdrawn", r.lim.MaxMemoryBytes>>20)
	case errCalls:
		return fail(KindLimit, "the script made more than %d tool calls in one run: it was stopped, and the calls of its last stretch were not made; split the work", r.lim.MaxCalls)
	case errOutput:
		return fail(KindLimit, "the script's output (returned value and console.log) is over %d bytes: return less", r.lim.MaxOutputBytes)
	}
	return fail(KindThrown, "the script was stopped: %v", why)
}

// startQueued starts the calls issued since the script last yielded.
func (r *run) startQueued() {
	for _, p := range r.queued {
		r.out++
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			v, err := r.call(r.ctx, p.c)
			r.settled <- settle{p: p, value: v, err: err}
		}()
	}
	r.queued = nil
}

// settleCall resolves or rejects a call's promise (on the run's goroutine).
func (r *run) settleCall(s settle) error {
	if s.err != nil {
		e, err := r.vm.New(r.errorCtor, r.vm.ToValue(s.err.Error()))
		if err != nil {
			return err
		}
		_ = e.Set("tool", s.p.c.Tool)
		return s.p.reject(e)
	}
	raw, err := json.Marshal(s.value)
	if err != nil {
		return s.p.reject(fmt.Sprintf("the result of %s could not be read: %v", s.p.c.Tool, err))
	}
	v, err := r.parse(goja.Undefined(), r.vm.ToValue(string(raw)))
	if err != nil {
		return err
	}
	return s.p.resolve(v)
}

// result is the fulfilled value as JSON, within the output limit.
func (r *run) result(v goja.Value) (Result, error) {
	out := Result{Value: json.RawMessage("null"), Logs: append([]string{}, r.logs...), Calls: r.calls}
	if v == nil || goja.IsUndefined(v) {
		return out, nil
	}
	var s goja.Value
	if err := r.enter(func() (err error) { s, err = r.stringify(goja.Undefined(), v); return err }); err != nil {
		return Result{}, err
	}
	if s == nil || goja.IsUndefined(s) {
		return out, nil
	}
	text := s.String()
	if len(text)+r.output > r.lim.MaxOutputBytes {
		return Result{}, r.stopped(errOutput)
	}
	out.Value = json.RawMessage(text)
	return out, nil
}

// describe is a thrown value as text for the model, bounded. Reading an
// error's message may run the script's getters: they get describeFor, and
// a value that cannot be read is said to be so.
func (r *run) describe(v goja.Value) (text string) {
	if v == nil {
		return "undefined"
	}
	t := time.AfterFunc(describeFor, func() { r.vm.Interrupt(errBusy) })
	defer func() {
		t.Stop()
		if recover() != nil {
			text = "(a thrown value that cannot be shown)"
		}
		r.vm.ClearInterrupt() // the run ends after this; nothing else is pending
	}()
	if o, ok := v.(*goja.Object); ok {
		if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
			name := "Error"
			if n := o.Get("name"); n != nil && !goja.IsUndefined(n) {
				name = safeString(n)
			}
			text = name + ": " + safeString(m)
		}
	}
	if text == "" {
		text = safeString(v)
	}
	const most = 2000
	if len(text) > most {
		text = strings.ToValidUTF8(text[:most], "") + "…"
	}
	return text
}

// describeFor bounds the script code describing a thrown value may run.
const describeFor = 100 * time.Millisecond

// safeString converts without running script code that could throw.
func safeString(v goja.Value) (s string) {
	defer func() {
		if recover() != nil {
			s = "(a value that cannot be shown)"
		}
	}()
	if _, ok := v.(*goja.Object); ok {
		return "(an object)"
	}
	return v.String()
}

func syntaxMessage(err error) string {
	msg := err.Error()
	var pe *goja.CompilerSyntaxError
	if errors.As(err, &pe) {
		msg = pe.Error()
	}
	// Line numbers count from the script's own first line.
	msg = strings.TrimSpace(strings.ReplaceAll(msg, "script.js: ", ""))
	return msg
}

// heapLimit is the heap the script may reach: MaxMemoryBytes over what it
// holds at the start. heap: live and not yet collected objects, current;
// live: what the last collection kept. The base is the smaller: garbage
// left by others does not count against the script, nor what was live at
// the last collection and is garbage now. (Live objects allocated since
// that collection may lower it: the bound errs on the strict side.)
func (r *run) heapLimit() uint64 {
	heap, live := readHeap()
	return min(heap, live) + r.lim.MaxMemoryBytes
}

// readHeap is the heap's objects now and what the last collection kept.
func readHeap() (heap, live uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64(), sample[1].Value.Uint64()
}

// overMemory says whether the script's heap is over its limit; garbage
// counts until it is collected, so a heap over it is collected and looked
// at again.
func (r *run) overMemory() bool {
	if heap, _ := readHeap(); heap <= r.memLimit {
		return false
	}
	runtime.GC()
	_, live := readHeap()
	return live > r.memLimit
}

// watchMemory interrupts the script when its heap goes over its limit,
// looking every millisecond until the returned func is called (when the
// script stops running JavaScript).
func (r *run) watchMemory() func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if r.overMemory() {
				r.vm.Interrupt(errMemory)
				return
			}
		}
	}()
	return func() { close(stop); <-done }
}

// parse parses a script as it runs. Source maps are off: goja's parser
// would otherwise read the file a `//# sourceMappingURL=` comment names.
func parse(src string) (*ast.Program, error) {
	return goja.Parse("script.js", wrap(src), parser.WithDisableSourceMaps)
}

func compile(src string) (*goja.Program, error) {
	prg, err := parse(src)
	if err != nil {
		return nil, err
	}
	return goja.CompileAST(prg, true)
}
