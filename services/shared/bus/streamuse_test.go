package bus_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestStreamWatchWarnsOnceAtEachThreshold fills a 64 KiB discard-new
// stream (as the events stream is at stream.max_bytes) past 80% and then
// 95% of its bound: each crossing logs one warning saying what to do, and
// the gauges follow the stream.
func TestStreamWatchWarnsOnceAtEachThreshold(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	const maxBytes = 64 << 10
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "USE", Subjects: []string{"use.>"}, MaxBytes: maxBytes, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	metrics := obs.NewMetrics()
	watch := bus.NewStreamWatch(js, "USE", slog.New(slog.NewTextHandler(&logged, nil)), metrics)
	// fillTo publishes 1 KiB messages until the stream holds share of its bound.
	fillTo := func(share float64) {
		t.Helper()
		for {
			u, err := bus.ReadStreamUse(ctx, js, "USE")
			if err != nil {
				t.Fatal(err)
			}
			if u.Share() >= share {
				return
			}
			if _, err := js.Publish(ctx, "use.x", make([]byte, 1<<10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name     string
		fillTo   float64
		level    string
		warnings int
	}{
		{"an_empty_stream_is_quiet", 0, "", 0},
		{"past_80_percent_warns", bus.StreamUseWarning, "warning", 1},
		{"a_second_check_past_80_percent_warns_no_more", bus.StreamUseWarning, "warning", 1},
		{"past_95_percent_warns_again", bus.StreamUseCritical, "critical", 2},
		{"a_second_check_past_95_percent_warns_no_more", bus.StreamUseCritical, "critical", 2},
	}
	for _, s := range steps {
		fillTo(s.fillTo)
		u, err := watch.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		warnings := strings.Count(logged.String(), "level=WARN")
		if u.Level() != s.level || warnings != s.warnings {
			t.Fatalf("%s: use %s at level %q after %d warnings, want %q after %d:\n%s", s.name, u, u.Level(), warnings, s.level, s.warnings, logged.String())
		}
		if got := testutil.ToFloat64(metrics.StreamBytes.WithLabelValues("USE")); got != float64(u.Bytes) {
			t.Fatalf("%s: airlock_stream_bytes %v, want %d", s.name, got, u.Bytes)
		}
		if got := testutil.ToFloat64(metrics.StreamMaxBytes.WithLabelValues("USE")); got != maxBytes {
			t.Fatalf("%s: airlock_stream_max_bytes %v, want %d", s.name, got, maxBytes)
		}
	}
	for _, want := range []string{"stream use is warning", "stream use is critical", "raise stream.max_bytes", "airlock then decides no new call"} {
		if !strings.Contains(logged.String(), want) {
			t.Fatalf("the log lacks %q:\n%s", want, logged.String())
		}
	}
}

// A stream is full when it refuses new messages at its bound and has less
// room under it than its largest message: /healthz and the health page
// then say so.
func TestStreamUseIsFullWhenItsLargestMessageNoLongerFits(t *testing.T) {
	for _, tt := range []struct {
		name string
		use  bus.StreamUse
		full bool
	}{
		{"unbounded_is_never_full", bus.StreamUse{Bytes: 1 << 40, MaxBytes: -1, MaxMsgSize: 1 << 20, RefusesNew: true}, false},
		{"room_for_one_largest_message_is_not_full", bus.StreamUse{Bytes: 15 << 20, MaxBytes: 16 << 20, MaxMsgSize: 1 << 20, RefusesNew: true}, false},
		{"less_room_than_the_largest_message_is_full", bus.StreamUse{Bytes: 15<<20 + 1, MaxBytes: 16 << 20, MaxMsgSize: 1 << 20, RefusesNew: true}, true},
		{"at_the_bound_dropping_old_messages_is_not_full", bus.StreamUse{Bytes: 16 << 20, MaxBytes: 16 << 20, MaxMsgSize: 1 << 20}, false},
		{"without_a_max_msg_size_a_64th_of_the_bound_is_its_largest", bus.StreamUse{Bytes: 63 << 10, MaxBytes: 64 << 10, RefusesNew: true}, false},
		{"without_a_max_msg_size_less_room_than_a_64th_is_full", bus.StreamUse{Bytes: 63<<10 + 1, MaxBytes: 64 << 10, RefusesNew: true}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.use.Full(); got != tt.full {
				t.Fatalf("%+v: Full() = %v, want %v", tt.use, got, tt.full)
			}
			if advice := tt.use.Advice(); tt.full && !strings.Contains(advice, "is full") {
				t.Fatalf("the advice for a full stream does not say it is full: %q", advice)
			}
		})
	}
}
