package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// goAgentEnv makes this test binary the Go agent of `bench sdk` (TestMain).
const goAgentEnv = "AIRLOCK_BENCH_TEST_GO_AGENT"

func TestMain(m *testing.M) {
	if args := os.Getenv(goAgentEnv); args != "" {
		cred, url, _ := strings.Cut(args, " ")
		if err := RunGoAgent(context.Background(), cred, url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchSDKMeasuresBothSDKs runs a short `airlock bench sdk`: the Go and
// the TypeScript agent (node, sdk/typescript built with tsc) must each
// complete their auto-allowed calls against the dev-secured server, and
// every figure must be present.
func TestBenchSDKMeasuresBothSDKs(t *testing.T) {
	sdk, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "sdk", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := runSDKBench(ctx, config.Default(), sdkBenchOptions{Samples: 20, SDKDir: sdk,
		goAgent: func(cred, url string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, os.Args[0])
			cmd.Env = append(os.Environ(), goAgentEnv+"="+cred+" "+url)
			return cmd
		}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Go.N != 20 || rep.TS.N != 20 || !(rep.Go.P50us > 0) || !(rep.TS.P50us > 0) || !(rep.Ratio > 0) || !strings.HasPrefix(rep.Node, "v") {
		t.Fatalf("a figure is missing: %+v", rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"go_sdk"`, `"typescript_sdk"`, `"typescript_per_go_p50"`, `"goal_met"`} {
		if !strings.Contains(string(b), key) {
			t.Fatalf("--json output lacks %s: %s", key, b)
		}
	}
	var out bytes.Buffer
	printSDKBench(&out, rep)
	if !strings.Contains(out.String(), "(b) / (a)") || !strings.ContainsAny(out.String(), "✓✗") {
		t.Fatalf("the report does not state the goal:\n%s", out.String())
	}
}
