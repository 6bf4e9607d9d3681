package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A caller never waits on a service longer than its timeout, and a reply
// too large for the server reaches the caller as an error at once: a page
// that asks a service something always answers.
func TestACallEndsWithAClearErrorWhenNoReplyCanCome(t *testing.T) {
	n := testenv.StartNATSWith(t, embedded.Options{MaxPayload: 64 << 10})
	nc, _ := testenv.Connect(t, n.URL())
	srv, err := micro.AddService(nc, micro.Config{Name: "probe", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	// "hang" is answered only when the test ends: never within a timeout.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	answer := func(_ context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
		if req.GetCallId() == "hang" {
			<-release
		}
		reason := strings.Repeat("x", 100<<10) // over the server's max_payload
		return &airlockv1.GetResponse{Record: &airlockv1.ApprovalRecord{Reason: reason}}, nil
	}
	if err := srv.AddEndpoint("get", rpc.Handle(slog.Default(), func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} }, answer),
		micro.WithEndpointSubject("probe.get")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, call string
		timeout    time.Duration
		want       string
	}{
		{"a_reply_too_large_to_send_is_an_error_at_once", "big", 5 * time.Second, "could not be sent"},
		{"no_reply_within_the_timeout_is_unavailable", "hang", 300 * time.Millisecond, "did not answer within 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rpc.Caller{NC: nc, Timeout: tt.timeout}.Call(context.Background(), "probe.get", &airlockv1.GetRequest{CallId: tt.call}, &airlockv1.GetResponse{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one saying %q", err, tt.want)
			}
			if tt.call == "hang" && apierr.CodeOf(err) != apierr.Unavailable {
				t.Fatalf("code %s", apierr.CodeOf(err))
			}
		})
	}
}

// A request whose handling panics is answered internal and recorded; the
// service answers the next request (a panic in a micro handler would
// otherwise end the whole process), whether the fault is in the endpoint's
// work or before the request is decoded (checking its seal, recording a
// refusal). The log carries a fault's stack once, not at request rate.
func TestAFaultInOneRequestLeavesTheServiceAnswering(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	var logged lockedBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	srv, err := micro.AddService(nc, micro.Config{Name: "probe", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	fault := func() {
		var m map[string]any
		_ = m["x"].(string) // a fault: the assertion panics
	}
	answer := func(_ context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
		if req.GetCallId() == "boom" {
			fault()
		}
		return &airlockv1.GetResponse{Record: &airlockv1.ApprovalRecord{Reason: "answered " + req.GetCallId()}}, nil
	}
	// A gate whose recorder of refused requests fails: a fault before the
	// request is decoded.
	gate := &rpc.Gate{Key: seal.NewKey(), Refused: func(string, []byte, error) { fault() }}
	newReq := func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} }
	if err := errors.Join(srv.AddEndpoint("get", rpc.Handle(log, newReq, answer), micro.WithEndpointSubject("probe.get")),
		srv.AddEndpoint("sealed", rpc.HandleSealed(log, gate, newReq, answer), micro.WithEndpointSubject("probe.sealed")),
		// An endpoint that reads its requests itself, as the agents' cancel does.
		srv.AddEndpoint("raw", rpc.Recover(log, func(r micro.Request) {
			if string(r.Data()) == "boom" {
				fault()
			}
			_ = r.Respond([]byte("answered " + string(r.Data())))
		}), micro.WithEndpointSubject("probe.raw"))); err != nil {
		t.Fatal(err)
	}
	call := func(subject, id string) (*airlockv1.GetResponse, error) {
		resp := &airlockv1.GetResponse{}
		err := rpc.Caller{NC: nc, Timeout: 5 * time.Second}.Call(context.Background(), subject, &airlockv1.GetRequest{CallId: id}, resp)
		return resp, err
	}
	for _, tt := range []struct {
		name, subject, call, want string
		code                      apierr.Code
	}{
		{"the_faulty_request_is_answered_internal", "probe.get", "boom", "internal fault", apierr.Internal},
		{"the_next_request_is_answered", "probe.get", "after", "", ""},
		{"a_fault_again_is_answered_again", "probe.get", "boom", "internal fault", apierr.Internal},
		{"a_fault_before_the_request_is_decoded_is_answered_internal", "probe.sealed", "unsealed", "internal fault", apierr.Internal},
		{"a_request_after_that_fault_is_answered", "probe.get", "after_the_gate", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := call(tt.subject, tt.call)
			if tt.code == "" {
				if err != nil || resp.GetRecord().GetReason() != "answered "+tt.call {
					t.Fatalf("got %v, %v: want the request answered", resp, err)
				}
				return
			}
			if err == nil || apierr.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v (code %s), want %s saying %q", err, apierr.CodeOf(err), tt.code, tt.want)
			}
		})
	}
	t.Run("an_endpoint_reading_its_own_requests_survives_a_fault", func(t *testing.T) {
		for _, tt := range []struct{ data, code, answer string }{
			{"boom", string(apierr.Internal), ""}, {"after", "", "answered after"},
		} {
			m, err := nc.Request("probe.raw", []byte(tt.data), 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v: want an answer", tt.data, err)
			}
			if got := m.Header.Get(micro.ErrorCodeHeader); got != tt.code || tt.answer != "" && string(m.Data) != tt.answer {
				t.Fatalf("%s: code %q, answer %q; want code %q, answer %q", tt.data, got, m.Data, tt.code, tt.answer)
			}
		}
	})
	t.Run("the_log_carries_one_stack_a_subject_for_many_faults", func(t *testing.T) {
		for range 5 {
			if _, err := call("probe.get", "boom"); apierr.CodeOf(err) != apierr.Internal {
				t.Fatalf("err %v, want internal", err)
			}
		}
		text := logged.String()
		for _, tt := range []struct {
			subject string
			faults  int
		}{{"probe.get", 7}, {"probe.sealed", 1}} {
			lines := 0
			stacks := 0
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, `msg="request handler panicked" subject=`+tt.subject+" ") {
					lines++
					if strings.Contains(line, " stack=") {
						stacks++
					}
				}
			}
			if lines != tt.faults || stacks != 1 {
				t.Errorf("%s: %d faults logged, %d with a stack; want %d, one with a stack. The log:\n%s", tt.subject, lines, stacks, tt.faults, text)
			}
		}
	})
}

// lockedBuffer is a log's output, written by the service's handlers while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
