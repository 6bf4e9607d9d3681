package main

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

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
