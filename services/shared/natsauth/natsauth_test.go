package natsauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// TestShippedConfigIsCurrent keeps deploy/nats/airlock.conf in step with
// the permissions this package defines (and that `airlock dev` and the
// trust-boundary tests run with).
func TestShippedConfigIsCurrent(t *testing.T) {
	want, err := natsauth.Shipped(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "nats", "airlock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("deploy/nats/airlock.conf is stale: run `go tool task generate` (or `airlock nats config -o deploy/nats/airlock.conf`)")
	}
}

// TestShippedConfigLoadsInNATSServer parses the shipped file the way
// nats-server does, with every public key given in the environment.
func TestShippedConfigLoadsInNATSServer(t *testing.T) {
	dir := t.TempDir()
	for _, role := range append([]string{natsauth.RoleAdmin}, natsauth.ServiceRoles...) {
		pub, err := natsauth.EnsureSeed(filepath.Join(dir, role+".nk"))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(strings.TrimPrefix(natsauth.EnvVar(role), "$"), pub)
	}
	c, err := natsauth.NewCredential(filepath.Join(dir, "bot"+natsauth.CredentialSuffix), "bot", "")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := c.PublicKey()
	t.Setenv(strings.TrimPrefix(natsauth.AgentEnvVar("bot"), "$"), pub)
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "..", "deploy", "nats", "airlock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Nkeys) != len(natsauth.ServiceRoles)+2 {
		t.Fatalf("%d nkey users, want one per service role, admin and the example agent", len(opts.Nkeys))
	}
	for _, u := range opts.Nkeys {
		if u.Account == nil || (u.Account.Name != natsauth.AccountAirlock && u.Account.Name != natsauth.AccountAgents) {
			t.Fatalf("user %s is in account %v", u.Nkey, u.Account)
		}
	}
}
