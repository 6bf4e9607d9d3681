package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

func call(server, tool string, args map[string]any) *airlockv1.ToolCall {
	st, _ := structpb.NewStruct(args)
	return &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: server, Tool: tool, Arguments: st}
}

// The compiled rules (what the service evaluates) and the plain data path
// (what `opa test` evaluates) must decide every call alike.
func TestCompiledRulesDecideLikeThePlainPolicy(t *testing.T) {
	for _, bindings := range []map[string]string{{"sup": "supervised"}, {"*": "safe", "sup": "supervised"}} {
		t.Run(fmt.Sprint(bindings), func(t *testing.T) { compiledDecidesLikePlain(t, bindings) })
	}
}

func compiledDecidesLikePlain(t *testing.T, bindings map[string]string) {
	ctx := context.Background()
	rules := append(policy.BenchRules(100),
		&airlockv1.PolicyRule{Id: "camel", Priority: 1, ToolPattern: "bulk*", Effect: "deny", Redact: []string{"/token"}},
		// "*" among tool_words matches every tool, as word_matches says.
		&airlockv1.PolicyRule{Id: "any-word", Priority: 2, Server: "starsrv", ToolWords: []string{"zzz", "*"}, Effect: "deny", Risk: "high"},
		&airlockv1.PolicyRule{Id: "words-and-server", Priority: 3, Server: "mail", ToolWords: []string{"send"}, Effect: "ask", Approvers: []string{"group:comms"}, Redact: []string{"/body", "/to"}},
		// Seed 002's user allowlist: a refusal for everyone else.
		&airlockv1.PolicyRule{Id: "allowlist", Priority: 4, Server: "notes", Principals: []string{"alice"}, Effect: "ask", Approvers: []string{"requester"}, QueuePerThread: true, Redact: []string{"/secret"}},
		// A command rule of the run-time kind.
		&airlockv1.PolicyRule{Id: "make-ok", Priority: 5, Server: "build", Tool: "sh", Commands: map[string]string{"/cmd": "make *"}, Effect: "allow"},
	)
	// An empty tool_words list in data.json matches no tool, as word_matches says.
	def := mustDefault(t)
	raw, _ := json.Marshal(def.Data)
	var data0 map[string]any
	_ = json.Unmarshal(raw, &data0)
	al := data0["airlock"].(map[string]any)
	al["rules"] = append(al["rules"].([]any), map[string]any{"id": "no-words", "priority": 4, "server": "mail", "tool_words": []any{}, "effect": "deny"})
	code, err := policy.NewCode(def.Modules, data0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := policy.NewEvaluator(ctx, code, rules, bindings)
	if err != nil {
		t.Fatal(err)
	}
	mods := ev.Modules()
	delete(mods, policy.GeneratedModule)
	data := ev.Data()
	var regoOpts []func(*rego.Rego)
	for n, m := range mods {
		regoOpts = append(regoOpts, rego.Module(n, m))
	}
	plain, err := rego.New(append(regoOpts, rego.Query(policy.Query), rego.Store(storeOf(t, data)))...).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The same modules plus the generated one, as OPA's REST server runs them:
	// its whole document must equal the plain policy's, key for key.
	compiled, err := rego.New(append(regoOpts, rego.Module(policy.GeneratedModule, ev.Modules()[policy.GeneratedModule]), rego.Query(policy.Query), rego.Store(storeOf(t, data)))...).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := []*airlockv1.ToolCall{
		call("fs", "read_file", map[string]any{"path": "/x"}),
		call("fs", "delete_file", map[string]any{"path": "/etc/x"}),
		call("fs", "delete_file", map[string]any{"path": "/tmp/x"}),
		call("fs", "deleteFile", map[string]any{}),
		call("srv3", "tool_3", map[string]any{}),
		call("x", "op12_thing", map[string]any{}),
		call("fs", "tool_9", map[string]any{"path": "/data/9/a"}),
		call("fs", "bulk_delete", map[string]any{"token": "t"}),
		call("stripe", "create_refund", map[string]any{}),
		call("weird", "frobnicate", map[string]any{}),
		{AgentId: "sup", CallId: "c", Revision: 1, Server: "filesystem", Tool: "read_file", Arguments: &structpb.Struct{}},
		{AgentId: "sup", CallId: "c", Revision: 1, Server: "filesystem", Tool: "delete_file", Arguments: &structpb.Struct{}},
		call("starsrv", "frobnicate", map[string]any{}),
		call("mail", "sendMessage", map[string]any{"to": "x", "body": "y"}),
		call("mail", "read_inbox", map[string]any{}),
		call("fs", "delete_file", map[string]any{"path": "/tmp/../etc/passwd"}),
		call("claude", "Bash", map[string]any{"command": "git status"}),
		call("claude", "Bash", map[string]any{"command": "git status; rm -rf ~"}),
		call("claude", "Bash", map[string]any{"command": "npm test > out.txt"}),
		call("claude", "Read", map[string]any{"file_path": "/x"}),
		call("claude", "Edit", map[string]any{"file_path": "/x"}),
		call("build", "sh", map[string]any{"cmd": "make test && make lint"}),
		call("build", "sh", map[string]any{"cmd": "make test && rm x"}),
		{AgentId: "bot", CallId: "c", Revision: 1, Server: "notes", Tool: "write", OnBehalfOf: "alice", OnBehalfOfVerified: true, Arguments: &structpb.Struct{}},
		{AgentId: "bot", CallId: "c", Revision: 1, Server: "notes", Tool: "write", OnBehalfOf: "mallory", OnBehalfOfVerified: true, Arguments: &structpb.Struct{}},
		{AgentId: "bot", CallId: "c", Revision: 1, Server: "notes", Tool: "write", OnBehalfOf: "alice", Arguments: &structpb.Struct{}},
	}
	for _, c := range calls {
		got, err := ev.Evaluate(ctx, c, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		in, _ := policy.Input(c)
		m := in.(map[string]any)["call"].(map[string]any)
		delete(m, "tool_words") // the plain path computes them itself
		rs, err := plain.Eval(ctx, rego.EvalInput(in))
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s__%s plain: %v", c.Server, c.Tool, err)
		}
		want := rs[0].Expressions[0].Value.(map[string]any)
		full, _ := policy.Input(c) // with tool_words, as the service sends it
		crs, err := compiled.Eval(ctx, rego.EvalInput(full))
		if err != nil || len(crs) == 0 {
			t.Fatalf("%s__%s compiled: %v", c.Server, c.Tool, err)
		}
		pj, _ := json.Marshal(want)
		cj, _ := json.Marshal(crs[0].Expressions[0].Value)
		if string(pj) != string(cj) {
			t.Errorf("%s__%s (agent %s): compiled document %s, plain %s", c.Server, c.Tool, c.AgentId, cj, pj)
		}
		if got.Action.String() != "ACTION_"+strings.ToUpper(want["action"].(string)) || got.RuleId != want["rule_id"] || got.Reason != want["reason"] {
			t.Errorf("%s__%s: compiled %v %q %q, plain %v %q %q", c.Server, c.Tool, got.Action, got.RuleId, got.Reason, want["action"], want["rule_id"], want["reason"])
		}
		if fmt.Sprint(got.Redact) != fmt.Sprint(want["redact"]) || !strings.EqualFold("RISK_"+fmt.Sprint(want["risk"]), got.Risk.String()) {
			t.Errorf("%s__%s: compiled risk %v redact %v, plain %v %v", c.Server, c.Tool, got.Risk, got.Redact, want["risk"], want["redact"])
		}
	}
}

func TestSeedExamplesDecideAsTheSeedsSay(t *testing.T) {
	ctx := context.Background()
	seed000 := []*airlockv1.PolicyRule{
		{Id: "p1", Priority: 1, ToolPattern: "delete_*", Effect: "ask"},
		{Id: "p2", Priority: 2, Server: "fs-server", Tool: "read_file", Effect: "allow"},
		{Id: "p10", Priority: 10, Tool: "*", Effect: "ask"},
	}
	code, err := policy.NewCode(mustDefault(t).Modules, nil) // the seed's rules alone
	if err != nil {
		t.Fatal(err)
	}
	ev, err := policy.NewEvaluator(ctx, code, seed000, nil)
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
			ev, err := policy.LoadDir(ctx, dir)
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
	ev, err := policy.LoadDefault(context.Background())
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
	if _, err := policy.LoadDir(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "p.rego") {
		t.Fatalf("err %v: want a compile error naming p.rego", err)
	}
}

func mustDefault(t *testing.T) *policy.Code {
	t.Helper()
	c, err := policy.DefaultCode()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ExampleEvaluator decides one call with the built-in default policy, as
// `airlock policy eval` and `airlock policy replay` do, without a bus.
func ExampleEvaluator() {
	ctx := context.Background()
	ev, err := policy.LoadDefault(ctx)
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
		if got := strings.Join(policy.ToolWords(tool), " "); got != want {
			t.Errorf("ToolWords(%q) = %q, want %q", tool, got, want)
		}
	}
}

// The decision's arguments_digest binds approvals to arguments, so the
// policy's own encoder must give canon.Digest's bytes for every value.
func TestArgumentsDigestIsCanonDigest(t *testing.T) {
	ctx := context.Background()
	ev, err := policy.LoadDefault(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]map[string]any{
		"empty":             {},
		"plain":             {"path": "/tmp/x", "encoding": "utf-8"},
		"keys sort by byte": {"b": 1, "a": 2, "B": 3, "é": 4, "a\x00": 5, "aa": 6},
		"numbers":           {"int": 3, "neg": -2.5, "tiny": 1e-7, "small": 0.000001, "big": 1e21, "just under": 1e20, "pi": 3.141592653589793, "zero": 0, "negzero": -0.0, "max": 1.7976931348623157e308},
		"escaped strings":   {"html": "<a href=\"x\">&</a>", "lt": "a<b", "gt": "a>b", "amp": "a&b", "ctl": "tab\there\nnew\x01", "unicode": "héllo ☃ \u2028 \u2029", "slash": `back\slash /`},
		"nesting":           {"list": []any{1, "two", nil, true, false, []any{}, map[string]any{}}, "obj": map[string]any{"z": map[string]any{"y": []any{map[string]any{"x": "<>"}}}}},
	} {
		st, err := structpb.NewStruct(args)
		if err != nil {
			t.Fatal(err)
		}
		if name == "escaped strings" { // NewStruct refuses invalid UTF-8; a decoded message may still hold it
			st.Fields["bad utf8 \xff"] = structpb.NewStringValue("\xff\xfe")
		}
		d, _ := ev.Evaluate(ctx, &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: "fs", Tool: "read_file", Arguments: st}, time.Now())
		want, _ := canon.Digest(st)
		if d.ArgumentsDigest != want {
			raw, _ := canon.JSON(st)
			t.Errorf("%s: digest %s, canon.Digest %s (canonical JSON %s)", name, d.ArgumentsDigest, want, raw)
		}
	}
	d, _ := ev.Evaluate(ctx, &airlockv1.ToolCall{AgentId: "bot", CallId: "c", Revision: 1, Server: "fs", Tool: "read_file"}, time.Now())
	if want, _ := canon.Digest(nil); d.ArgumentsDigest != want {
		t.Errorf("no arguments: digest %s, canon.Digest %s", d.ArgumentsDigest, want)
	}
}

func TestAUserAllowlistDeniesEveryoneElseAndTheQueueFlagReachesTheDecision(t *testing.T) {
	ctx := context.Background()
	ev, err := policy.NewEvaluator(ctx, mustDefault(t), []*airlockv1.PolicyRule{
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
