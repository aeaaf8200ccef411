package serve

import (
	"net/http"
	"strconv"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
)

// metrics are the server's Prometheus metrics, its own (two servers in
// one process do not share them). GET /metrics writes them with the Go
// runtime's and the process's (promtext.go, promruntime.go).
type metrics struct {
	requests       *family // counter: route, code
	requestSeconds *family // histogram: route
	turnsRunning   *family // gauge
	turnsWaiting   *family // gauge
	turns          *family // counter: outcome
	turnSeconds    *family // histogram
	tokens         *family // counter: direction
	storeErrors    *family // counter
	sseClients     *family // gauge
	sseDropped     *family // counter
	sessionsActive *family // gauge
}

func newMetrics() *metrics {
	return &metrics{
		requests: newFamily("counter", "skein_http_requests_total",
			"HTTP requests by route pattern and status code.", "route", "code"),
		requestSeconds: newHistogram("skein_http_request_duration_seconds",
			"Time to answer an HTTP request (an SSE stream: its whole life), by route pattern.", defBuckets, "route"),
		turnsRunning: newFamily("gauge", "skein_turns_running",
			"Turns (prompts) running now."),
		turnsWaiting: newFamily("gauge", "skein_turns_waiting",
			"Prompts waiting for a turn slot (--max-running turns are running)."),
		turns: newFamily("counter", "skein_turns_total",
			"Finished turns by outcome: done, cancelled, error.", "outcome"),
		turnSeconds: newHistogram("skein_turn_duration_seconds",
			"Wall time of a turn, from the prompt to the agent's return.", exponentialBuckets(0.005, 2.5, 14)),
		tokens: newFamily("counter", "skein_llm_tokens_total",
			"Model tokens used by turns, by direction (input, output).", "direction"),
		storeErrors: newFamily("counter", "skein_store_errors_total",
			"Requests that failed with an internal (session store) error."),
		sseClients: newFamily("gauge", "skein_sse_clients",
			"Connected Server-Sent Events clients."),
		sseDropped: newFamily("counter", "skein_sse_dropped_total",
			"SSE clients disconnected because they fell behind."),
		sessionsActive: newFamily("gauge", "skein_sessions_active",
			"Served sessions with status active (counted against --max-sessions)."),
	}
}

// families returns every family /metrics writes, the runtime's and the
// process's read now.
func (m *metrics) families() []*family {
	out := []*family{m.requests, m.requestSeconds, m.turnsRunning, m.turnsWaiting, m.turns, m.turnSeconds, m.tokens,
		m.storeErrors, m.sseClients, m.sseDropped, m.sessionsActive}
	out = append(out, goFamilies()...)
	return append(out, processFamilies()...)
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
	serveExposition(w, r, s.metrics.families())
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
