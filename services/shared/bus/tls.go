package bus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TLSOption is the nats.go option that makes a connection use TLS as t
// says (name is where t was read from, for the sentences: "nats.tls"): the
// server verified against t.CAFile (or the system's CAs), t's client
// certificate presented when the server asks for one. It is nil when t is
// empty; a tls:// URL alone still gets TLS from nats.go, verified against
// the system's CAs. Verification is never turned off.
func TLSOption(t config.TLS, name string) (nats.Option, error) {
	if !t.On() {
		return nil, nil
	}
	if err := t.Validate(name); err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w (give the PEM file of the CA that signed the NATS server's certificate)", name, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file %s holds no PEM certificate: give the CA certificate that signed the NATS server's (a file starting -----BEGIN CERTIFICATE-----)", name, t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file %s and %s.key_file %s are not a client certificate and its private key in PEM: %w", name, t.CertFile, name, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return nats.Secure(c), nil
}

// ExplainTLS says what to do about a connection refused over TLS (name is
// where the TLS settings are read from, as for TLSOption); it returns nil
// for any other error. Such a failure does not pass by retrying.
func ExplainTLS(err error, name string) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown):
		return fmt.Errorf("the NATS server's certificate is not signed by a CA this client trusts: set %s.ca_file to the PEM file of the CA that signed it (%w)", name, err)
	case errors.As(err, &host):
		return fmt.Errorf("the NATS server's certificate is not for the host in the URL: connect with a name the certificate lists, or reissue it for this one (%w)", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("the NATS server's certificate is not valid (expired, or not for a server): renew it (%w)", err)
	case strings.Contains(err.Error(), "certificate required"), strings.Contains(err.Error(), "tls: bad certificate"),
		// Under TLS 1.3 the client's handshake ends before the server checks
		// its certificate, so a refused one is often seen only as the
		// connection closed right after (nats.go's ErrTLS says so), not as
		// the server's alert: which of the two comes first is timing.
		errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "closed by remote after TLS handshake"):
		return fmt.Errorf("the NATS server requires a client certificate it trusts: set %s.cert_file and %s.key_file to one its CA signed (%w)", name, name, err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("the NATS server does not offer TLS, and %s asks for it: configure tls on the server (deploy/nats/cluster.conf), never leave the link in clear (%w)", name, err)
	}
	return nil
}
