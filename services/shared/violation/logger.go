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
// debug and trace nowhere. Every call returns without waiting on anything
// but a short lock.
type Logger struct {
	rec *Recorder
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	second     time.Time
	lines      int
	suppressed int
}

// linesPerSecond bounds the server's lines other than violations that reach
// slog: some (failed authentications) anyone who can reach the port causes.
const linesPerSecond = 50

// NewLogger returns the server logger that feeds rec and log.
func NewLogger(rec *Recorder, log *slog.Logger) *Logger {
	return &Logger{rec: rec, log: log, now: time.Now}
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
	if now.Sub(l.second) >= time.Second {
		l.second, l.lines = now, 0
	}
	l.lines++
	if l.lines > linesPerSecond {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	attrs := []any{"source", "nats"}
	if suppressed > 0 {
		attrs = append(attrs, "lines_suppressed_before", suppressed)
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, v...), attrs...)
}
