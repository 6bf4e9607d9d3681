package violation

import "testing"

// An auditor reads what a refused subject is for in words: an agent's
// reach for another agent's endpoints names the endpoint and the agent.
func TestTargetNamesWhatASubjectIsFor(t *testing.T) {
	for subj, want := range map[string]string{
		"airlock.agent.victim.events": "the read of agent victim's stored events",
		"airlock.agent.victim.cancel": "the cancel of agent victim's calls",
		"airlock.agent.victim.other":  "",
		"airlock.agent":               "",
		"airlock.req.victim.c1":       "the intake of agent victim",
		"$JS.API.DIRECT.GET.AIRLOCK_EVENTS.airlock.evt.bot.*.requested": "JetStream API: read messages directly from stream AIRLOCK_EVENTS, subject airlock.evt.bot.*.requested, events of agent bot",
	} {
		if got := Target(subj); got != want {
			t.Errorf("Target(%q) = %q; want %q", subj, got, want)
		}
	}
}
