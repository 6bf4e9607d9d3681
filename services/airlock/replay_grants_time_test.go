package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// `airlock policy replay` decides each recorded call as of the time it was
// first decided, and with the standing grants in force: a grant answers the
// candidate's ask (as the policy service would), never a deny, and a call a
// grant allowed is re-decided like any other. The trail is the events
// stream (no ClickHouse configured).
func TestPolicyReplayDecidesAsOfEachCallsTimeWithTheGrantsInForce(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	shipped, err := decide.LoadDir(ctx, "../../policies")
	if err != nil {
		t.Fatal(err)
	}
	// Far from the wall clock: the candidate denies listings after noon.
	early := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	late := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	pub := bus.NewPublisher(deps.JS, "airlock/policy")
	record := func(id, tool, path string, at time.Time, grantID string) *airlockv1.Decision {
		t.Helper()
		args, _ := structpb.NewStruct(map[string]any{"path": path})
		call := &airlockv1.ToolCall{CallId: id, AgentId: "bot", Server: "fs", Tool: tool, Arguments: args, Revision: 1}
		d, err := shipped.Evaluate(ctx, call, at)
		if err != nil {
			t.Fatal(err)
		}
		if grantID != "" { // a standing grant answered the policy's ask
			if d.GetAction() != airlockv1.Action_ACTION_ASK {
				t.Fatalf("%s: the shipped policy decided %v, want an ask for a grant to answer", id, d.GetAction())
			}
			d.Action, d.GrantId = airlockv1.Action_ACTION_ALLOW, grantID
		}
		if _, err := pub.Publish(ctx, policy.DecisionEvent(call, d), ""); err != nil {
			t.Fatal(err)
		}
		return d
	}
	record("list-early", "list_directory", "/", early, "")
	record("list-late", "list_directory", "/", late, "")
	record("notes-a", "read_file", "/notes/a", early, "")
	record("notes-b", "read_file", "/notes/b", early, "")
	written := record("write-d", "write_file", "/d", late, "g-write")

	// The candidate: listings denied after noon, reads of /notes asked,
	// the asking write rule now a deny.
	cand := t.TempDir()
	src, err := os.ReadFile("../../policies/airlock.rego")
	if err != nil {
		t.Fatal(err)
	}
	rego := strings.Replace(string(src), "\ndecision := d if {", "\nrules_decision := d if {", 1)
	rego += `
decision := {"action": "deny", "rule_id": "late-listing", "reason": sprintf("listed at %s, after noon", [input.time])} if {
	input.call.tool == "list_directory"
	time.now_ns() > time.parse_rfc3339_ns("2025-01-01T11:00:00Z")
} else := rules_decision
`
	raw, err := os.ReadFile("../../policies/data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	rules := data["airlock"].(map[string]any)["rules"].([]any)
	for _, r := range rules {
		if rule := r.(map[string]any); rule["id"] == written.GetRuleId() {
			rule["effect"] = "deny"
		}
	}
	data["airlock"].(map[string]any)["rules"] = append(rules, map[string]any{
		"id": "ask-notes", "priority": 100, "server": "fs", "tool": "read_file", "args": map[string]any{"/path": "/notes/**"},
		"effect": "ask", "reason": "notes are private",
	})
	raw, _ = json.Marshal(data)
	for name, b := range map[string][]byte{"airlock.rego": []byte(rego), "data.json": raw} {
		if err := os.WriteFile(filepath.Join(cand, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Grants in force: one for /notes/a, one for the write (a deny is never
	// answered); a revoked one and an expired one for /notes/b answer nothing.
	kv, err := deps.JS.KeyValue(ctx, deps.Config.Buckets.Grants)
	if err != nil {
		t.Fatal(err)
	}
	alice := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}
	past := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, g := range []*airlockv1.StandingGrant{
		{Id: "g-notes", AgentId: "bot", Server: "fs", Tool: "read_file", RuleId: "ask-notes", ArgumentGlobs: map[string]string{"/path": "/notes/a"}, CreatedBy: alice},
		{Id: "g-write", AgentId: "bot", Server: "fs", Tool: "write_file", RuleId: written.GetRuleId(), CreatedBy: alice},
		{Id: "g-revoked", AgentId: "bot", Server: "fs", Tool: "read_file", RuleId: "ask-notes", ArgumentGlobs: map[string]string{"/path": "/notes/b"}, CreatedBy: alice, Revoked: true},
		{Id: "g-expired", AgentId: "bot", Server: "fs", Tool: "read_file", RuleId: "ask-notes", ArgumentGlobs: map[string]string{"/path": "/notes/b"}, CreatedBy: alice, ExpiresAt: timestamppb.New(past)},
	} {
		b, err := proto.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, g.Id, b); err != nil {
			t.Fatal(err)
		}
	}

	run := func(args ...string) (replay.Report, int) {
		t.Helper()
		cmd := newPolicyReplayCmd(&globals{natsURL: n.URL()})
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"--policy", cand, "--since", "", "--runtime-rules", "none", "--json"}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
		var rep struct {
			replay.Report
			Grants int `json:"grants_in_force"`
		}
		if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return rep.Report, rep.Grants
	}
	changes := func(rep replay.Report) map[string]replay.Change {
		m := map[string]replay.Change{}
		for _, tr := range rep.Transitions {
			for _, c := range tr.Examples {
				m[c.Call] = c
			}
		}
		return m
	}

	rep, inForce := run()
	got := changes(rep)
	cases := []struct {
		name string
		ok   bool
	}{
		{"two grants are in force (not the revoked or the expired one)", inForce == 2},
		{"every recorded call is re-decided, the granted one too", rep.Replayed == 5 && rep.Granted == 1},
		{"a listing decided before noon stays as it was", got["list-early"].Call == ""},
		{"a listing decided after noon is denied, read at its own time", got["list-late"].After == "deny" && got["list-late"].AfterReason == "listed at 2025-01-01T12:00:00Z, after noon" && got["list-late"].At.Equal(late)},
		{"an ask a grant in force answers is no change", got["notes-a"].Call == "" && rep.GrantAllowed == 1},
		{"an ask no grant in force answers is a change", got["notes-b"].Before == "allow" && got["notes-b"].After == "ask" && got["notes-b"].AfterGrant == ""},
		{"the candidate denies a call a grant allowed, which no grant answers", got["write-d"].Before == "allow" && got["write-d"].BeforeGrant == "g-write" && got["write-d"].After == "deny" && got["write-d"].AfterGrant == ""},
		{"three changes, two unchanged", rep.Changed == 3 && rep.Unchanged == 2},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s: does not hold: %+v", c.name, rep)
		}
	}

	rep, inForce = run("--grants", "none")
	if got := changes(rep); inForce != 0 || rep.Changed != 4 || got["notes-a"].After != "ask" || rep.GrantAllowed != 0 {
		t.Errorf("without grants the ask for /notes/a is a change too (4 changes, none granted): %d grants, %+v", inForce, rep)
	}
}
