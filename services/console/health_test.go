package console_test

import (
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestTheHealthPageShowsTheEventsStreamsUse: at stream.max_bytes the
// events stream refuses new events and airlock decides no new call; the
// health page shows how full it is and, past bus.StreamUseWarning, says
// so and what to do.
func TestTheHealthPageShowsTheEventsStreamsUse(t *testing.T) {
	e := newEnvWith(t, testenv.SmallEventsStream)
	b := e.browser()
	b.signIn("root")
	if p := b.get("/health"); !strings.Contains(p.Body, `id="stream-use"`) || strings.Contains(p.Body, "stream-use-alert") {
		t.Fatalf("the health page of a nearly empty events stream:\n%s", p.Body)
	}
	testenv.FillEventsStream(t, e.deps)
	p := b.get("/health")
	for _, want := range []string{`id="stream-use-alert"`, "Stream use is warning", "raise stream.max_bytes"} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the health page of an events stream past 80%% lacks %q:\n%s", want, p.Body)
		}
	}
}
