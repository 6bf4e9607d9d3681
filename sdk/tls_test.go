package airlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent reaches airlock's NATS over TLS with a private CA, given in its
// credential file (relative to it) or with WithTLS, and presents a client
// certificate where the server requires mutual TLS; its call completes over
// that link. Without what the server asks for it is refused, with a
// sentence saying what to set.
func TestAnAgentCallsOverTLS(t *testing.T) {
	f := testenv.NewTLSFiles(t)
	for _, tt := range []struct {
		name   string
		mutual bool
		// inFile is the credential's "tls"; opts are given to Connect.
		inFile map[string]string
		opts   []airlock.Option
		want   string // "" completes a call
	}{
		{"the_ca_in_the_credential_file", false, map[string]string{"ca_file": "ca.crt"}, nil, ""},
		{"the_ca_with_an_option", false, nil, []airlock.Option{airlock.WithTLS(config.TLS{CAFile: f.CA})}, ""},
		{"mutual_tls_with_the_certificate_in_the_credential_file", true,
			map[string]string{"ca_file": "ca.crt", "cert_file": "client.crt", "key_file": "client.key"}, nil, ""},
		{"mutual_tls_with_an_option_over_the_file", true, map[string]string{"ca_file": "other-ca.crt"},
			[]airlock.Option{airlock.WithTLS(f.Client(true))}, ""},
		{"without_the_ca_the_server_is_refused", false, nil, nil, "not signed by a CA this client trusts: set the credential's tls.ca_file"},
		{"mutual_tls_without_a_certificate_is_refused", true, map[string]string{"ca_file": "ca.crt"}, nil,
			"requires a client certificate it trusts: set the credential's tls.cert_file"},
		{"a_certificate_without_its_key_is_refused", true, map[string]string{"ca_file": "ca.crt", "cert_file": "client.crt"}, nil,
			"tls.cert_file is set without tls.key_file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := testenv.StartSecureTLSNATS(t, f, tt.mutual, "bot")
			file := f.Credential(t, n.CredentialFile("bot"), tt.inFile)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := airlock.Connect(ctx, file, n.Server.URL(), tt.opts...)
			if tt.want != "" {
				if err == nil {
					c.Close()
					t.Fatalf("connected; want it refused with %q", tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error = %v\nwant it to say %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			id, err := c.Submit(ctx, airlock.Call{Tool: "demo__echo", Args: map[string]any{"text": "over tls"}})
			if err != nil {
				t.Fatal(err)
			}
			// The executor's own user, over TLS too, completes it.
			nc, js := n.Connect(natsauth.RoleExecutor)
			if _, err := nc.TLSConnectionState(); err != nil {
				t.Fatalf("the executor's connection is not TLS: %v", err)
			}
			completeCall(t, svc.Deps{JS: js}.Publisher("executor"), "bot", id, 1, `{"echo":"over tls"}`)
			// The approval service's own user, over TLS too, answers the
			// agent's read of what is stored.
			approval, _ := n.Connect(natsauth.RoleApproval)
			testenv.ServeAgentReads(t, approval, n.Config.Stream.Name)
			out, err := c.Await(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != airlock.StatusCompleted || string(out.Result) != `{"echo":"over tls"}` {
				t.Fatalf("outcome %+v", out)
			}
		})
	}
}
