package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	"github.com/nats-io/nats.go"
)

// A service reaches a NATS server that serves TLS with a private CA's
// certificate (and, with verify, asks for a client certificate) only with
// that CA in nats.tls.ca_file (and its own certificate): without them it
// is refused at once, with a sentence naming the setting to set.
func TestAServiceConnectsOverTLSOnlyWithWhatTheServerAsksFor(t *testing.T) {
	f := testenv.NewTLSFiles(t)
	plain := testenv.StartNATS(t).URL()
	oneWay := testenv.StartTLSNATS(t, f, false).URL()
	mutual := testenv.StartTLSNATS(t, f, true).URL()
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	asNATS := func(url string) string { return strings.Replace(url, "tls://", "nats://", 1) }
	for _, tt := range []struct {
		name string
		url  string
		tls  config.TLS
		want string // "" connects
	}{
		{"the_ca_file_alone_turns_tls_on_and_verifies_the_server", asNATS(oneWay), config.TLS{CAFile: f.CA}, ""},
		{"a_tls_url_with_the_ca_file", oneWay, config.TLS{CAFile: f.CA}, ""},
		{"without_the_ca_the_server_is_refused", asNATS(oneWay), config.TLS{}, "not signed by a CA this client trusts: set nats.tls.ca_file"},
		{"a_tls_url_without_the_ca_the_server_is_refused", oneWay, config.TLS{}, "not signed by a CA this client trusts: set nats.tls.ca_file"},
		{"a_ca_that_did_not_sign_the_server_is_refused", oneWay, config.TLS{CAFile: f.OtherCA}, "not signed by a CA this client trusts"},
		{"a_server_without_tls_is_refused_when_the_ca_is_set", plain, config.TLS{CAFile: f.CA}, "does not offer TLS"},
		{"mutual_tls_without_a_client_certificate_is_refused", mutual, config.TLS{CAFile: f.CA}, "requires a client certificate it trusts: set nats.tls.cert_file and nats.tls.key_file"},
		{"mutual_tls_with_the_client_certificate", mutual, f.Client(true), ""},
		{"a_ca_file_that_is_not_pem", oneWay, config.TLS{CAFile: notPEM}, "nats.tls.ca_file " + notPEM + " holds no PEM certificate"},
		{"a_missing_ca_file", oneWay, config.TLS{CAFile: notPEM + ".gone"}, "nats.tls.ca_file: open"},
		{"a_certificate_with_another_key", mutual, config.TLS{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ServerKey}, "are not a client certificate and its private key"},
		{"a_certificate_without_its_key", mutual, config.TLS{CAFile: f.CA, CertFile: f.ClientCert}, "nats.tls.cert_file is set without nats.tls.key_file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testenv.Config(tt.url)
			cfg.NATS.TLS = tt.tls
			if tt.want == "" {
				// What every service does first: connect, then provision
				// (JetStream over the TLS link).
				deps := testenv.Deps(t, cfg)
				if _, err := deps.NC.TLSConnectionState(); err != nil {
					t.Fatalf("the connection is not TLS: %v", err)
				}
				if _, err := deps.JS.Stream(context.Background(), cfg.Stream.Name); err != nil {
					t.Fatalf("the events stream over TLS: %v", err)
				}
				return
			}
			// Far longer than a refusal takes: a TLS refusal must not be
			// retried until the deadline ("is the server running?").
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			nc, err := bus.Connect(ctx, cfg.NATS, "test", testenv.Logger(t))
			if err == nil {
				nc.Close()
				t.Fatalf("connected; want it refused with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to say %q", err, tt.want)
			}
			t.Log(err)
			if ctx.Err() != nil {
				t.Fatalf("refused only at the deadline: %v", err)
			}
		})
	}
}

// A server that refuses the client's certificate is seen either by its
// alert or, under TLS 1.3, only by the connection closing right after the
// handshake, depending on timing: both say what to set.
func TestARefusedClientCertificateIsExplainedHoweverItShows(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"the_alert", errors.New("remote error: tls: certificate required")},
		{"closed_while_writing", fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, syscall.EPIPE)},
		{"closed_while_reading", fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, io.EOF)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := bus.ExplainTLS(tt.err, "nats.tls")
			if got == nil || !strings.Contains(got.Error(), "requires a client certificate it trusts: set nats.tls.cert_file and nats.tls.key_file") {
				t.Fatalf("ExplainTLS(%v) = %v; want it to say to set nats.tls.cert_file", tt.err, got)
			}
		})
	}
	if got := bus.ExplainTLS(io.EOF, "nats.tls"); got != nil {
		t.Fatalf("ExplainTLS of an error that is not TLS's = %v, want nil", got)
	}
}
