package rpc_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/rpc"
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
// otherwise end the whole process).
func TestAFaultInOneRequestLeavesTheServiceAnswering(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	srv, err := micro.AddService(nc, micro.Config{Name: "probe", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	answer := func(_ context.Context, req *airlockv1.GetRequest) (*airlockv1.GetResponse, error) {
		if req.GetCallId() == "boom" {
			var m map[string]any
			_ = m["x"].(string) // a fault: the assertion panics
		}
		return &airlockv1.GetResponse{Record: &airlockv1.ApprovalRecord{Reason: "answered " + req.GetCallId()}}, nil
	}
	if err := srv.AddEndpoint("get", rpc.Handle(testenv.Logger(t), func() *airlockv1.GetRequest { return &airlockv1.GetRequest{} }, answer),
		micro.WithEndpointSubject("probe.get")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, call, want string
		code             apierr.Code
	}{
		{"the_faulty_request_is_answered_internal", "boom", "internal fault", apierr.Internal},
		{"the_next_request_is_answered", "after", "", ""},
		{"a_fault_again_is_answered_again", "boom", "internal fault", apierr.Internal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := &airlockv1.GetResponse{}
			err := rpc.Caller{NC: nc, Timeout: 5 * time.Second}.Call(context.Background(), "probe.get", &airlockv1.GetRequest{CallId: tt.call}, resp)
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
}
