package console_test

import (
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestTheHealthPageShowsTheEventsStreamsUse: at stream.max_bytes the
// events stream refuses new events and airlock decides no new call; the
// health page shows how full it is and, past bus.StreamUseWarning, says
// so and what to do; once full it says the stream is full, as /healthz
// does.
func TestTheHealthPageShowsTheEventsStreamsUse(t *testing.T) {
	e := newEnvWith(t, testenv.SmallEventsStream)
	b := e.browser()
	b.signIn("root")
	for _, step := range []struct {
		name        string
		fill        func(testing.TB, svc.Deps)
		says, lacks []string
	}{
		{"nearly_empty_shows_the_use_alone", nil, []string{`id="stream-use"`}, []string{"stream-use-alert", "stream-full"}},
		{"past_80_percent_warns_and_says_what_to_do", testenv.FillEventsStream,
			[]string{`id="stream-use-alert"`, "Stream use is warning", "raise stream.max_bytes"}, []string{"stream-full"}},
		{"full_says_it_is_full_and_what_to_do", testenv.FillEventsStreamUntilRefused,
			[]string{`id="stream-full"`, "Degraded: the events stream " + e.deps.Config.Stream.Name + " is full", "raise stream.max_bytes", "airlock provision"},
			[]string{"stream-use-alert"}},
	} {
		if step.fill != nil {
			step.fill(t, e.deps)
		}
		p := b.get("/health")
		for _, want := range step.says {
			if !strings.Contains(p.Body, want) {
				t.Fatalf("%s: the health page lacks %q:\n%s", step.name, want, p.Body)
			}
		}
		for _, unwanted := range step.lacks {
			if strings.Contains(p.Body, unwanted) {
				t.Fatalf("%s: the health page shows %q:\n%s", step.name, unwanted, p.Body)
			}
		}
	}
}
