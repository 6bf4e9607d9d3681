package chaos

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-gate/airlock/services/executor"
)

// execution is one request a tool received: one time the tool's side
// effect may have happened.
type execution struct {
	Server, Tool string
	Agent, Call  string
	Key          string // Idempotency-Key
	Attempt      string
	Args         map[string]any
	At           time.Time
	// Hung: the request was held by a hanging-upstream fault until the
	// executor gave up on it.
	Hung bool
}

// toolServer is the webhook tool server of the run: it verifies each
// request's signature, counts executions per call and idempotency key, and
// answers after a short random delay — or, for the "slow" server while a
// hanging-upstream fault is on, never (it holds the request until the
// executor hangs up).
type toolServer struct {
	URL    string
	secret []byte
	srv    *http.Server

	hanging atomic.Bool
	badSigs atomic.Int64

	mu    sync.Mutex
	rnd   *rand.Rand
	execs []execution
}

// Servers and tools of the run's tool registry.
const (
	serverHook = "hook"
	serverSlow = "slow"
)

func startToolServer(secret []byte, seed int64) (*toolServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tool server: %w", err)
	}
	t := &toolServer{URL: "http://" + ln.Addr().String(), secret: secret, rnd: rand.New(rand.NewPCG(uint64(seed), 17))}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *toolServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.srv.Shutdown(ctx)
	_ = t.srv.Close()
}

func (t *toolServer) serve(w http.ResponseWriter, r *http.Request) {
	server, tool, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	if !hmac.Equal([]byte(r.Header.Get(executor.HeaderSignature)), []byte(executor.Sign(t.secret, body))) {
		t.badSigs.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var args map[string]any
	if err := json.Unmarshal(body, &args); err != nil {
		http.Error(w, "arguments are not a JSON object", http.StatusBadRequest)
		return
	}
	agent, _ := args["agent"].(string)
	ex := execution{
		Server: server, Tool: tool, Agent: agent, Call: r.Header.Get(executor.HeaderCallID),
		Key: r.Header.Get(executor.HeaderIdempotencyKey), Attempt: r.Header.Get(executor.HeaderAttempt),
		Args: args, At: time.Now(),
	}
	hang := server == serverSlow && t.hanging.Load()
	ex.Hung = hang
	t.mu.Lock()
	t.execs = append(t.execs, ex)
	delay := time.Duration(50+t.rnd.IntN(450)) * time.Millisecond // long enough for kills to land mid-call
	t.mu.Unlock()
	if hang {
		<-r.Context().Done() // an upstream that never answers
		return
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"tool": server + "__" + tool, "call": ex.Call, "key": ex.Key, "args": args})
}

// executions returns a copy of every request received so far.
func (t *toolServer) executions() []execution {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]execution(nil), t.execs...)
}
