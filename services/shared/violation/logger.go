package violation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Logger is an embedded NATS server's logger (server.Logger): permission
// violations go to a Recorder, the server's other errors and warnings to
// slog (at most linesPerSecond a second, the rest counted), its notices,
// debug and trace nowhere. No call waits: violations and lines are handed
// to queues, and a full queue drops and counts.
type Logger struct {
	rec   *Recorder
	lines chan line
	now   func() time.Time

	mu         sync.Mutex
	second     time.Time
	count      int
	suppressed int
}

type line struct {
	level      slog.Level
	text       string
	suppressed int
}

// linesPerSecond bounds the server's lines other than violations that reach
// slog: some (failed authentications) anyone who can reach the port causes.
const linesPerSecond = 50

// NewLogger returns the server logger that feeds rec and, until ctx ends,
// log.
func NewLogger(ctx context.Context, rec *Recorder, log *slog.Logger) *Logger {
	l := &Logger{rec: rec, lines: make(chan line, linesPerSecond), now: time.Now}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ln := <-l.lines:
				attrs := []any{"source", "nats"}
				if ln.suppressed > 0 {
					attrs = append(attrs, "lines_suppressed_before", ln.suppressed)
				}
				log.Log(ctx, ln.level, ln.text, attrs...)
			}
		}
	}()
	return l
}

// Errorf records a permission violation, or logs the line as an error.
func (l *Logger) Errorf(format string, v ...any) {
	if viol, ok := Parse(format, v); ok {
		viol.At = l.now()
		l.rec.Offer(viol)
		return
	}
	l.pass(slog.LevelError, format, v)
}

// Warnf logs the line as a warning.
func (l *Logger) Warnf(format string, v ...any) { l.pass(slog.LevelWarn, format, v) }

// Fatalf logs the line as an error (the server stops itself after a fatal error).
func (l *Logger) Fatalf(format string, v ...any) { l.pass(slog.LevelError, format, v) }

// Noticef, Debugf and Tracef log nothing: airlock reports the server's
// state itself.
func (l *Logger) Noticef(string, ...any) {}
func (l *Logger) Debugf(string, ...any)  {}
func (l *Logger) Tracef(string, ...any)  {}

func (l *Logger) pass(level slog.Level, format string, v []any) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.second) >= time.Second {
		l.second, l.count = now, 0
	}
	l.count++
	if l.count > linesPerSecond {
		l.suppressed++
		return
	}
	select {
	case l.lines <- line{level: level, text: fmt.Sprintf(format, v...), suppressed: l.suppressed}:
		l.suppressed = 0
	default:
		l.suppressed++
	}
}
