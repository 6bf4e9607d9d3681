// Package smtptest runs a real SMTP server on loopback for tests and
// benchmarks (github.com/emersion/go-smtp): STARTTLS with a certificate it
// makes for 127.0.0.1, AUTH PLAIN with the credentials it is given, and
// every message it accepts pushed onto a channel, so a test waits for a
// delivery instead of sleeping.
package smtptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one delivered mail as the server received it.
type Message struct {
	From string
	To   []string
	// Data is the raw message (headers and body) as sent in DATA.
	Data     []byte
	Received time.Time
	// Auth is the user that authenticated the session ("" for none).
	Auth string
}

// Options choose the server's behaviour.
type Options struct {
	// TLS offers STARTTLS (and CAFile trusts its certificate).
	TLS bool
	// Username and Password, if set, are required (AUTH PLAIN).
	Username, Password string
	// Buffer is the capacity of the Messages channel (default 1024); a full
	// channel holds the sender's DATA until there is room.
	Buffer int
}

// Server is a running SMTP server.
type Server struct {
	// Host and Port are where it listens (127.0.0.1).
	Host string
	Port int
	// CAFile is a PEM file with the server's certificate (Options.TLS).
	CAFile string

	srv  *smtp.Server
	ln   net.Listener
	msgs chan Message
	done chan struct{}
}

// Start listens on a free loopback port; dir holds the certificate file.
func Start(dir string, o Options) (*Server, error) {
	if o.Buffer == 0 {
		o.Buffer = 1024
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("smtptest: listen: %w", err)
	}
	s := &Server{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, ln: ln, msgs: make(chan Message, o.Buffer), done: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: s, o: o}, nil }))
	s.srv.Domain = "localhost"
	s.srv.MaxMessageBytes = 4 << 20
	s.srv.ReadTimeout, s.srv.WriteTimeout = 30*time.Second, 30*time.Second
	if o.TLS {
		cert, caPEM, err := selfSigned()
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.CAFile = filepath.Join(dir, "smtp-ca.pem")
		if err := os.WriteFile(s.CAFile, caPEM, 0o600); err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else {
		s.srv.AllowInsecureAuth = true
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Messages delivers every accepted message, in order of acceptance.
func (s *Server) Messages() <-chan Message { return s.msgs }

// Close stops the server.
func (s *Server) Close() {
	_ = s.srv.Close()
	// Closed here too: a server closed before Serve registered the
	// listener would otherwise keep accepting.
	_ = s.ln.Close()
	<-s.done
}

type session struct {
	s    *Server
	o    Options
	user string
	msg  Message
}

func (ss *session) AuthMechanisms() []string {
	if ss.o.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != ss.o.Username || pass != ss.o.Password {
			return errors.New("invalid credentials")
		}
		ss.user = user
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.o.Username != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.msg = Message{From: from, Auth: ss.user}
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.msg.To = append(ss.msg.To, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	var b bytes.Buffer
	if _, err := b.ReadFrom(r); err != nil {
		return err
	}
	m := ss.msg
	m.Data, m.Received = b.Bytes(), time.Now()
	ss.s.msgs <- m
	return nil
}

func (ss *session) Reset()        { ss.msg = Message{} }
func (ss *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and localhost.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "smtptest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Collector keeps every message a server delivers and answers questions
// about them, safe for concurrent use (a contract suite's Delivered hook).
type Collector struct {
	mu   sync.Mutex
	msgs []Message
}

// Collect drains s into a new Collector until s is closed.
func Collect(s *Server) *Collector {
	c := &Collector{}
	go func() {
		for {
			select {
			case m := <-s.msgs:
				c.mu.Lock()
				c.msgs = append(c.msgs, m)
				c.mu.Unlock()
			case <-s.done:
				return
			}
		}
	}()
	return c
}

// Find returns the messages match accepts.
func (c *Collector) Find(match func(Message) bool) []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Message
	for _, m := range c.msgs {
		if match(m) {
			out = append(out, m)
		}
	}
	return out
}
