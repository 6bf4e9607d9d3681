package testenv

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// AgentKey is the key pair of the agent credential in file, and its public
// key: how a test signs in as that agent without the SDK.
func AgentKey(t testing.TB, file string) (pub string, kp nkeys.KeyPair) {
	t.Helper()
	cred, err := natsauth.ReadCredential(file)
	if err != nil {
		t.Fatal(err)
	}
	if kp, err = cred.KeyPair(); err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	return pub, kp
}

// RawAgent signs in at url with the agent credential in file over a bare
// TCP connection (INFO's nonce signed with the credential's key), ready for
// protocol lines: a hostile agent, which no client library's own checks
// hold back. Reads end when the server closes it or after 10 s.
func RawAgent(t testing.TB, url, file string) net.Conn {
	t.Helper()
	pub, kp := AgentKey(t, file)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	sig, err := kp.Sign([]byte(info.Nonce))
	if err != nil {
		t.Fatal(err)
	}
	connect, _ := json.Marshal(map[string]any{"nkey": pub, "sig": base64.RawURLEncoding.EncodeToString(sig), "verbose": false, "pedantic": false, "protocol": 1})
	fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", connect)
	if line, err = r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "PONG" {
		t.Fatalf("signing in with %s: %q, %v", file, line, err)
	}
	return conn
}
