package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// fakePolicy answers the policy service's rules and eval endpoints from memory.
type fakePolicy struct {
	mu    sync.Mutex
	rules map[string]*airlockv1.PolicyRule
	puts  []*airlockv1.RulePutRequest
}

func startFakePolicy(t *testing.T, deps svc.Deps) *fakePolicy {
	t.Helper()
	f := &fakePolicy{rules: map[string]*airlockv1.PolicyRule{}}
	srv, err := micro.AddService(deps.NC, micro.Config{Name: policyapi.Service, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	g := srv.AddGroup(policyapi.Group)
	log := deps.Log
	for name, h := range map[string]micro.HandlerFunc{
		policyapi.EndpointRulesList: rpc.Handle(log, func() *airlockv1.RulesListRequest { return &airlockv1.RulesListRequest{} },
			func(context.Context, *airlockv1.RulesListRequest) (*airlockv1.RulesListResponse, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				out := &airlockv1.RulesListResponse{PolicyRevision: "rev-42", Fallback: "no rule matches: a reviewer decides",
					BuiltinRules: []*airlockv1.PolicyRule{{Id: "write", Priority: 40, Pattern: "*__write*", Effect: "ask", Reason: "writes need a person",
						ArgumentsMatching: map[string]string{"/file_path": `\.pem$`}, ArgumentsNotMatching: map[string]string{"/mode": `^x$`}}}}
				for _, r := range f.rules {
					out.Rules = append(out.Rules, proto.Clone(r).(*airlockv1.PolicyRule))
				}
				return out, nil
			}),
		policyapi.EndpointRulesPut: rpc.Handle(log, func() *airlockv1.RulePutRequest { return &airlockv1.RulePutRequest{} },
			func(_ context.Context, req *airlockv1.RulePutRequest) (*airlockv1.RulePutResponse, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				if req.Rule.GetEffect() == "maybe" {
					return nil, apierr.New(apierr.InvalidRequest, "effect must be allow, ask or deny")
				}
				f.puts = append(f.puts, req)
				r := proto.Clone(req.Rule).(*airlockv1.PolicyRule)
				r.UpdatedBy = req.By
				f.rules[r.Id] = r
				return &airlockv1.RulePutResponse{Rule: r}, nil
			}),
		policyapi.EndpointRulesDelete: rpc.Handle(log, func() *airlockv1.RuleDeleteRequest { return &airlockv1.RuleDeleteRequest{} },
			func(_ context.Context, req *airlockv1.RuleDeleteRequest) (*airlockv1.RuleDeleteResponse, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				if _, ok := f.rules[req.Id]; !ok {
					return nil, apierr.New(apierr.NotFound, "no rule %s", req.Id)
				}
				delete(f.rules, req.Id)
				return &airlockv1.RuleDeleteResponse{Deleted: true}, nil
			}),
		policyapi.EndpointEval: rpc.Handle(log, func() *airlockv1.PolicyEvalRequest { return &airlockv1.PolicyEvalRequest{} },
			func(_ context.Context, req *airlockv1.PolicyEvalRequest) (*airlockv1.PolicyEvalResponse, error) {
				return &airlockv1.PolicyEvalResponse{Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_DENY, Risk: airlockv1.Risk_RISK_CRITICAL,
					Reason: "no " + req.Call.GetTool() + " for " + req.Call.GetArguments().GetFields()["path"].GetStringValue(), RuleId: "r1", PolicyRevision: "rev-42"}}, nil
			}),
	} {
		if err := g.AddEndpoint(nameOf(name), h, micro.WithEndpointSubject(name)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestRulesPage(t *testing.T) {
	e := newEnv(t)
	admin := e.browser()
	admin.signIn("root")

	t.Run("without a policy service the page says so", func(t *testing.T) {
		p := admin.get("/rules")
		if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="rules-unavailable"`) {
			t.Fatalf("%d\n%s", p.Status, p.Body)
		}
	})
	pol := startFakePolicy(t, e.deps)
	t.Run("an admin adds a rule and sees it with the policy revision", func(t *testing.T) {
		p := admin.submit("/rules", url.Values{"id": {"tmp-writes"}, "priority": {"5"}, "pattern": {"fs__write_*"}, "args": {"/path = /tmp/**"},
			"effect": {"allow"}, "risk": {"low"}, "reason": {"scratch space"}, "approvers": {"alice, group:ops"}, "quorum": {"2"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("%d %s", p.Status, p.Body)
		}
		put := pol.puts[len(pol.puts)-1]
		if put.By.GetId() != "root" || put.Rule.GetArgs()["/path"] != "/tmp/**" || strings.Join(put.Rule.GetApprovers(), ",") != "alice,group:ops" || put.Rule.GetQuorum() != 2 || put.Rule.GetPriority() != 5 {
			t.Fatalf("put %v", put)
		}
		page := admin.get("/rules")
		for _, want := range []string{"rev-42", `id="rule-tmp-writes"`, "name fs__write_*", "/path = /tmp/**", "rule tmp-writes saved",
			`id="builtin-rules"`, `id="rule-write"`, "writes need a person", "no rule matches: a reviewer decides",
			// A rule's conditions on named arguments, both ways.
			`/file_path matches \.pem$`, "/mode does not match ^x$"} {
			if !strings.Contains(page.Body, want) {
				t.Fatalf("rules page lacks %q:\n%s", want, page.Body)
			}
		}
	})
	t.Run("a rule the policy service refuses shows its sentence", func(t *testing.T) {
		p := admin.submit("/rules", url.Values{"id": {"bad"}, "effect": {"maybe"}, "reason": {"x"}})
		if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "effect must be allow, ask or deny") {
			t.Fatalf("%d %s", p.Status, p.Body)
		}
	})
	t.Run("a reviewer sees the rules but cannot change them", func(t *testing.T) {
		b := e.browser()
		b.signIn("alice")
		if p := b.get("/rules"); !strings.Contains(p.Body, "tmp-writes") || strings.Contains(p.Body, `id="rule-form"`) {
			t.Fatalf("reviewer's rules page:\n%s", p.Body)
		}
		if p := b.submit("/rules", url.Values{"id": {"x"}, "effect": {"allow"}}); p.Status != http.StatusForbidden {
			t.Fatalf("reviewer put: %d", p.Status)
		}
		if p := b.submit("/rules/tmp-writes/delete", nil); p.Status != http.StatusForbidden {
			t.Fatalf("reviewer delete: %d", p.Status)
		}
	})
	t.Run("a dry run shows the decision and runs nothing", func(t *testing.T) {
		p := admin.submit("/rules/eval", url.Values{"tool": {"fs__delete_file"}, "arguments": {`{"path":"/etc/passwd"}`}})
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "no delete_file for /etc/passwd") || !strings.Contains(p.Body, `<strong id="eval-action">deny</strong>`) {
			t.Fatalf("%d\n%s", p.Status, p.Body)
		}
		if p := admin.submit("/rules/eval", url.Values{"tool": {"nounderscores"}}); p.Status != http.StatusBadRequest {
			t.Fatalf("unqualified tool: %d", p.Status)
		}
	})
	t.Run("an admin removes a rule", func(t *testing.T) {
		if p := admin.submit("/rules/tmp-writes/delete", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("%d %s", p.Status, p.Body)
		}
		if p := admin.get("/rules"); strings.Contains(p.Body, `id="rule-tmp-writes"`) {
			t.Fatal("the removed rule is still listed")
		}
		if p := admin.submit("/rules/tmp-writes/delete", nil); p.Status != http.StatusNotFound {
			t.Fatalf("removing it again: %d", p.Status)
		}
	})
}
