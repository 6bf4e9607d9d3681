// Package obs is logging, metrics and health, the same for every service.
package obs

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// NewLogger returns a slog logger writing to w in the configured format and level.
func NewLogger(cfg config.Log, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, fmt.Errorf("log.level %q: use debug, info, warn or error", cfg.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(cfg.Format) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log.format %q: use text or json", cfg.Format)
	}
}

// Metrics are the instruments every service shares; services label them
// with their own name. One Metrics per process, passed in, never global.
type Metrics struct {
	Registry *prometheus.Registry
	// Handled counts messages a service processed, by outcome (ok, retry, dropped).
	Handled *prometheus.CounterVec
	// Latency of handling one message, in seconds.
	Latency *prometheus.HistogramVec
	// Published counts events published, by type.
	Published *prometheus.CounterVec
	// StreamBytes and StreamMaxBytes are a stream's use and its byte bound
	// (bus.StreamWatch sets them): alert well before the first reaches the
	// second, where the events stream refuses new events.
	StreamBytes, StreamMaxBytes *prometheus.GaugeVec
}

// NewMetrics builds the registry with Go and process collectors and the shared instruments.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		Handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_messages_handled_total", Help: "Messages handled by a service, by outcome.",
		}, []string{"service", "outcome"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_handle_seconds", Help: "Time to handle one message.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10),
		}, []string{"service"}),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_events_published_total", Help: "Lifecycle events published, by type.",
		}, []string{"service", "type"}),
		StreamBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "airlock_stream_bytes", Help: "Bytes a JetStream stream holds.",
		}, []string{"stream"}),
		StreamMaxBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "airlock_stream_max_bytes", Help: "A JetStream stream's byte bound (stream.max_bytes for the events stream).",
		}, []string{"stream"}),
	}
	reg.MustRegister(m.Handled, m.Latency, m.Published, m.StreamBytes, m.StreamMaxBytes)
	return m
}

// Observe records one handled message.
func (m *Metrics) Observe(service, outcome string, started time.Time) {
	m.Handled.WithLabelValues(service, outcome).Inc()
	m.Latency.WithLabelValues(service).Observe(time.Since(started).Seconds())
}

// MetricsHandler serves the registry in the Prometheus text format.
func (m *Metrics) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Health reports a process's readiness: every service it runs has said
// it is ready, NATS is connected, and the request/reply endpoints of the
// services it runs answer.
type Health struct {
	NC       *nats.Conn
	Services []string
	// Ready holds, by service name, a channel each service closes once it
	// serves (svc.Service.Ready): its endpoints registered, its consumers
	// subscribed. Until every one is closed the process is starting.
	Ready map[string]<-chan struct{}
	// Endpoints are nats.go/micro service names that must answer $SRV.PING
	// before the process is ready (e.g. "approval", "policy").
	Endpoints []string
	Started   time.Time
	// Stores are checks of where the process writes, by name: the events
	// stream (full, it refuses new events), the audit store of `airlock
	// dev --clickhouse-local`. An error is a sentence saying why it takes
	// nothing and what to do, and the process is degraded. A check runs on
	// every request: it reads what is known, it asks no server.
	Stores map[string]func() error
}

// ServeHTTP answers 200 with JSON while every service is ready, NATS is
// connected, every endpoint answers and no store is down; 503 otherwise:
// "starting" (with waiting_for and a message naming the services not ready
// yet) or "degraded" (with a message, and down: each store's sentence).
func (h Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	status, code := "ok", http.StatusOK
	natsStatus := "none"
	waiting := h.starting()
	var message string
	if len(waiting) > 0 {
		status, code = "starting", http.StatusServiceUnavailable
		message = "not ready yet: these services are still starting (registering endpoints, subscribing consumers): " +
			strings.Join(waiting, ", ") + "; ask again shortly"
	}
	if h.NC != nil {
		natsStatus = strings.ToLower(h.NC.Status().String())
		if !h.NC.IsConnected() {
			status, code = "degraded", http.StatusServiceUnavailable
			message = "not connected to NATS (" + natsStatus + "); the process reconnects by itself: ask again shortly, and check the NATS servers if it persists"
		} else if len(waiting) == 0 {
			for _, name := range h.Endpoints {
				if _, err := h.NC.Request("$SRV.PING."+name, nil, 500*time.Millisecond); err != nil {
					waiting = append(waiting, name)
				}
			}
			if len(waiting) > 0 {
				status, code = "starting", http.StatusServiceUnavailable
				message = "not ready yet: the endpoints of these services do not answer on NATS: " + strings.Join(waiting, ", ") + "; ask again shortly"
			}
		}
	}
	body := map[string]any{
		"status": status, "nats": natsStatus, "services": h.Services,
		"uptime_seconds": int(time.Since(h.Started).Seconds()),
	}
	if len(waiting) > 0 {
		body["waiting_for"] = waiting
	}
	if message != "" {
		body["message"] = message
	}
	down := map[string]string{}
	var downSentences []string
	for _, name := range slices.Sorted(maps.Keys(h.Stores)) {
		if err := h.Stores[name](); err != nil {
			down[name] = err.Error()
			downSentences = append(downSentences, err.Error())
		}
	}
	if len(down) > 0 {
		body["down"] = down
		if status == "ok" {
			status, code = "degraded", http.StatusServiceUnavailable
			body["message"] = strings.Join(downSentences, "; ")
		}
		body["status"] = status
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// starting names the services that have not said they are ready, sorted.
func (h Health) starting() []string {
	var out []string
	for name, ready := range h.Ready {
		select {
		case <-ready:
		default:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
