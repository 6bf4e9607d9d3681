package natsauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-gate/airlock/services/shared/ids"
)

// The files WriteClusterTLS writes: the nats-tls Secret's (deploy/nats/cluster.conf)
// and the CA's key, which stays with the operator.
const (
	TLSCAFile    = "ca.crt"
	TLSCAKeyFile = "ca.key"
	TLSCertFile  = "tls.crt"
	TLSKeyFile   = "tls.key"
)

// NodeHosts are the names the shipped layout reaches its NATS nodes by:
// compose's hostnames and the Kubernetes headless service's (nats-N.nats).
func NodeHosts() []string { return []string{"nats-0", "nats-1", "nats-2", "*.nats"} }

// CA is a private certificate authority for the NATS links.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// PEM is the CA's certificate, what clients verify the nodes with.
	PEM []byte
}

// NewCA makes a CA named cn, valid for valid.
func NewCA(cn string, valid time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(cn, valid)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pemOf("CERTIFICATE", der)}, nil
}

// Issue makes a certificate the CA signs for cn, valid for valid, and
// returns it and its private key in PEM. With node it is a NATS node's:
// for server and client use (a node dials its routes with it), naming
// hosts (DNS names, a leading "*." for a wildcard, or IP addresses). Without,
// it is a client's (mutual TLS): client use only, and hosts must be empty,
// since a certificate naming a route host could join the cluster.
func (ca *CA) Issue(cn string, hosts []string, node bool, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	if !node && len(hosts) > 0 {
		return nil, nil, errors.New("a client certificate names no host: a route accepts a certificate that names one of its hosts")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(cn, valid)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if node {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("make the certificate of %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemOf("CERTIFICATE", der), pemOf("PRIVATE KEY", keyDER), nil
}

// LoadCA reads a CA WriteClusterTLS wrote (certFile and keyFile in PEM).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	cb, kb := firstPEM(certPEM, "CERTIFICATE"), firstPEM(keyPEM, "PRIVATE KEY")
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s and %s are not a CA certificate and its PKCS #8 key in PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("%s and %s are not a CA certificate and its key", certFile, keyFile)
	}
	return &CA{cert: cert, key: signer, PEM: certPEM}, nil
}

// WriteClusterTLS writes into dir what the NATS nodes serve TLS with
// (deploy/nats/cluster.conf): a private CA (ca.crt; its key ca.key, which
// stays with the operator), reused when dir already holds one, and the
// nodes' certificate tls.crt and key tls.key naming hosts, valid for
// valid; and, for each name in clients, name.crt and name.key, a client
// certificate for servers that require mutual TLS. Keys are mode 0600.
func WriteClusterTLS(dir string, hosts, clients []string, valid time.Duration) error {
	for _, c := range clients {
		// NAME is a file name in dir: never a path out of it, nor the CA's or
		// the nodes' own pair, which it would overwrite.
		if err := ids.Validate("client name", c); err != nil {
			return err
		}
		if c == "ca" || c == "tls" {
			return fmt.Errorf("client name %q would overwrite the CA's or the nodes' certificate: choose another", c)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	caCert, caKey := filepath.Join(dir, TLSCAFile), filepath.Join(dir, TLSCAKeyFile)
	ca, err := LoadCA(caCert, caKey)
	if errors.Is(err, os.ErrNotExist) {
		if ca, err = NewCA("airlock NATS CA", 10*365*24*time.Hour); err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(ca.key)
		if err != nil {
			return err
		}
		if err := writePair(dir, "ca", ca.PEM, pemOf("PRIVATE KEY", keyDER)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	cert, key, err := ca.Issue("airlock NATS node", hosts, true, valid)
	if err != nil {
		return err
	}
	if err := writePair(dir, "tls", cert, key); err != nil {
		return err
	}
	for _, c := range clients {
		cert, key, err := ca.Issue(c, nil, false, valid)
		if err != nil {
			return err
		}
		if err := writePair(dir, c, cert, key); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data into dir/name with mode: 0644 for a certificate,
// 0600 for a key (also over an existing file).
func writeFile(dir, name string, data []byte, mode os.FileMode) error {
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Chmod(file, mode); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// writePair writes a certificate and its key.
func writePair(dir, name string, cert, key []byte) error {
	if err := writeFile(dir, name+".crt", cert, 0o644); err != nil {
		return err
	}
	return writeFile(dir, name+".key", key, 0o600)
}

func template(cn string, valid time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(valid)}, nil
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func firstPEM(data []byte, typ string) []byte {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return nil
		} else if b.Type == typ {
			return b.Bytes
		}
	}
}
