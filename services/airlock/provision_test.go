package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// `airlock provision` with an approval.max_bytes the approvals bucket is
// already past the refusal mark of (90%) applied it: from then on the
// approval service canceled every new call that needs a person at once,
// and only its log said why. It is refused now, with a sentence saying the
// least bound that takes no call away; that bound is then applied, as is a
// higher one, which only adds room.
func TestProvisionRefusesAnApprovalsBoundTheBucketIsPastTheRefusalMarkOf(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	kv, err := deps.JS.KeyValue(ctx, deps.Config.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 { // 3.75 MiB: 94% of 4 MiB, the least approval.max_bytes allowed
		if _, err := kv.Put(ctx, fmt.Sprintf("bot.c%d.1", i), make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
	}
	status := func() jetstream.StreamInfo {
		t.Helper()
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return *st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	}
	was := status().Config.MaxBytes
	t.Setenv("AIRLOCK_NATS_URL", n.URL())
	t.Setenv("AIRLOCK_DEV_DATA_DIR", t.TempDir())
	provision := func(maxBytes int64) (string, error) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "airlock.yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, "approval:\n  max_bytes: %d\n", maxBytes), 0o600); err != nil {
			t.Fatal(err)
		}
		return runCLI(ctx, t, "provision", "--config", file)
	}

	_, err = provision(4 << 20)
	if err == nil {
		t.Fatalf("provisioning approval.max_bytes 4 MiB with the bucket at %d bytes succeeded; want it refused: every new call would be canceled at once", status().State.Bytes)
	}
	for _, want := range []string{"bucket " + deps.Config.Buckets.Approvals + " holds", "of the 4.0 MiB approval.max_bytes would allow", "past 90% of it every new call that needs a person is canceled at once",
		"Set approval.max_bytes to at least", "run `airlock provision` again", "approval.ended_retention", "the bucket keeps its bound (1.0 GiB)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if b := status().Config.MaxBytes; b != was {
		t.Fatalf("the bucket's bound is %d after a refused provisioning, want %d as before", b, was)
	}

	// The least bound the refusal names is applied, and leaves the bucket
	// under the mark.
	m := regexp.MustCompile(`at least [0-9.]+ [KMG]iB \(([0-9]+) bytes\)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the refusal %q names no least bound in bytes", err)
	}
	least, _ := strconv.ParseInt(m[1], 10, 64)
	if out, err := provision(least); err != nil {
		t.Fatalf("provisioning the least bound the refusal named (%d): %v\n%s", least, err, out)
	}
	si := status()
	if si.Config.MaxBytes != least || float64(si.State.Bytes) >= 0.9*float64(least) {
		t.Fatalf("after provisioning %d the bucket is bounded at %d holding %d bytes; want that bound, with the bucket under 90%% of it", least, si.Config.MaxBytes, si.State.Bytes)
	}

	// A higher bound only adds room: it is applied even while the bucket
	// is still past its mark.
	higher := least + 64<<10
	for i := 60; float64(status().State.Bytes) < 0.9*float64(higher); i++ {
		if _, err := kv.Put(ctx, fmt.Sprintf("bot.c%d.1", i), make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := provision(higher); err != nil {
		t.Fatalf("provisioning a higher bound (%d) with the bucket past the mark of both: %v\n%s; want it applied", higher, err, out)
	}
	if si := status(); si.Config.MaxBytes != higher || float64(si.State.Bytes) < 0.9*float64(higher) {
		t.Fatalf("after raising the bound to %d the bucket is bounded at %d holding %d bytes; want the new bound, the bucket still past 90%% of it", higher, si.Config.MaxBytes, si.State.Bytes)
	}
}
