package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestTheHealthPageShowsTheEventsStreamsUse: at stream.max_bytes the
// events stream refuses new events and airlock decides no new call; the
// health page shows how full it is and, past bus.StreamUseWarning, says
// so and what to do.
func TestTheHealthPageShowsTheEventsStreamsUse(t *testing.T) {
	e := newEnvWith(t, func(cfg *config.Config) {
		cfg.Stream.MaxMsgSize = 16 << 10
		cfg.Stream.MaxBytes = 64 * int64(cfg.Stream.MaxMsgSize) // the least the configuration allows
	})
	b := e.browser()
	b.signIn("root")
	if p := b.get("/health"); !strings.Contains(p.Body, `id="stream-use"`) || strings.Contains(p.Body, "stream-use-alert") {
		t.Fatalf("the health page of a nearly empty events stream:\n%s", p.Body)
	}
	ctx := context.Background()
	pub := e.deps.Publisher("test")
	for i := 0; ; i++ {
		u, err := bus.ReadStreamUse(ctx, e.deps.JS, e.deps.Config.Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		if u.Level() != "" {
			break
		}
		ev := &airlockv1.Event{AgentId: "bot", CallId: fmt.Sprintf("fill_%d", i), Revision: 1, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "test"},
			Body: &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "test", Kind: "fill", Ref: strings.Repeat("x", 8<<10)}}}
		if _, err := pub.Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	p := b.get("/health")
	for _, want := range []string{`id="stream-use-alert"`, "Stream use is warning", "raise stream.max_bytes"} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the health page of an events stream past 80%% lacks %q:\n%s", want, p.Body)
		}
	}
}
