package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
)

func TestDevStartsAnswersHealthStopsOnSIGINTAndKeepsData(t *testing.T) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, 0, "")

	resp, err := http.Get(dev.HTTPURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var health struct {
		Status, NATS string
		Services     []string
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &health); err != nil || health.Status != "ok" || health.NATS != "connected" {
		t.Fatalf("/healthz = %s (%v)", body, err)
	}
	if !strings.Contains(dev.Output(), "NATS      "+dev.NATSURL) || !strings.Contains(dev.Output(), dev.HTTPURL) {
		t.Fatalf("dev did not print where it listens:\n%s", dev.Output())
	}
	metrics, err := http.Get(dev.HTTPURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if !strings.Contains(string(mbody), "go_goroutines") {
		t.Fatal("/metrics does not serve Prometheus metrics")
	}

	// Secure by default: no credentials, no connection.
	if nc, err := nats.Connect(dev.NATSURL); err == nil {
		nc.Close()
		t.Fatal("dev's NATS accepted a connection without credentials")
	}
	client := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Await(ctx, mustSubmit(t, client, airlock.Call{ID: "kept", Tool: "demo__echo"})); err != nil {
		t.Fatal(err)
	}
	dev.Interrupt(15 * time.Second)

	again := startDev(t, dataDir, dev.natsPort, dev.httpAddr)
	_, js := again.Admin(t)
	s, err := js.Stream(ctx, config.Default().Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(ctx, "airlock.evt.bot.kept.exec.completed"); err != nil {
		t.Fatalf("the request published before the restart is gone: %v", err)
	}
	again.Interrupt(15 * time.Second)
}

func mustSubmit(t *testing.T, c *airlock.Client, call airlock.Call) string {
	t.Helper()
	id, err := c.Submit(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
