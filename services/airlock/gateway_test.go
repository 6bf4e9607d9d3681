package main

import (
	"os"
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

func TestDevGatewayEndpoint(t *testing.T) {
	t.Run("dev_serves_its_first_agent_with_a_generated_token", func(t *testing.T) {
		d := natsauth.Dev{DataDir: t.TempDir()}
		cfg := config.Default()
		if err := devGatewayEndpoint(&cfg, d); err != nil {
			t.Fatal(err)
		}
		eps := cfg.Gateway.Endpoints
		if len(eps) != 1 || eps[0].Name != "bot" || eps[0].Agent != "bot" || eps[0].HTTPPath() != "/mcp/bot" || eps[0].OnBehalfOf != "" {
			t.Fatalf("endpoints %+v", eps)
		}
		raw, err := os.ReadFile(eps[0].TokenFile)
		if err != nil || len(strings.TrimSpace(string(raw))) < 32 {
			t.Fatalf("token %q (%v)", raw, err)
		}
		if info, _ := os.Stat(eps[0].TokenFile); info.Mode().Perm() != 0o600 {
			t.Fatalf("token file mode %v", info.Mode())
		}
		again := config.Default()
		_ = devGatewayEndpoint(&again, d)
		raw2, _ := os.ReadFile(again.Gateway.Endpoints[0].TokenFile)
		if string(raw2) != string(raw) {
			t.Fatal("a restart changed the token")
		}
	})
	t.Run("configured_endpoints_are_kept", func(t *testing.T) {
		cfg := config.Default()
		cfg.Gateway.Endpoints = []config.GatewayEndpoint{{Name: "mine", Agent: "x"}}
		if err := devGatewayEndpoint(&cfg, natsauth.Dev{DataDir: t.TempDir()}); err != nil || len(cfg.Gateway.Endpoints) != 1 || cfg.Gateway.Endpoints[0].Name != "mine" {
			t.Fatalf("%v %+v", err, cfg.Gateway.Endpoints)
		}
	})
	t.Run("the_printed_configuration_names_each_endpoint", func(t *testing.T) {
		cfg := config.Default()
		_ = devGatewayEndpoint(&cfg, natsauth.Dev{DataDir: t.TempDir()})
		text := gatewayText(cfg, "127.0.0.1:9999")
		for _, want := range []string{"http://127.0.0.1:9999/mcp/bot", "claude mcp add --transport http airlock-bot", `"mcpServers"`, "gateway --stdio --endpoint bot"} {
			if !strings.Contains(text, want) {
				t.Errorf("%q lacks %q", text, want)
			}
		}
	})
}
