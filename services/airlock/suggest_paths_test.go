package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Only a file-system path is widened to a directory glob: pushes people
// approved to refs/heads/a and refs/heads/b are proposed as exactly those
// two refs, so once adopted a push to refs/heads/main still asks.
func TestASlashedValueThatIsNotAPathIsNeverWidenedToAGlob(t *testing.T) {
	w := newLearnWorld(t)
	w.record([]historyKind{{weight: 1, agent: "git-bot", server: "git", tool: "push", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"remote": "origin", "ref": "refs/heads/" + []string{"a", "b"}[r.IntN(2)]}
	}, verdict: always(approve)}}, 8)
	root := w.signIn("root")
	adopted := false
	for _, s := range w.report().Suggestions {
		if s.Agent != "git-bot" {
			continue
		}
		if strings.Contains(s.Scope, "*") {
			t.Errorf("proposed a glob over refs: %s", s.Scope)
		}
		if status, body := root.post("/suggestions/"+s.ID+"/adopt", url.Values{}); status != http.StatusSeeOther {
			t.Fatalf("adopt %s: %d\n%s", s.ID, status, body)
		}
		adopted = true
	}
	if !adopted {
		t.Fatalf("no suggestion for git-bot's pushes: %+v", w.report().Skipped)
	}
	push := func(ref string) string {
		return w.decisionOf(w.submit("git-bot", "git", "push", map[string]any{"remote": "origin", "ref": ref}))
	}
	// The policy service applies the grant when its watch sees it.
	testenv.Eventually(t, 10*time.Second, "the adopted grant in force", func() bool { return push("refs/heads/a") == subject.Allowed })
	for _, ref := range []string{"refs/heads/main", "refs/heads/a/../main"} {
		if got := push(ref); got != subject.ApprovalRequested {
			t.Errorf("a push to %s: %s, want a person asked", ref, got)
		}
	}
}

// The proof decides probes, not only the recorded history: a grant that
// the policy would let reach a dotfile, a hidden directory or a path beside
// or below the widened directory is dropped although no refused call shows
// it. Here the grant is applied by a matcher that reads its path glob as
// ** (as if the policy read a glob more widely than Propose does), and every
// probe it would allow is reported; with the real matcher none is.
func TestAProposalIsProvenAgainstPathsNobodyApprovedAnythingLike(t *testing.T) {
	w := newLearnWorld(t)
	w.record([]historyKind{{weight: 1, agent: "proj-bot", server: "fs", tool: "write_file", args: func(r *rand.Rand) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/proj/%s.md", []string{"a", "b", "c"}[r.IntN(3)]), "content": fmt.Sprint(r.IntN(1000))}
	}, verdict: always(approve)}}, 9)
	ctx := context.Background()
	ev, _, err := evaluatorWith(ctx, w.cfg, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	decideNow := func(ctx context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
		return ev.Evaluate(ctx, call, at)
	}
	wide := func(g *airlockv1.StandingGrant, call *airlockv1.ToolCall, d *airlockv1.Decision, at time.Time) bool {
		g = proto.Clone(g).(*airlockv1.StandingGrant)
		g.ArgumentGlobs["/path"] = "**"
		return decide.GrantApplies(g, call, d, at)
	}
	rd := store.NewStream(w.deps.JS, w.cfg.Stream.Name, nil)
	for _, c := range []struct {
		name    string
		applies func(*airlockv1.StandingGrant, *airlockv1.ToolCall, *airlockv1.Decision, time.Time) bool
		dropped bool
	}{
		{"the_policys_matcher_allows_no_probe", decide.GrantApplies, false},
		{"a_matcher_reaching_further_drops_it", wide, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := suggest.Run(ctx, rd, suggest.Config{}, decideNow, c.applies, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			all := append(append([]suggest.Suggestion{}, rep.Suggestions...), rep.Dropped...)
			if len(all) != 1 || all[0].Grant.GetArgumentGlobs()["/path"] != "/srv/proj/[!./]*" || all[0].Proof.Probes == 0 {
				t.Fatalf("want one proposal of /srv/proj/[!./]* proven against probes: suggestions %v, dropped %d, skipped %+v", scopes(rep), len(rep.Dropped), rep.Skipped)
			}
			p := all[0].Proof
			if got := len(rep.Dropped) == 1; got != c.dropped || len(p.Violations) != 0 {
				t.Fatalf("dropped: %v, want %v; violations %+v, probes allowed %+v", got, c.dropped, p.Violations, p.ProbesAllowed)
			}
			if !c.dropped {
				return
			}
			var paths []string
			for _, pr := range p.ProbesAllowed {
				paths = append(paths, pr.Path)
			}
			for _, want := range []string{"/srv/proj/.bashrc", "/srv/proj/.ssh/authorized_keys", "/srv/proj/.git/hooks/pre-commit", "/srv/proj/airlock-probe/new.txt", "/srv/airlock-probe.txt"} {
				if !strings.Contains(strings.Join(paths, " "), want) {
					t.Errorf("the probes allowed %v do not include %s", paths, want)
				}
			}
			var out bytes.Buffer
			printSuggestions(&out, rep, 0, map[string]console.Dismissal{})
			if !strings.Contains(out.String(), "dropped by its probes:") || !strings.Contains(out.String(), "/path /srv/proj/.bashrc") {
				t.Errorf("policy suggest does not say why it dropped the proposal:\n%s", out.String())
			}
		})
	}
}
