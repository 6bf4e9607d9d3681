package main

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Through the real services: a number people approved from 2 to 6 becomes
// a range of exactly 2..6; once an admin adopts it on the console, the
// policy allows that agent's calls with a number inside and still asks
// about one outside, a string that reads as a number, or an added argument.
func TestSuggestionsLearnedAsANumericRangeAllowOnlyNumbersWithinIt(t *testing.T) {
	w := newLearnWorld(t)
	workers := []int{4, 2, 6, 3, 5, 2, 6, 4}
	next := 0
	w.record([]historyKind{{weight: 1, agent: "pool-bot", server: "fs", tool: "write_file", args: func(*rand.Rand) map[string]any {
		n := workers[next%len(workers)]
		next++
		return map[string]any{"path": "/srv/app/pool.conf", "workers": n}
	}, verdict: always(approve)}}, len(workers))
	rep := w.report()
	if len(rep.Suggestions) != 1 {
		t.Fatalf("suggestions %v (skipped %+v): want the pool writes proposed", scopes(rep), rep.Skipped)
	}
	s := rep.Suggestions[0]
	if r := s.Grant.GetArgumentRanges()["/workers"]; r.GetMin() != 2 || r.GetMax() != 6 {
		t.Fatalf("proposed %s: want /workers from 2 to 6 exactly", s.Scope)
	}
	admin := w.signIn("root")
	if status, body := admin.post("/suggestions/"+s.ID+"/adopt", url.Values{}); status != http.StatusSeeOther {
		t.Fatalf("adopt %s: %d\n%s", s.ID, status, body)
	}
	testenv.WaitForEvent(t, w.deps.JS, "airlock.evt."+subject.SystemAgent+".grant_"+s.ID+".>", subject.GrantCreated, 10*time.Second)
	// The policy service applies a new grant when its watch sees it, a
	// moment after grant_created: wait for it to be in force before probing.
	testenv.Eventually(t, 10*time.Second, "the adopted grant to be in force", func() bool {
		return w.decisionOf(w.submit("pool-bot", "fs", "write_file", map[string]any{"path": "/srv/app/pool.conf", "workers": 3})) == subject.Allowed
	})

	for _, c := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"the lowest approved number", map[string]any{"path": "/srv/app/pool.conf", "workers": 2}, subject.Allowed},
		{"the highest approved number", map[string]any{"path": "/srv/app/pool.conf", "workers": 6}, subject.Allowed},
		{"a number between them", map[string]any{"path": "/srv/app/pool.conf", "workers": 4.5}, subject.Allowed},
		{"a number above the range", map[string]any{"path": "/srv/app/pool.conf", "workers": 7}, subject.ApprovalRequested},
		{"a number below the range", map[string]any{"path": "/srv/app/pool.conf", "workers": 1.5}, subject.ApprovalRequested},
		{"a huge number", map[string]any{"path": "/srv/app/pool.conf", "workers": 1e300}, subject.ApprovalRequested},
		{"a string that reads as a number in the range", map[string]any{"path": "/srv/app/pool.conf", "workers": "4"}, subject.ApprovalRequested},
		{"another file", map[string]any{"path": "/srv/app/other.conf", "workers": 4}, subject.ApprovalRequested},
		{"an added argument", map[string]any{"path": "/srv/app/pool.conf", "workers": 4, "sudo": true}, subject.ApprovalRequested},
	} {
		if got := w.decisionOf(w.submit("pool-bot", "fs", "write_file", c.args)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if got := w.decisionOf(w.submit("other-bot", "fs", "write_file", map[string]any{"path": "/srv/app/pool.conf", "workers": 4})); got != subject.ApprovalRequested {
		t.Errorf("another agent within the range: %s, want a person asked", got)
	}
}
