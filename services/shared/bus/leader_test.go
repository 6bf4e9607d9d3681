package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// On an R3 stream every write the stream acknowledged is seen by the next
// LastStoredLeader, whichever replicas lag (a Direct Get, answered by any
// replica, misses a few percent of them right after the write: the policy
// refused a valid revision 2 that way under `airlock chaos`). The message
// comes back as Direct Get returns it: headers, data, stored subject and
// sequence.
func TestLastStoredLeaderSeesEveryAcknowledgedWrite(t *testing.T) {
	nc, js, cfg := provisionedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 300 {
		subj := fmt.Sprintf("airlock.evt.bot.c%d.exec.started", i)
		msg := &nats.Msg{Subject: subj, Data: []byte(fmt.Sprint(i)), Header: nats.Header{"Nats-Msg-Id": {fmt.Sprint("id-", i)}}}
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := bus.LastStoredLeader(ctx, nc, cfg.Stream.Name, fmt.Sprintf("airlock.evt.bot.c%d.exec.*", i))
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			t.Fatalf("write %d (seq %d) was acknowledged and the leader's read found nothing", i, ack.Sequence)
		}
		if bus.StoredSeq(m) != ack.Sequence || string(m.Data) != fmt.Sprint(i) || m.Header.Get(jetstream.SubjectHeader) != subj || m.Header.Get("Nats-Msg-Id") != fmt.Sprint("id-", i) {
			t.Fatalf("read %d: seq %d subject %q data %q headers %v, want seq %d", i, bus.StoredSeq(m), m.Header.Get(jetstream.SubjectHeader), m.Data, m.Header, ack.Sequence)
		}
	}
	if m, err := bus.LastStoredLeader(ctx, nc, cfg.Stream.Name, "airlock.evt.bot.none.requested"); m != nil || err != nil {
		t.Fatalf("a subject with nothing stored: %v %v, want nil, nil", m, err)
	}
}

// On a cluster the buckets read from their leader: a value written is found
// by the next read, whichever replica lags. Provisioning again changes nothing.
func TestReplicatedBucketsReadTheirWrites(t *testing.T) {
	_, js, cfg := provisionedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, kvc := range bus.BucketConfigs(cfg) {
		s, err := js.Stream(ctx, "KV_"+kvc.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().Config.AllowDirect {
			t.Fatalf("bucket %s answers reads from any replica", kvc.Bucket)
		}
	}
	if again, err := bus.Provision(ctx, js, cfg); err != nil || len(again) != 0 {
		t.Fatalf("provisioning again changed %v (%v)", again, err)
	}
	kv, err := js.KeyValue(ctx, cfg.Buckets.Console)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		key := fmt.Sprintf("sessions.s%d", i)
		if _, err := kv.Create(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, key); err != nil {
			t.Fatalf("%s was created and the next read says %v", key, err)
		}
	}
}

// provisionedCluster starts 3 nodes and provisions R3 streams and buckets.
func provisionedCluster(t *testing.T) (*nats.Conn, jetstream.JetStream, config.Config) {
	t.Helper()
	c := testenv.StartCluster(t, 3)
	return c.NC, c.JS, c.Config
}
