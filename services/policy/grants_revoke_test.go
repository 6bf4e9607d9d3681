package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// The grants in force are a snapshot the watcher replaces after a burst of
// changes, so it may still hold a grant the bucket has revoked, expired or
// deleted (here it always does: nothing runs the watcher). Such a grant
// must allow nothing from the moment the bucket holds the change.
func TestAGrantTheBucketNoLongerHoldsAllowsNothingThoughTheSnapshotStillDoes(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	deps := testenv.Deps(t, cfg)
	ctx := context.Background()
	grants, err := deps.JS.KeyValue(ctx, cfg.Buckets.Grants)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(id string) *airlockv1.StandingGrant {
		return &airlockv1.StandingGrant{Id: id, AgentId: "bot", Server: "demo", Tool: "write_file", RuleId: "write"}
	}
	put := func(g *airlockv1.StandingGrant) {
		b, _ := proto.Marshal(g)
		if _, err := grants.Put(ctx, g.Id, b); err != nil {
			t.Fatal(err)
		}
	}
	changes := map[string]func(id string){
		"revoked":     func(id string) { g := grant(id); g.Revoked = true; put(g) },
		"expired":     func(id string) { g := grant(id); g.ExpiresAt = timestamppb.New(time.Now().Add(-time.Second)); put(g) },
		"used-up":     func(id string) { g := grant(id); g.LimitedUses = true; put(g) },
		"other-agent": func(id string) { g := grant(id); g.AgentId = "other"; put(g) },
		"deleted": func(id string) {
			if err := grants.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		},
	}
	for why := range changes {
		put(grant("g-" + why))
	}
	e, err := NewEngine(ctx, deps)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/a", "content": "x"})
	calls := 0
	decide := func() *airlockv1.Decision {
		calls++
		return e.Decide(ctx, &airlockv1.ToolCall{AgentId: "bot", CallId: fmt.Sprint("c", calls), Revision: 1, Server: "demo", Tool: "write_file", Arguments: args})
	}
	if d := decide(); d.Action != airlockv1.Action_ACTION_ALLOW || d.GrantId == "" {
		t.Fatalf("with the grants in force: %v %q, want an allow by one of them", d.Action, d.Reason)
	}
	for why, change := range changes {
		change("g-" + why)
	}
	if len(e.grantSnapshot()) != len(changes) {
		t.Fatalf("the snapshot holds %d grants, want all %d still (the test needs it stale)", len(e.grantSnapshot()), len(changes))
	}
	if d := decide(); d.Action != airlockv1.Action_ACTION_ASK {
		t.Errorf("after every grant was changed in the bucket: %v by grant %q, want ask", d.Action, d.GrantId)
	}
}
