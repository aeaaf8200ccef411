package serve

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (two servers in one process do not collide).
type metrics struct {
	registry       *prometheus.Registry
	handler        http.Handler
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	turnsRunning   prometheus.Gauge
	turns          *prometheus.CounterVec
	turnSeconds    prometheus.Histogram
	tokens         *prometheus.CounterVec
	storeErrors    prometheus.Counter
	sseClients     prometheus.Gauge
	sseDropped     prometheus.Counter
	sessionsActive prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_http_requests_total",
			Help: "HTTP requests by route pattern and status code."}, []string{"route", "code"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skein_http_request_duration_seconds",
			Help: "Time to answer an HTTP request (an SSE stream: its whole life), by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		turnsRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "skein_turns_running",
			Help: "Turns (prompts) running now."}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_turns_total",
			Help: "Finished turns by outcome: done, cancelled, error."}, []string{"outcome"}),
		turnSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skein_turn_duration_seconds",
			Help: "Wall time of a turn, from the prompt to the agent's return.", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 14)}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skein_llm_tokens_total",
			Help: "Model tokens used by turns, by direction (input, output)."}, []string{"direction"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_store_errors_total",
			Help: "Requests that failed with an internal (session store) error."}),
		sseClients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "skein_sse_clients",
			Help: "Connected Server-Sent Events clients."}),
		sseDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "skein_sse_dropped_total",
			Help: "SSE clients disconnected because they fell behind."}),
		sessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "skein_sessions_active",
			Help: "Served sessions with status active (counted against --max-sessions)."}),
	}
	m.registry.MustRegister(m.requests, m.requestSeconds, m.turnsRunning, m.turns, m.turnSeconds, m.tokens,
		m.storeErrors, m.sseClients, m.sseDropped, m.sessionsActive,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return m
}

// request counts one answered request.
func (m *metrics) request(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestSeconds.WithLabelValues(route).Observe(d.Seconds())
}

// turnDone records a finished turn.
func (m *metrics) turnDone(outcome string, d time.Duration) {
	m.turnsRunning.Dec()
	m.turns.WithLabelValues(outcome).Inc()
	m.turnSeconds.Observe(d.Seconds())
}

// observe counts the tokens of llm_call events.
func (m *metrics) observe(e sessions.Event) {
	if e.Type != agent.EventLLMCall {
		return
	}
	for key, dir := range map[string]string{"input_tokens": "input", "output_tokens": "output"} {
		if n, ok := e.Data[key].(int64); ok && n > 0 {
			m.tokens.WithLabelValues(dir).Add(float64(n))
		}
	}
}

// serveMetrics handles GET /metrics.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}

// healthz handles GET /healthz: 200 while the store answers.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	active, err := s.countActive(r.Context())
	if err != nil {
		s.log.Error("health check failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable"})
		return nil
	}
	s.mu.Lock()
	running := len(s.running)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "activeSessions": active, "runningTurns": running})
	return nil
}
