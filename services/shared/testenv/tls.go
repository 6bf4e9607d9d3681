package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// TLSFiles are PEM files in a temp dir: a private CA, a server certificate
// it signed for 127.0.0.1 and localhost (for server and client use, as a
// cluster node's route certificate is), and a client certificate it signed
// that names no host; OtherCA signed none of them.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, OtherCA string
}

// NewTLSFiles generates a CA and the certificates it signs (natsauth.CA,
// what `airlock nats certs` makes).
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	const valid = 24 * time.Hour
	ca, err := natsauth.NewCA("airlock test CA", valid)
	if err != nil {
		t.Fatal(err)
	}
	other, err := natsauth.NewCA("another CA", valid)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CA: write("ca.crt", ca.PEM), OtherCA: write("other-ca.crt", other.PEM)}
	issue := func(name string, hosts []string, node bool) (string, string) {
		cert, key, err := ca.Issue(name, hosts, node, valid)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", cert), write(name+".key", key)
	}
	f.ServerCert, f.ServerKey = issue("server", []string{"localhost", "127.0.0.1"}, true)
	f.ClientCert, f.ClientKey = issue("client", nil, false)
	return f
}

// ServerBlock is a nats-server configuration's tls block serving the
// server certificate; with verify every client must present a certificate
// the CA signed (mutual TLS).
func (f TLSFiles) ServerBlock(verify bool) string {
	return fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: %v\n}\n", f.ServerCert, f.ServerKey, f.CA, verify)
}

// Client is what a client verifies the server with, and with mutual its
// certificate too.
func (f TLSFiles) Client(mutual bool) config.TLS {
	if !mutual {
		return config.TLS{CAFile: f.CA}
	}
	return config.TLS{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}
}

// StartTLSNATS is StartNATS serving TLS with f's server certificate (and,
// with verify, asking every client for a certificate f's CA signed).
func StartTLSNATS(t testing.TB, f TLSFiles, verify bool) *NATS {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "tls.conf")
	if err := os.WriteFile(conf, []byte(f.ServerBlock(verify)), 0o600); err != nil {
		t.Fatal(err)
	}
	return StartNATSWith(t, embedded.Options{ConfigFile: conf})
}

// Credential copies an agent's credential file into a directory of its own
// with f's files beside it (ca.crt, other-ca.crt, client.crt, client.key)
// and tls, when not nil, as its "tls" (paths relative to the file); it
// returns the copy's path.
func (f TLSFiles) Credential(t testing.TB, file string, tls map[string]string) string {
	t.Helper()
	var cred map[string]any
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cred); err != nil {
		t.Fatalf("credential %s: %v", file, err)
	}
	dir := t.TempDir()
	for _, src := range []string{f.CA, f.OtherCA, f.ClientCert, f.ClientKey} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if tls != nil {
		cred["tls"] = tls
	}
	out := filepath.Join(dir, filepath.Base(file))
	b, err := json.Marshal(cred)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
