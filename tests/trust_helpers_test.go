package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// prodLayout is airlock as production runs it: a NATS server with the
// accounts and least-privilege users of deploy/nats/airlock.conf (the same
// natsauth rendering, with test keys), provisioned by the admin, and the
// policy, approval, executor and console services each as its own
// `airlock serve` process with its own NATS user; the console's users are
// consoleUsers (p.signIn).
type prodLayout struct {
	nats     *testenv.SecureNATS
	services map[string]*serveProcess
	cfgFile  string
}

func startProdLayout(t *testing.T, agents ...string) *prodLayout {
	t.Helper()
	n := testenv.StartSecureNATS(t, agents...)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "airlock.yaml")
	writeFile(t, cfgFile, fmt.Sprintf(`approval:
  groups: {reviewers: [alice, bob]}
executor:
  sandbox: %s
`, filepath.Join(dir, "sandbox"))+consoleUsersYAML(t))
	p := &prodLayout{nats: n, services: map[string]*serveProcess{}, cfgFile: cfgFile}
	for _, role := range []string{natsauth.RolePolicy, natsauth.RoleApproval, natsauth.RoleExecutor, natsauth.RoleConsole} {
		p.services[role] = startServe(t, n.Server.URL(), p.env(role), role, "--config", cfgFile)
	}
	return p
}

// env is what the service of role runs with: its own NATS user and only
// the seal keys it needs.
func (p *prodLayout) env(role string) []string {
	env := []string{"AIRLOCK_NATS_NKEY_SEED_FILE=" + p.nats.SeedFile(role)}
	sec := p.nats.Config.Security
	switch role {
	case natsauth.RolePolicy, natsauth.RoleApproval:
		env = append(env, "AIRLOCK_SECURITY_DECISION_KEY="+sec.DecisionKey, "AIRLOCK_SECURITY_FRONTEND_KEY="+sec.FrontendKey)
	case natsauth.RoleExecutor:
		env = append(env, "AIRLOCK_SECURITY_DECISION_KEY="+sec.DecisionKey)
	case natsauth.RoleConsole:
		env = append(env, "AIRLOCK_SECURITY_FRONTEND_KEY="+sec.FrontendKey)
	}
	return env
}

// frontend is the approval service as a front-end that authenticated its
// person reaches it (the console's NATS user and the front-end key).
func (p *prodLayout) frontend(t *testing.T) *approvalapi.Client {
	t.Helper()
	nc, _ := p.nats.Connect(natsauth.RoleConsole)
	k, err := seal.ParseHex(p.nats.Config.Security.FrontendKey)
	if err != nil {
		t.Fatal(err)
	}
	return approvalapi.New(nc, k, "console")
}

// hostile is an agent's own connection (its credential, its inbox) that
// records every error the server reports to it, permission violations
// included.
type hostile struct {
	t      *testing.T
	agent  string
	nc     *nats.Conn
	client *airlock.Client
	mu     sync.Mutex
	errs   []string
}

func connectAgent(t *testing.T, credFile, url string) *hostile {
	t.Helper()
	cred, err := natsauth.ReadCredential(credFile)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{t: t, agent: cred.Agent}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.nc, err = airlock.Dial(ctx, cred, url)
	if err != nil {
		t.Fatal(err)
	}
	h.nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		h.mu.Lock()
		h.errs = append(h.errs, err.Error())
		h.mu.Unlock()
	})
	t.Cleanup(h.nc.Close)
	if h.client, err = airlock.New(h.nc, cred.Agent); err != nil {
		t.Fatal(err)
	}
	return h
}

// refused waits until the server reported a permission violation naming
// subj (quoted as the server quotes it, so that no longer subject it
// refused stands in for subj).
func (h *hostile) refused(subj string) {
	h.t.Helper()
	testenv.Eventually(h.t, 10*time.Second, "a permissions violation for "+subj, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.errs {
			if strings.Contains(e, "Permissions Violation") && strings.Contains(e, strconv.Quote(subj)) {
				return true
			}
		}
		return false
	})
}

// request sends a request that must get no answer: refused by permissions,
// or answered by nobody in the agent's account.
func (h *hostile) request(subj string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := h.nc.RequestWithContext(ctx, subj, data)
	return err
}

// requestEach sends every request at once, each as request does, and
// returns each one's error in order: the wait for no answer is paid once.
func (h *hostile) requestEach(subjects []string, data [][]byte) []error {
	errs := make([]error, len(subjects))
	var wg sync.WaitGroup
	for i, subj := range subjects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.request(subj, data[i])
		}()
	}
	wg.Wait()
	return errs
}

// mustSubmit submits call as the agent and fails the test if it cannot.
func (h *hostile) mustSubmit(call airlock.Call) string {
	h.t.Helper()
	id, err := h.client.Submit(context.Background(), call)
	if err != nil {
		h.t.Fatalf("agent %s could not submit its own call: %v", h.agent, err)
	}
	return id
}

// await waits for the outcome of the agent's call revision.
func (h *hostile) await(id string, rev uint32) airlock.Outcome {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := h.client.AwaitRevision(ctx, id, rev)
	if err != nil && !errors.Is(err, airlock.ErrInvalid) {
		h.t.Fatalf("await %s/%s: %v", h.agent, id, err)
	}
	return out
}

// waitApproval waits until the approval service holds the revision in state.
func waitApproval(t *testing.T, api *approvalapi.Client, agent, call string, rev uint32, st airlockv1.ApprovalState) *airlockv1.ApprovalRecord {
	t.Helper()
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("%s/%s rev %d to be %s", agent, call, rev, st), func() bool {
		r, err := api.Get(context.Background(), agent, call, rev)
		rec = r
		return err == nil && r.GetState() == st
	})
	return rec
}

func reviewer(id string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: id, Channel: "console"}
}

// streamMsgs counts the messages in a stream.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var execCommand = exec.Command
