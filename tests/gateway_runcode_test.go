package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// TestGatewayRunCode: real MCP clients (the TypeScript SDK and the
// inspector CLI) send run_code a script that reads, then writes, then
// returns both results. The read runs at once; the write waits for a
// reviewer, who sees the script's static preview with it and approves it
// with `airlock approvals approve`; the script then returns both results,
// and every call it made names it.
func TestGatewayRunCode(t *testing.T) {
	g := startGatewayEnv(t)
	hello := filepath.Join(g.files, "hello.txt")
	for _, client := range []struct {
		name string
		run  func(t *testing.T, code string) <-chan string
	}{
		{"typescript_sdk", func(t *testing.T, code string) <-chan string {
			script, err := filepath.Abs(filepath.Join("node", "run-code-client.mjs"))
			if err != nil {
				t.Fatal(err)
			}
			nodeBin(t, "mcp-inspector-cli") // the npm packages are installed
			return runNode(t, exec.Command("node", script, g.url("coder"), g.tokens["coder"], code))
		}},
		{"inspector_cli", func(t *testing.T, code string) <-chan string {
			real, err := filepath.EvalSymlinks(nodeBin(t, "mcp-inspector-cli"))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("node", real, "--cli", g.url("coder"), "--transport", "http", "--header", "Authorization: Bearer "+g.tokens["coder"],
				"--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code="+code)
			cmd.Dir = filepath.Dir(real)
			return runNode(t, cmd)
		}},
	} {
		t.Run(client.name+"_reads_then_writes_once_approved_from_the_cli_and_returns_both", func(t *testing.T) {
			out := filepath.Join(g.files, "by-script-"+client.name+".txt")
			code := fmt.Sprintf(`const before = await tools.fs__read_text_file({path: %q});
const wrote = await tools["fs__write_file"]({path: %q, content: "written by a script"});
return {before, wrote};`, hello, out)
			done := client.run(t, code)
			rec := g.pendingFor(t, "coder", "write_file", out)
			call := rec.GetCall()
			sum := sha256.Sum256([]byte(code))
			digest := "sha256:" + hex.EncodeToString(sum[:])
			if s := call.GetScript(); s.GetDigest() != digest || s.GetIndex() != 2 || s.GetText() != "" || len(s.GetPreview()) != 2 ||
				!strings.Contains(s.GetPreview()[0], "fs__read_text_file") || !strings.Contains(s.GetPreview()[1], out) {
				t.Fatalf("the write names its script as %+v, want digest %s, index 2, no text (the first call has it), a preview of both calls", s, digest)
			}
			cli := exec.Command(airlockBinary(t), "approvals", "show", "coder/"+call.GetCallId(), "--api", g.baseURL, "--token-file", filepath.Join(g.dev.DataDir, "admin.token"))
			shown, err := cli.CombinedOutput()
			if err != nil || !strings.Contains(string(shown), "Static preview") || !strings.Contains(string(shown), "may be incomplete") || !strings.Contains(string(shown), "fs__read_text_file") {
				t.Fatalf("approvals show does not show the script's preview: %v\n%s", err, shown)
			}
			approve := exec.Command(airlockBinary(t), "approvals", "approve", "coder/"+call.GetCallId(), "--api", g.baseURL, "--token-file", filepath.Join(g.dev.DataDir, "admin.token"))
			if res, err := approve.CombinedOutput(); err != nil || !strings.Contains(string(res), "approved") {
				t.Fatalf("approvals approve: %v\n%s", err, res)
			}
			var got string
			select {
			case got = <-done:
			case <-time.After(90 * time.Second):
				t.Fatal("the script did not return within 90s of the approval")
			}
			if !strings.Contains(got, "hello from the filesystem server") || !strings.Contains(got, "Successfully wrote") || strings.Contains(got, `"isError":true`) {
				t.Fatalf("the script's answer lacks the read or the write: %s", got)
			}
			if content := readFileString(t, out); content != "written by a script" {
				t.Fatalf("the file holds %q", content)
			}
			// The first call (the read) carries the script's text once.
			first := g.firstScriptCall(t, digest)
			if !strings.Contains(first, "written by a script") || !strings.Contains(first, digest) {
				t.Fatalf("the script's first call does not record its text and digest: %.600s", first)
			}
		})
	}
}

// firstScriptCall is the script text the run's first call (which ran
// without approval) recorded, read from the events stream: the requested
// events of agent coder naming the script as call 1.
func (g *gatewayEnv) firstScriptCall(t *testing.T, digest string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := g.dev.Admin(t)
	cons, err := js.OrderedConsumer(ctx, config.Default().Stream.Name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject.OfType(subject.Requested)}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatalf("no requested event names script %s as its first call: %v", digest, err)
		}
		ev, err := envelope.Decode(msg.Data(), msg.Headers())
		if err != nil {
			continue
		}
		if s := ev.GetRequested().GetCall().GetScript(); s.GetDigest() == digest && s.GetIndex() == 1 {
			return s.GetDigest() + "\n" + s.GetText()
		}
	}
}

// runNode runs a node client and sends its whole output once it exits.
func runNode(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	full := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	full.Dir = cmd.Dir
	var out bytes.Buffer
	full.Stdout, full.Stderr = &out, &out
	if err := full.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		err := full.Wait()
		if err != nil {
			done <- fmt.Sprintf("%v\n%s", err, out.String())
			return
		}
		done <- out.String()
	}()
	return done
}
