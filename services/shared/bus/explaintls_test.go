package bus

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

// A server that refuses the client's certificate is explained the same
// whichever way the refusal reaches the client: its alert read, or (TLS
// 1.3, the client's handshake already done) the connection found closed
// by a read or a write, as nats.go reports it.
func TestARefusedClientCertificateIsExplainedHoweverTheRefusalArrives(t *testing.T) {
	const want = "requires a client certificate it trusts: set nats.tls.cert_file"
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"the_alert_read", fmt.Errorf("%w: remote error: tls: certificate required", nats.ErrTLS)},
		{"the_closed_connection_read", fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, io.EOF)},
		{"the_closed_connection_written", fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, syscall.EPIPE)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ExplainTLS(tt.err, "nats.tls")
			if got == nil || !strings.Contains(got.Error(), want) || !errors.Is(got, tt.err) {
				t.Fatalf("ExplainTLS(%v) = %v, want it to say %q and wrap the error", tt.err, got, want)
			}
		})
	}
	if got := ExplainTLS(fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "nats.tls"); got != nil {
		t.Fatalf("a refused dial is explained as %v; it is no TLS failure", got)
	}
}
