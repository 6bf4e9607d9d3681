package lognotify_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/notify/lognotify"
	"github.com/airlock-gate/airlock/services/shared/notify/notifytest"
)

// syncBuffer is a log sink safe for the suite's concurrent deliveries.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogNotifierPassesTheNotifierContract(t *testing.T) {
	var buf *syncBuffer
	notifytest.Run(t, notifytest.Suite{
		New: func(t *testing.T) notify.Notifier {
			buf = &syncBuffer{}
			return lognotify.New(slog.New(slog.NewTextHandler(buf, nil)))
		},
		Delivered: func(t *testing.T, kind string, rec *airlockv1.ApprovalRecord, ref string) bool {
			msg := map[string]string{"announce": `msg="approval needed"`, "remind": `msg="approval still needed"`, "update": `msg="approval outcome"`}[kind]
			for _, line := range strings.Split(buf.String(), "\n") {
				if strings.Contains(line, msg) && strings.Contains(line, "ref="+ref) {
					if kind == "update" && !strings.Contains(line, "state="+strings.ToLower(strings.TrimPrefix(rec.GetState().String(), "APPROVAL_STATE_"))) {
						continue
					}
					return true
				}
			}
			return false
		},
	})
}
