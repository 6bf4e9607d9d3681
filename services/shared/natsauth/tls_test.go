package natsauth_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// `airlock nats certs` writes a CA and the nodes' certificate for every
// host given, keeps the CA when run again (so clients keep verifying with
// the ca.crt they have), and writes client certificates that name no host
// (a certificate naming a route host could join the cluster); keys are
// readable by their owner alone.
func TestClusterTLSFilesVerifyTheNodesAndKeepTheCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats-tls")
	hosts := []string{"nats-0", "*.nats", "10.0.0.7"}
	if err := natsauth.WriteClusterTLS(dir, hosts, []string{"policy"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	caBefore, err := os.ReadFile(filepath.Join(dir, natsauth.TLSCAFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := natsauth.WriteClusterTLS(dir, hosts, []string{"policy"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(filepath.Join(dir, natsauth.TLSCAFile))
	if !bytes.Equal(caBefore, caAfter) {
		t.Fatal("a second run made a new CA: every client's ca.crt would stop verifying the nodes")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caAfter)
	load := func(name string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return pair.Leaf
	}
	node, client := load("tls"), load("policy")
	for _, tt := range []struct {
		name  string
		cert  *x509.Certificate
		host  string
		usage x509.ExtKeyUsage
	}{
		{"the_node_serves_its_compose_name", node, "nats-0", x509.ExtKeyUsageServerAuth},
		{"the_node_serves_a_kubernetes_name_by_wildcard", node, "nats-2.nats", x509.ExtKeyUsageServerAuth},
		{"the_node_serves_its_ip", node, "10.0.0.7", x509.ExtKeyUsageServerAuth},
		{"the_node_dials_its_routes_with_it", node, "", x509.ExtKeyUsageClientAuth},
		{"the_client_certificate_is_for_clients", client, "", x509.ExtKeyUsageClientAuth},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.cert.Verify(x509.VerifyOptions{DNSName: tt.host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{tt.usage}}); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("the_client_certificate_names_no_host_and_serves_nothing", func(t *testing.T) {
		if len(client.DNSNames) != 0 || len(client.IPAddresses) != 0 || slices.Contains(client.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
			t.Fatalf("client certificate: names %v %v, usages %v", client.DNSNames, client.IPAddresses, client.ExtKeyUsage)
		}
	})
	t.Run("keys_are_the_owners_alone", func(t *testing.T) {
		for _, name := range []string{natsauth.TLSCAKeyFile, natsauth.TLSKeyFile, "policy.key"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s has mode %v, want 0600", name, fi.Mode().Perm())
			}
		}
	})
}

// A client certificate's name is a file name in DIR: one that would leave
// DIR or overwrite the CA's or the nodes' pair is refused, and the CA stays.
func TestAClientNameNeverLeavesTheDirectoryNorReplacesTheCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats-tls")
	if err := natsauth.WriteClusterTLS(dir, []string{"nats-0"}, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, natsauth.TLSCAFile))
	for _, name := range []string{"ca", "tls", "../escaped", "a/b", ""} {
		t.Run(name, func(t *testing.T) {
			if err := natsauth.WriteClusterTLS(dir, []string{"nats-0"}, []string{name}, time.Hour); err == nil {
				t.Fatalf("client name %q was accepted", name)
			}
			if now, _ := os.ReadFile(filepath.Join(dir, natsauth.TLSCAFile)); !bytes.Equal(ca, now) {
				t.Fatal("the CA changed")
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escaped.crt")); err == nil {
				t.Fatal("a certificate was written outside the directory")
			}
		})
	}
}
