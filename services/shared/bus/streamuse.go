package bus

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/obs"
)

// The shares of a stream's byte bound at which its use is reported: the
// events stream discards new messages at its bound (stream.max_bytes), so
// airlock then refuses new events and so new calls; operators hear of it
// before.
const (
	StreamUseWarning  = 0.80
	StreamUseCritical = 0.95
	// streamUseHysteresis is how far under a threshold use must fall
	// before crossing it again warns again: use hovering at a threshold
	// (events ageing out as new ones come) warns once.
	streamUseHysteresis = 0.05
)

// StreamUse is how much of its byte bound a stream holds (airlock bounds
// its streams by bytes alone: stream.max_bytes, intake.max_bytes).
type StreamUse struct {
	Stream string
	// Bytes held and the bound (MaxBytes <= 0: unbounded).
	Bytes    uint64
	MaxBytes int64
	// MaxMsgSize is the largest message the stream takes (<= 0: the
	// server's max_payload).
	MaxMsgSize int32
	// RefusesNew: at a bound the stream refuses new messages (discard
	// new, as the events stream) rather than dropping old ones.
	RefusesNew bool
}

// ReadStreamUse reads a stream's use from the server.
func ReadStreamUse(ctx context.Context, js jetstream.JetStream, stream string) (StreamUse, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return StreamUse{}, fmt.Errorf("read the use of stream %s: %w", stream, err)
	}
	return StreamUseOf(s.CachedInfo()), nil
}

// StreamUseOf is the use a stream's info says it has.
func StreamUseOf(info *jetstream.StreamInfo) StreamUse {
	c := info.Config
	return StreamUse{Stream: c.Name, Bytes: info.State.Bytes, MaxBytes: c.MaxBytes,
		MaxMsgSize: c.MaxMsgSize, RefusesNew: c.Discard == jetstream.DiscardNew}
}

// defaultMaxPayload is the NATS server's max_payload when not configured:
// the largest message a stream without a max_msg_size of its own takes.
const defaultMaxPayload = 1 << 20

// Full reports whether the stream refuses new messages: it discards new
// ones at its bound and has less room under it than the largest message
// it takes (stream.max_msg_size for the events stream; for a stream without
// one, the server's default max_payload or a 64th of the bound, whichever
// is less, as airlock's configuration bounds stream.max_msg_size). A
// stream reads as full before its last byte is used: from then on some of
// what airlock writes no longer fits.
func (u StreamUse) Full() bool {
	if !u.RefusesNew {
		return false
	}
	largest := int64(u.MaxMsgSize)
	if largest <= 0 {
		largest = min(defaultMaxPayload, u.MaxBytes/64)
	}
	return u.MaxBytes > 0 && u.Bytes+uint64(largest) > uint64(u.MaxBytes)
}

// Share is the part of the bound held (0 for an unbounded stream).
func (u StreamUse) Share() float64 {
	if u.MaxBytes <= 0 {
		return 0
	}
	return float64(u.Bytes) / float64(u.MaxBytes)
}

// Level is "critical" at StreamUseCritical of the bound or more, "warning"
// at StreamUseWarning or more, else "".
func (u StreamUse) Level() string {
	return [...]string{"", "warning", "critical"}[u.level(0)]
}

// level is 0, 1 (warning) or 2 (critical), each threshold lowered by slack.
func (u StreamUse) level(slack float64) int {
	switch share := u.Share(); {
	case share >= StreamUseCritical-slack:
		return 2
	case share >= StreamUseWarning-slack:
		return 1
	}
	return 0
}

// String says how much of the bound the stream holds, e.g. "13.2 GiB of
// 16.0 GiB (82%)".
func (u StreamUse) String() string {
	if u.MaxBytes <= 0 {
		return byteSize(int64(u.Bytes)) + " (unbounded)"
	}
	return fmt.Sprintf("%s (%.0f%%)", u.used(), 100*u.Share())
}

// used is "13.2 GiB of 16.0 GiB".
func (u StreamUse) used() string {
	return byteSize(int64(u.Bytes)) + " of " + byteSize(u.MaxBytes)
}

// Advice is the sentence an operator reads at a Level or when the stream
// is Full: what happens at the bound and what to do ("" under the warning
// threshold). /healthz and the console's health page say it of a full
// events stream.
func (u StreamUse) Advice() string {
	if u.Full() {
		return fmt.Sprintf("the events stream %s is full (%s, stream.max_bytes) and refuses new events, so airlock records and decides no new call: "+
			"raise stream.max_bytes in airlock's configuration and run `airlock provision` (`airlock dev` does at start; the NATS server's JetStream storage must hold it), "+
			"or wait for events older than stream.max_age to age out", u.Stream, u.used())
	}
	if u.Level() == "" {
		return ""
	}
	return fmt.Sprintf("the stream %s is %.0f%% full (%s, stream.max_bytes): at the bound it refuses new events, "+
		"and airlock then decides no new call; raise stream.max_bytes (and the server's JetStream storage) or shorten stream.max_age", u.Stream, 100*u.Share(), u.used())
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// StreamWatch keeps an eye on a stream's use: every check sets the
// airlock_stream_bytes and airlock_stream_max_bytes gauges and logs a
// warning once when use crosses StreamUseWarning, and again when it crosses
// StreamUseCritical (again after it fell back under). It keeps its last
// reading (Last) for /healthz, which so asks JetStream nothing.
type StreamWatch struct {
	js      jetstream.JetStream
	stream  string
	log     *slog.Logger
	metrics *obs.Metrics
	// level is the highest threshold warned of since use was last under it.
	level int

	mu sync.Mutex
	// last is the last reading, read set once a check succeeded.
	last StreamUse
	read bool
}

// StreamWatchNearTheBound is how often Run reads a stream's use once it is
// past StreamUseWarning, whatever its interval: near the bound the stream
// may fill within a minute, and Last (/healthz) should say so within
// seconds, and again once it has room.
const StreamWatchNearTheBound = 5 * time.Second

// NewStreamWatch watches stream; metrics may be nil.
func NewStreamWatch(js jetstream.JetStream, stream string, log *slog.Logger, metrics *obs.Metrics) *StreamWatch {
	return &StreamWatch{js: js, stream: stream, log: log, metrics: metrics}
}

// Check reads the stream's use once, sets the gauges and warns of a
// threshold newly crossed. Not safe for concurrent use (Run calls it);
// Last is.
func (w *StreamWatch) Check(ctx context.Context) (StreamUse, error) {
	u, err := ReadStreamUse(ctx, w.js, w.stream)
	if err != nil {
		return u, err
	}
	w.mu.Lock()
	w.last, w.read = u, true
	w.mu.Unlock()
	if w.metrics != nil {
		w.metrics.StreamBytes.WithLabelValues(w.stream).Set(float64(u.Bytes))
		w.metrics.StreamMaxBytes.WithLabelValues(w.stream).Set(float64(u.MaxBytes))
	}
	if level := u.level(0); level > w.level {
		w.level = level
		w.log.Warn("stream use is "+u.Level(), "stream", w.stream, "bytes", u.Bytes, "max_bytes", u.MaxBytes,
			"use", fmt.Sprintf("%.0f%%", 100*u.Share()), "message", u.Advice())
	} else if low := u.level(streamUseHysteresis); low < w.level {
		w.level = low
		w.log.Info("stream use is back under its threshold", "stream", w.stream, "use", u.String())
	}
	return u, nil
}

// Last is the use the last successful check read; false before there was
// one.
func (w *StreamWatch) Last() (StreamUse, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.read
}

// Run checks at once, calls ready, and checks every interval (every
// StreamWatchNearTheBound while use is past StreamUseWarning) until ctx
// ends. A failed read is logged and tried again at the next interval: the
// watch never stops the service that runs it.
func (w *StreamWatch) Run(ctx context.Context, every time.Duration, ready func()) error {
	t := time.NewTimer(every)
	defer t.Stop()
	for first := true; ; first = false {
		wait := every
		u, err := w.Check(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Warn("cannot read the stream's use", "stream", w.stream, "err", err)
		case err == nil && u.Level() != "":
			wait = min(every, StreamWatchNearTheBound)
		}
		if first {
			ready()
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
