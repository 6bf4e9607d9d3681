package teams_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/policies"
	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// TestMain removes the airlock build the end-to-end tests run.
func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// e2eRules route demo__write_file to Teams (the configured conversation)
// for alice.
const e2eRules = `{"airlock": {"rules": [
  {"id": "teams-writes", "priority": 1, "server": "demo", "tool": "write_file",
   "effect": "ask", "risk": "high", "reason": "writes to the sandbox need a person",
   "approvers": ["alice"], "notify": ["console", "teams"], "timeout": "2m"}
 ], "profiles": {}, "bindings": {}}}`

// TestEndToEndWithTheAirlockBinary runs the real `airlock dev` (policy,
// approval, executor, console and this Teams integration wired as in
// production) against the Bot Connector fake and the local token issuer:
// the approval service posts the card, the console refuses a forged
// token, an approval from Teams runs the tool (once: its replay is
// refused) and redraws the card, and a rejection in the console redraws the
// Teams card of another call.
func TestEndToEndWithTheAirlockBinary(t *testing.T) {
	f, is := startFakeConnector(t), startIssuer(t, "msteams")
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "policy")
	must(t, os.MkdirAll(policyDir, 0o700))
	rego, err := fs.ReadFile(policies.Default(), "airlock.rego")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(policyDir, "airlock.rego"), rego, 0o600))
	must(t, os.WriteFile(filepath.Join(policyDir, "data.json"), []byte(e2eRules), 0o600))
	secret := filepath.Join(dir, "teams-secret")
	must(t, os.WriteFile(secret, []byte(appPassword+"\n"), 0o600))
	natsPort, err := embedded.FreePort()
	must(t, err)
	httpPort, err := embedded.FreePort()
	must(t, err)
	cfg := fmt.Sprintf(`http:
  public_url: %s
policy:
  dir: %s
executor:
  sandbox: %s
teams:
  app_id: %s
  app_password_file: %s
  token_url: %s/token
  service_url: %s/
  openid_metadata_url: %s
  conversation: "%s"
  users:
    aad-alice: alice
`, publicURL, policyDir, filepath.Join(dir, "sandbox"), appID, secret, f.URL, f.URL, is.metadataURL(), conversation)
	cfgPath := filepath.Join(dir, "airlock.yaml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	testenv.StartAirlock(t, httpAddr, []string{"AIRLOCK_CONFIG=" + cfgPath},
		"dev", "--data", filepath.Join(dir, "data"), "--nats-port", fmt.Sprint(natsPort), "--http", httpAddr)
	nc, _ := testenv.DevAdmin(t, filepath.Join(dir, "data"), fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	api := approvalapi.New(nc, testenv.DevFrontendKey(t, filepath.Join(dir, "data")), "console")
	endpoint := "http://" + httpAddr + airlockteams.MessagesPath

	// Approved from Teams: the tool runs, and the card shows it.
	client, posted := submitCall(t, nc, f, "call-teams-e2e-1")
	approve := submit(t, f.URL+"/", posted, alice, airlockteams.VerbApprove, "")
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	if code, body := postActivity(t, endpoint, is.token(t, claims{ServiceURL: f.URL + "/", Key: forger}), approve); code != http.StatusUnauthorized {
		t.Fatalf("a forged token answered %d %q", code, body)
	}
	tok := is.token(t, claims{ServiceURL: f.URL + "/"})
	if code, body := postActivity(t, endpoint, tok, approve); code != http.StatusOK {
		t.Fatalf("the console's /teams/messages answered %d %q", code, body)
	}
	if code, body := postActivity(t, endpoint, tok, approve); code != http.StatusConflict {
		t.Fatalf("a replay answered %d %q", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client.Await(ctx, "call-teams-e2e-1")
	must(t, err)
	if out.Status != airlock.StatusCompleted || out.DecidedBy != "alice" {
		t.Fatalf("outcome %+v", out)
	}
	waitUpdate(t, f, posted.ID, "Approved by alice (teams)")

	// Rejected in the console: the approval service redraws the Teams card.
	_, posted2 := submitCall(t, nc, f, "call-teams-e2e-2")
	_, err = api.Decide(context.Background(), &airlockv1.DecideRequest{
		AgentId: "bot-teams", CallId: "call-teams-e2e-2", Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_REJECT, Reason: "not today",
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"},
	})
	must(t, err)
	waitUpdate(t, f, posted2.ID, "Rejected by alice (console): not today")
}

// submitCall sends a demo__write_file call as bot-teams and waits for its card.
func submitCall(t *testing.T, nc *nats.Conn, f *fakeConnector, callID string) (*airlock.Client, connectorCall) {
	t.Helper()
	client, err := airlock.New(nc, "bot-teams")
	must(t, err)
	_, err = client.Submit(context.Background(), airlock.Call{
		ID: callID, Server: "demo", Tool: "write_file", Thread: "thread-e2e",
		Args: map[string]any{"path": callID + ".txt", "content": "hello from " + callID}, Reason: "e2e test",
	})
	must(t, err)
	posted := f.next(t, "post")
	if posted.Conversation != conversation || !strings.Contains(posted.Card(t), "call "+callID+" ") {
		t.Fatalf("expected the card of %s in %s, got %v", callID, conversation, posted)
	}
	return client, posted
}

// waitUpdate waits until the card activity id was redrawn to show want.
func waitUpdate(t *testing.T, f *fakeConnector, id, want string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "the Teams card to show "+want, func() bool {
		return f.saw("update", func(c connectorCall) bool { return c.Activity == id && strings.Contains(c.Card(t), want) })
	})
}
