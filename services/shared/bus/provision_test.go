package bus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestProvisionIsIdempotentAndAppliesChanges(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	cfg := testenv.Config(n.URL())
	ctx := context.Background()

	// The events and intake streams and every bucket.
	everything := 2 + len(bus.BucketConfigs(cfg))
	first, err := bus.Provision(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != everything {
		t.Fatalf("first run should create the events and intake streams and every bucket (%d), did %v", everything, first)
	}
	second, err := bus.Provision(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 0 {
		t.Fatalf("second run with the same config changed %v", second)
	}

	cfg.Stream.MaxAge = 48 * time.Hour
	cfg.Buckets.History = 10
	third, err := bus.Provision(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The approvals and in-doubt buckets keep one value per key whatever buckets.history says.
	if len(third) != everything-2 {
		t.Fatalf("changed max age (both streams) and history (every bucket but approvals and in-doubt) should update %d things, did %v", everything-2, third)
	}
	s, err := js.Stream(ctx, cfg.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxAge; got != 48*time.Hour {
		t.Fatalf("max age is %s after provisioning 48h", got)
	}
	kv, err := js.KeyValue(ctx, cfg.Buckets.Grants)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := kv.Status(ctx)
	if st.History() != 10 {
		t.Fatalf("bucket history is %d after provisioning 10", st.History())
	}
}

// A bucket provisioned before its entries took their own TTL (and, for
// approvals and in-doubt tasks, before it kept one value per key, R5 F2,
// and before its bytes were bounded by approval.max_bytes or
// buckets.in_doubt_max_bytes) is brought to the current settings in place.
func TestProvisionLetsAnOlderBucketTakeKeyTTLs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		bucket      func(config.Buckets) string
		wantHistory int64 // 0: buckets.history
		boundedBy   func(config.Config) int64
		// unboundedOnly: the bucket differs only by having no byte bound
		// (provisioned when ended records took their TTL, before the bound).
		unboundedOnly bool
	}{
		{"client waits", func(b config.Buckets) string { return b.ClientWaits }, 0, func(c config.Config) int64 { return c.Buckets.ClientWaitsMaxBytes }, false},
		{"approvals", func(b config.Buckets) string { return b.Approvals }, 1, func(c config.Config) int64 { return c.Approval.MaxBytes }, false},
		{"in doubt", func(b config.Buckets) string { return b.InDoubt }, 1, func(c config.Config) int64 { return c.Buckets.InDoubtMaxBytes }, false},
		{"approvals with no byte bound", func(b config.Buckets) string { return b.Approvals }, 1, func(c config.Config) int64 { return c.Approval.MaxBytes }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testenv.StartNATS(t)
			_, js := testenv.Connect(t, n.URL())
			cfg := testenv.Config(n.URL())
			ctx := context.Background()
			name := tc.bucket(cfg.Buckets)
			var older jetstream.KeyValueConfig
			for _, kvc := range bus.BucketConfigs(cfg) {
				if kvc.Bucket == name {
					older = kvc
				}
			}
			older.MaxBytes = 0
			if !tc.unboundedOnly {
				older.LimitMarkerTTL, older.History = 0, 5
			}
			if _, err := js.CreateKeyValue(ctx, older); err != nil {
				t.Fatal(err)
			}
			if _, err := bus.Provision(ctx, js, cfg); err != nil {
				t.Fatal(err)
			}
			kv, err := js.KeyValue(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Create(ctx, "d.agent.call", []byte("owner"), jetstream.KeyTTL(time.Hour)); err != nil {
				t.Fatalf("a key with its own TTL in the provisioned bucket %s: %v", name, err)
			}
			st, err := kv.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.wantHistory
			if want == 0 {
				want = int64(cfg.Buckets.History)
			}
			sc := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
			if h := sc.MaxMsgsPerSubject; h != want {
				t.Errorf("bucket %s keeps %d values per key after provisioning, want %d", name, h, want)
			}
			if b, want := sc.MaxBytes, tc.boundedBy(cfg); b != want {
				t.Errorf("bucket %s holds at most %d bytes after provisioning, want %d", name, b, want)
			}
		})
	}
}

// The client-waits bucket's byte bound is one a deployment did not choose
// (buckets.client_waits_max_bytes has a default): where the bucket holds
// more already, provisioning goes on and leaves it as bounded as it was,
// saying so, and bounds it once it holds less (R9 F8).
func TestProvisionBoundsClientWaitsOnceTheyFit(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	cfg := testenv.Config(n.URL())
	ctx := context.Background()
	var older jetstream.KeyValueConfig
	for _, kvc := range bus.BucketConfigs(cfg) {
		if kvc.Bucket == cfg.Buckets.ClientWaits {
			older = kvc
		}
	}
	older.MaxBytes = 0 // provisioned before the bound
	kv, err := js.CreateKeyValue(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "r.left", make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	cfg.Buckets.ClientWaitsMaxBytes = 32 << 10
	bound := func() int64 {
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes
	}
	for _, step := range []struct {
		name      string
		before    func()
		wantBound int64
		wantSaid  string
	}{
		{"holding_more_it_keeps_its_bound", func() {}, -1, "KiB, more than buckets.client_waits_max_bytes (32.0 KiB)"},
		{"holding_less_it_is_bounded", func() {
			if err := kv.Purge(ctx, "r.left"); err != nil {
				t.Fatal(err)
			}
		}, cfg.Buckets.ClientWaitsMaxBytes, "updated"},
	} {
		step.before()
		changes, err := bus.Provision(ctx, js, cfg)
		if err != nil {
			t.Fatalf("%s: provisioning: %v", step.name, err)
		}
		said := ""
		for _, c := range changes {
			if c.Name == cfg.Buckets.ClientWaits {
				said += c.Action + "; "
			}
		}
		if !strings.Contains(said, step.wantSaid) {
			t.Errorf("%s: provisioning said %q of the bucket, want %q", step.name, said, step.wantSaid)
		}
		if b := bound(); b != step.wantBound {
			t.Errorf("%s: the bucket holds at most %d bytes, want %d", step.name, b, step.wantBound)
		}
	}
}

// A bound under what the approvals bucket already holds would refuse every
// write that grows a record, decisions on waiting calls among them:
// provisioning refuses it, naming the setting, and changes nothing.
func TestProvisionRefusesAnApprovalsBoundUnderWhatTheBucketHolds(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	cfg := testenv.Config(n.URL())
	ctx := context.Background()
	if _, err := bus.Provision(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "bot.c.1", make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	was := cfg.Approval.MaxBytes
	cfg.Approval.MaxBytes = 32 << 10
	_, err = bus.Provision(ctx, js, cfg)
	if err == nil || !strings.Contains(err.Error(), "more than the 32.0 KiB approval.max_bytes would allow") || !strings.Contains(err.Error(), "Set approval.max_bytes to at least") {
		t.Fatalf("provisioning a bound under what the bucket holds: %v; want it refused naming approval.max_bytes", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes; b != was {
		t.Fatalf("the bucket's bound is %d after a refused provisioning, want %d as before", b, was)
	}
}

func TestRepublishedMsgIDIsStoredOnce(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx := context.Background()
	msg := nats.NewMsg("airlock.evt.bot.c1.requested")
	msg.Data = []byte("x")
	msg.Header.Set(jetstream.MsgIDHeader, "c1.1.requested")
	a1, err := deps.JS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := deps.JS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Duplicate || !a2.Duplicate || a1.Sequence != a2.Sequence {
		t.Fatalf("first ack %+v, second ack %+v: want the second marked duplicate of the first", a1, a2)
	}
	s, _ := deps.JS.Stream(ctx, deps.Config.Stream.Name)
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
}

// A cluster that has just been deployed answers before it can place a
// replicated stream; provisioning it at once must wait that out, every
// time (CI once failed on "no suitable peers for placement").
func TestProvisionRightAfterAClusterStartsAlwaysSucceeds(t *testing.T) {
	const runs = 4
	for run := range runs {
		servers, err := embedded.StartClusterNodes(t.TempDir(), 3)
		if err != nil {
			t.Fatal(err)
		}
		var urls []string
		for _, s := range servers {
			urls = append(urls, s.URL())
		}
		cfg := testenv.Config(strings.Join(urls, ","))
		cfg.Stream.Replicas, cfg.Buckets.Replicas = 3, 3
		nc, err := nats.Connect(cfg.NATS.URL)
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		changes, err := bus.Provision(context.Background(), js, cfg)
		if err != nil {
			t.Fatalf("run %d of %d: provisioning a cluster right after it started: %v", run+1, runs, err)
		}
		created := 0
		for _, c := range changes {
			if c.Action == "created" {
				created++
			}
		}
		if want := 2 + len(bus.BucketConfigs(cfg)); created != want {
			t.Fatalf("run %d: created %d streams and buckets (%v), want the 2 streams and every bucket (%d)", run+1, created, changes, want)
		}
		s, err := js.Stream(context.Background(), cfg.Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Fatalf("run %d: events stream has %d replicas, want 3", run+1, got)
		}
		nc.Close()
		for _, s := range servers {
			s.Stop()
		}
	}
}

// After its bound, provisioning says what it could not place and what to
// check, instead of the server's bare "no suitable peers".
func TestProvisionThatCannotPlaceSaysWhatToCheck(t *testing.T) {
	servers, err := embedded.StartCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	cfg := testenv.Config(servers[0].URL())
	cfg.Stream.Replicas, cfg.Buckets.Replicas = 5, 5 // more than the cluster has
	cfg.NATS.ProvisionWait = 2 * time.Second
	_, js := testenv.Connect(t, cfg.NATS.URL)
	_, err = bus.Provision(context.Background(), js, cfg)
	if err == nil {
		t.Fatal("provisioning 5 replicas on 3 servers succeeded")
	}
	for _, want := range []string{"stream AIRLOCK_EVENTS", "5 replicas", "within 2s", "airlock provision"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A NATS server with less JetStream storage than the streams may hold (as
// one on a nearly full disk offers, by default) refuses the first of them,
// the events stream; the error says how to make room. An embedded server (airlock dev, tests) does
// not size its store by the disk free at boot, so it always starts.
func TestProvisionOnAServerWithoutRoomForTheStreamsSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "small.conf")
	if err := os.WriteFile(conf, []byte("jetstream { max_file_store: 64MB }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	small, err := embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(dir, "small"), ConfigFile: conf})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Stop()
	cfg := testenv.Config(small.URL())
	_, js := testenv.Connect(t, cfg.NATS.URL)
	_, err = bus.Provision(context.Background(), js, cfg)
	if err == nil {
		t.Fatalf("provisioning a %d MiB events stream on a 64 MB store succeeded", cfg.Stream.MaxBytes>>20)
	}
	for _, want := range []string{"stream AIRLOCK_EVENTS", "16384 MiB", "max_file_store", "stream.max_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	roomy, err := embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(dir, "roomy")})
	if err != nil {
		t.Fatal(err)
	}
	defer roomy.Stop()
	if got := roomy.JetStreamConfig().MaxStore; got != server.JetStreamMaxStoreDefault {
		t.Fatalf("an embedded server's JetStream store limit is %d bytes, not NATS's fixed default %d: it depends on the disk free at boot", got, int64(server.JetStreamMaxStoreDefault))
	}
}

// Events carrying large arguments fill the events stream to its bound
// (stream.max_bytes): from there every new event is refused, and not one
// stored event is dropped to make room (each is audit trail, and the
// executor's exactly-once check reads a call's earlier events). A bound
// below what the stream holds is not applied: it would refuse every event.
func TestTheEventsStreamRefusesNewEventsAtItsBoundAndDropsNone(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	cfg := testenv.Config(n.URL())
	cfg.Stream.MaxBytes = 4 << 20
	ctx := context.Background()
	// As an earlier airlock made it: unbounded, dropping old events at its
	// (absent) bound. Provisioning bounds it in place.
	earlier := bus.StreamConfig(cfg.Stream)
	earlier.MaxBytes, earlier.Discard = -1, jetstream.DiscardOld
	if _, err := js.CreateStream(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Provision(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	args := make([]byte, 120<<10)
	var refused error
	for i := 0; refused == nil && i < 2*int(cfg.Stream.MaxBytes)/len(args); i++ {
		_, refused = js.Publish(ctx, fmt.Sprintf("airlock.evt.bot.c%d.1.requested", i), args)
	}
	if refused == nil {
		t.Fatalf("%d MiB of events were all stored under stream.max_bytes %d MiB", 2*cfg.Stream.MaxBytes>>20, cfg.Stream.MaxBytes>>20)
	}
	s, err := js.Stream(ctx, cfg.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.FirstSeq != 1 || st.Bytes > uint64(cfg.Stream.MaxBytes) {
		t.Fatalf("after the refusal (%v) the stream holds sequences %d-%d, %d bytes: want the first event kept, at most %d bytes", refused, st.FirstSeq, st.LastSeq, st.Bytes, cfg.Stream.MaxBytes)
	}

	cfg.Stream.MaxBytes = 1 << 20
	if _, err := bus.Provision(ctx, js, cfg); err == nil || !strings.Contains(err.Error(), "raise stream.max_bytes") {
		t.Fatalf("provisioning a bound under what the stream holds answered %v; want it refused, saying to raise stream.max_bytes", err)
	}
}
