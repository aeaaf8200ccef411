package serve

import (
	"errors"
	"net/http"
	"runtime/debug"
	"time"
)

// route is one endpoint: its method and path pattern (Go 1.22 ServeMux
// syntax), whether it needs the token, and its handler. The OpenAPI
// document is checked against this table by a test.
type route struct {
	method, path string
	public       bool // no token needed
	viewer       bool // a viewer page: ?token= signs in
	handler      func(w http.ResponseWriter, r *http.Request) error
}

// routeTable lists every endpoint the server serves.
func (s *Server) routeTable() []route {
	return []route{
		{method: "POST", path: "/api/sessions", handler: s.createSession},
		{method: "GET", path: "/api/sessions", handler: s.listSessions},
		{method: "GET", path: "/api/sessions/{id}", handler: s.getSession},
		{method: "DELETE", path: "/api/sessions/{id}", handler: s.deleteSession},
		{method: "POST", path: "/api/sessions/{id}/prompt", handler: s.promptSession},
		{method: "GET", path: "/api/sessions/{id}/messages", handler: s.listMessages},
		{method: "POST", path: "/api/sessions/{id}/cancel", handler: s.cancelTurn},
		{method: "POST", path: "/api/sessions/{id}/complete", handler: s.completeSession},
		{method: "GET", path: "/api/sessions/{id}/events", handler: s.streamEvents},
		{method: "GET", path: "/api/sessions/{id}/timeline", handler: s.sessionTimeline},
		{method: "GET", path: "/api/runs", handler: s.listRuns},
		{method: "GET", path: "/api/runs/{id}", handler: s.getRun},
		{method: "GET", path: "/api/agents", handler: s.listAgents},
		{method: "GET", path: "/api/repos", handler: s.listRepos},
		{method: "POST", path: "/api/repos", handler: s.createRepo},
		{method: "GET", path: "/api/repos/{id}", handler: s.getRepo},
		{method: "DELETE", path: "/api/repos/{id}", handler: s.deleteRepo},
		{method: "GET", path: "/api/evals", handler: s.listEvals},
		{method: "GET", path: "/api/evals/{id}", handler: s.getEval},
		{method: "GET", path: "/healthz", public: true, handler: s.healthz},
		{method: "GET", path: "/metrics", handler: s.serveMetrics},
		{method: "GET", path: "/openapi.json", public: true, handler: s.openAPI},
		{method: "GET", path: "/{$}", public: true, viewer: true, handler: s.viewerPage},
		{method: "GET", path: "/sessions/{id}", public: true, viewer: true, handler: s.viewerPage},
		{method: "GET", path: "/runs", public: true, viewer: true, handler: s.viewerPage},
		{method: "GET", path: "/runs/{run}", public: true, viewer: true, handler: s.viewerPage},
		{method: "GET", path: "/evals", public: true, viewer: true, handler: s.viewerPage},
		{method: "GET", path: "/evals/{run}", public: true, viewer: true, handler: s.viewerPage},
		{method: "GET", path: "/assets/{file}", public: true, handler: s.viewerAsset},
	}
}

// routes registers the route table on a new mux.
func (s *Server) routes() {
	s.mux = http.NewServeMux()
	for _, rt := range s.routeTable() {
		pattern := rt.method + " " + rt.path
		s.mux.Handle(pattern, s.wrap(pattern, rt))
	}
}

// ServeHTTP serves a request: a routed one through its handler, an
// unknown path (404) or method (405) with a JSON error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path values
		return
	}
	// Let the mux decide between 404, 405 and a redirect (cleaned paths),
	// then answer in JSON.
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	start := time.Now()
	switch rec.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeAPIError(w, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
	case http.StatusNotFound:
		writeAPIError(w, errorf(http.StatusNotFound, "not_found", "no such endpoint: %s %s", r.Method, r.URL.Path))
	default:
		// A redirect to the cleaned path: pass it on as is.
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
	}
	s.metrics.request("unmatched", rec.status, time.Since(start))
}

// statusRecorder captures the status and headers a handler writes.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// wrap adds to a route's handler: the body limit, authentication, panic
// recovery, error responses and the request metric.
func (s *Server) wrap(pattern string, rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panic", "route", pattern, "panic", p, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeAPIError(sw, errorf(http.StatusInternalServerError, "internal", "internal error"))
				}
			}
			s.metrics.request(pattern, sw.code(), time.Since(start))
		}()
		if r.Body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		}
		if rt.viewer && r.URL.Query().Has("token") {
			s.signIn(sw, r)
			return
		}
		if !rt.public {
			switch s.authorized(r) {
			case authNone:
				w.Header().Set("WWW-Authenticate", `Bearer realm="skein"`)
				writeAPIError(sw, errorf(http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token (send Authorization: Bearer TOKEN)"))
				return
			case authCookie:
				if e := checkSameOrigin(r); e != nil {
					writeAPIError(sw, e)
					return
				}
			}
		}
		if err := rt.handler(sw, r); err != nil {
			s.fail(sw, r, pattern, err)
		}
	})
}

// fail answers a request whose handler returned err: an apiError as
// itself, anything else as a 500 that does not show the error (which is
// logged).
func (s *Server) fail(w *statusWriter, r *http.Request, pattern string, err error) {
	if w.status != 0 {
		return // the response has begun (an SSE stream): nothing to add
	}
	var ae *apiError
	if errors.As(err, &ae) {
		writeAPIError(w, ae)
		return
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeAPIError(w, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "request body is larger than %d bytes", mbe.Limit))
		return
	}
	s.metrics.storeErrors.Inc()
	s.log.Error("request failed", "route", pattern, "method", r.Method, "path", r.URL.Path, "err", err)
	writeAPIError(w, errorf(http.StatusInternalServerError, "internal", "internal error"))
}

// statusWriter records the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (flushes and write deadlines of SSE streams).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
