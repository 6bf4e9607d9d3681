package callref

import "testing"

func TestRefsOfDifferentAgentsNeverShareAKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Ref
	}{
		{"same_call_id_two_agents", Ref{"bot", "c1", 1}, Ref{"evil", "c1", 1}},
		{"agent_and_call_swapped", Ref{"a", "b", 1}, Ref{"b", "a", 1}},
		{"revisions_differ", Ref{"bot", "c1", 1}, Ref{"bot", "c1", 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.a.Key() == tc.b.Key() || tc.a.EventID("approved") == tc.b.EventID("approved") ||
				tc.a.IdempotencyKey("k") == tc.b.IdempotencyKey("k") && tc.a.Agent != tc.b.Agent {
				t.Fatalf("%v and %v share an identifier", tc.a, tc.b)
			}
		})
	}
}

func TestParseKeyRoundTrips(t *testing.T) {
	r := Ref{"bot", "call_1", 3}
	got, err := ParseKey(r.Key())
	if err != nil || got != r {
		t.Fatalf("ParseKey(%q) = %v, %v", r.Key(), got, err)
	}
	for _, bad := range []string{"bot.call_1", "bot.call_1.0", "bot.call_1.x", "b.o.t.1"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

func TestNewRefusesIdsThatAreNotSubjectTokens(t *testing.T) {
	for _, tc := range []struct{ agent, call string }{{"bo.t", "c"}, {"bot", "c*"}, {"", "c"}, {"bot", "../x"}} {
		if _, err := New(tc.agent, tc.call, 1); err == nil {
			t.Errorf("New(%q, %q) accepted", tc.agent, tc.call)
		}
	}
}
