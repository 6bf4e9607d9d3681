package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// heldService is a service whose Run becomes ready when the test releases
// it: a service still registering its endpoints until then.
type heldService struct {
	name    string
	release chan struct{}
	ready   svc.Readiness
}

func (h *heldService) Name() string           { return h.name }
func (h *heldService) Ready() <-chan struct{} { return h.ready.Ready() }
func (h *heldService) Run(ctx context.Context) error {
	select {
	case <-h.release:
		h.ready.Mark()
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

// health is /healthz's answer as an orchestrator reads it.
type health struct {
	code       int
	Status     string   `json:"status"`
	WaitingFor []string `json:"waiting_for"`
	Message    string   `json:"message"`
}

func getHealth(t *testing.T, base string) health {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := health{code: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("/healthz answered %d with a body that is not JSON: %v", resp.StatusCode, err)
	}
	return h
}

// /healthz answers 503, naming the services still starting, until every
// service the process runs has said it is ready (its endpoints registered,
// its consumers subscribed), and 200 from then on.
func TestHealthzIsUnavailableUntilEveryServiceIsReady(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	a := &heldService{name: "first", release: make(chan struct{})}
	b := &heldService{name: "second", release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- run(ctx, deps, []svc.Service{a, b}, newHTTP(deps, []string{"first", "second"}, a, b), ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()

	for _, step := range []struct {
		name    string
		release *heldService
		code    int
		status  string
		waiting []string
	}{
		{"neither_ready_names_both", nil, http.StatusServiceUnavailable, "starting", []string{"first", "second"}},
		{"one_ready_names_the_other", a, http.StatusServiceUnavailable, "starting", []string{"second"}},
		{"both_ready_is_ok", b, http.StatusOK, "ok", nil},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.release != nil {
				close(step.release.release)
				<-step.release.Ready()
			}
			h := getHealth(t, base)
			if resp, err := http.Get(base + "/livez"); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/livez while /healthz is %d = %v %v; want 200: a starting process is alive", h.code, resp, err)
			} else {
				resp.Body.Close()
			}
			if h.code != step.code || h.Status != step.status || !slices.Equal(h.WaitingFor, step.waiting) {
				t.Fatalf("/healthz = %d %q waiting for %q (%s); want %d %q waiting for %q", h.code, h.Status, h.WaitingFor, h.Message, step.code, step.status, step.waiting)
			}
			for _, name := range step.waiting {
				if !strings.Contains(h.Message, name) {
					t.Errorf("the message %q does not name %s, which is not ready", h.Message, name)
				}
			}
		})
	}
}

// A real service's endpoints answer a request from another connection as
// soon as testenv.RunService returns, and its process's /healthz is 200
// then: each says it is ready only once its endpoints are on the server
// and its consumers subscribed.
func TestAServiceAnswersAsSoonAsItIsStarted(t *testing.T) {
	for _, tt := range []struct {
		service, subject string
	}{
		{"policy", policyapi.ShadowStatus},
		{"approval", approvalapi.Subject(approvalapi.List)},
		{"executor", executorapi.Tools},
	} {
		t.Run(tt.service, func(t *testing.T) {
			n := testenv.StartNATS(t)
			cfg := testenv.Config(n.URL())
			cfg.Dev.DataDir = t.TempDir()
			deps := testenv.Deps(t, cfg)
			asker, _ := testenv.Connect(t, n.URL())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := constructors()[tt.service](ctx, deps)
			if err != nil {
				t.Fatal(err)
			}
			testenv.RunService(t, s)
			if _, err := asker.Request(tt.subject, nil, 5*time.Second); err != nil {
				t.Fatalf("%s, asked right after the %s service started: %v", tt.subject, tt.service, err)
			}
			srv := httptest.NewServer(newHTTP(deps, []string{tt.service}, s))
			defer srv.Close()
			if h := getHealth(t, srv.URL); h.code != http.StatusOK {
				t.Fatalf("/healthz right after the %s service started = %d %q (%s), want 200", tt.service, h.code, h.Status, h.Message)
			}
		})
	}
}

// quitter is a service whose Run ends by itself, as one whose consumer was
// deleted does.
type quitter struct{ ready svc.Readiness }

func (q *quitter) Name() string                  { return "quitter" }
func (q *quitter) Ready() <-chan struct{}        { return q.ready.Ready() }
func (q *quitter) Run(ctx context.Context) error { q.ready.Mark(); return nil }

// A service that stops on its own ends the process with an error naming it
// (its supervisor starts it again), instead of leaving it alive on /livez
// and never ready on /healthz.
func TestAServiceThatStopsOnItsOwnEndsTheProcess(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	q := &quitter{}
	ran := make(chan error, 1)
	go func() {
		ran <- run(context.Background(), deps, []svc.Service{q}, newHTTP(deps, []string{"quitter"}, q), nil)
	}()
	select {
	case err := <-ran:
		if err == nil || !strings.Contains(err.Error(), "quitter") {
			t.Fatalf("run with a service that stopped on its own returned %v; want an error naming it", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the process went on for 30s after its only service stopped")
	}
}

// /livez is 200 while the process's NATS connection lives (even while it
// reconnects) and 503 once it is closed for good: only a restart helps then.
func TestLivezIsUnavailableOnceNATSIsClosedForGood(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	srv := httptest.NewServer(newHTTP(deps, nil))
	defer srv.Close()
	livez := func() int {
		resp, err := http.Get(srv.URL + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := livez(); code != http.StatusOK {
		t.Fatalf("/livez with NATS connected = %d, want 200", code)
	}
	deps.NC.Close()
	if code := livez(); code != http.StatusServiceUnavailable {
		t.Fatalf("/livez with the NATS connection closed = %d, want 503", code)
	}
}
