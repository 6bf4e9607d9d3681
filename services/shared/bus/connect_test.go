package bus_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A connection with no credentials to a server that requires them is
// refused every time: Connect tried again until its context ended (an
// operator command run away from its dev waited 5 s, and the dev's log got
// an "authentication error" line every half second meanwhile). It answers
// at once, saying what is missing.
func TestAConnectionWithoutCredentialsRefusedIsNotTriedAgain(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := config.Default().NATS
	cfg.URL = n.Server.URL()
	_, err := bus.Connect(ctx, cfg, "no-credentials", slog.Default())
	if err == nil {
		t.Fatal("connected without credentials to a server that requires them")
	}
	if ctx.Err() != nil || !bus.Refused(err) || !strings.Contains(err.Error(), "requires credentials, and none were given") {
		t.Fatalf("Connect without credentials answered %v (context ended: %v), want at once that the server requires credentials", err, ctx.Err())
	}
}
