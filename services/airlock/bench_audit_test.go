package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"
)

// TestBenchAuditJSONPrintsFloorSinkAndRatio runs a short `airlock bench
// audit --json` against a private clickhouse-server: the floor, the sink and
// their ratio are measured in the same run and the chain the sink wrote verifies.
func TestBenchAuditJSONPrintsFloorSinkAndRatio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	cmd := newRootCmd()
	cmd.SetArgs([]string{"bench", "audit", "--json", "--events", "3000", "--rounds", "1", "--batch", "500"})
	runErr := cmd.ExecuteContext(ctx)
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if runErr != nil {
		t.Fatalf("bench audit: %v\n%s", runErr, out)
	}
	var got map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out), &got); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	for _, k := range []string{"floor_events_per_sec", "sink_events_per_sec", "ratio"} {
		if v, ok := got[k].(float64); !ok || !(v > 0) {
			t.Fatalf("%s is %v in %s", k, got[k], out)
		}
	}
	if got["ratio"].(float64) != got["sink_events_per_sec"].(float64)/got["floor_events_per_sec"].(float64) {
		t.Errorf("ratio %v is not sink/floor in %s", got["ratio"], out)
	}
	if got["chain_verified"] != true {
		t.Errorf("the chain the sink wrote does not verify: %s", out)
	}
}
