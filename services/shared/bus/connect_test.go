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

// Credentials in the URL (nats://user:pass@host) are credentials: a
// refusal may end once the server loads the user (a reload), so Connect
// goes on trying until its context ends (helper-183).
func TestCredentialsInTheURLAreTriedUntilTheContextEnds(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cfg := config.Default().NATS
	cfg.URL = strings.Replace(n.Server.URL(), "nats://", "nats://svc:pw@", 1)
	_, err := bus.Connect(ctx, cfg, "url-credentials", slog.Default())
	if err == nil || ctx.Err() == nil || strings.Contains(err.Error(), "none were given") {
		t.Fatalf("Connect with credentials in the URL answered %v (context ended: %v), want it to try until its context ends", err, ctx.Err())
	}
}
