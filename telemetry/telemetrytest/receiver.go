// Package telemetrytest is a loopback OTLP/HTTP trace receiver for tests:
// it decodes the binary protobuf ExportTraceServiceRequests an exporter
// posts to /v1/traces (Decode, a reader of the protobuf wire format
// checked against the OTLP project's own Go types in its test) and keeps
// the spans. It does not link the protobuf runtime, so that the CLI's
// tests, which check what the binary links, can use it.
package telemetrytest

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
)

// Span is one received span, flattened.
type Span struct {
	TraceID, SpanID, ParentID string // hex
	Name                      string
	Kind                      int            // SpanKind: 1 internal, 2 server, 3 client, ...
	Attrs                     map[string]any // string, int64, float64, bool or []any
	StatusError               bool
	StatusMessage             string
	Events                    []string // event names ("exception", ...)
	Resource                  map[string]any
	Scope                     string
	StartNano, EndNano        uint64
}

// Receiver is a running loopback OTLP/HTTP receiver.
type Receiver struct {
	*httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	headers  []http.Header
	errs     []error
}

// NewReceiver starts a receiver on a loopback port; Close stops it.
func NewReceiver() *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.fail(fmt.Errorf("unexpected request %s %s", req.Method, req.URL.Path))
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		r.fail(err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.fail(fmt.Errorf("content type %q, want application/x-protobuf", ct))
	}
	spans, err := Decode(data)
	if err != nil {
		r.fail(fmt.Errorf("decoding the request: %w", err))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.requests++
	r.headers = append(r.headers, req.Header.Clone())
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	// an empty ExportTraceServiceResponse: all accepted
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (r *Receiver) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// Spans returns the spans received so far, oldest start first.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]Span(nil), r.spans...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartNano < out[j].StartNano })
	return out
}

// Requests returns how many export requests arrived.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Headers returns the headers of every export request.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Err returns the first malformed request's error, or nil.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil
	}
	return r.errs[0]
}

// Tree renders spans as an indented tree of names, children in start
// order: one line per span, two spaces per level. Spans whose parent is
// not among them are roots.
func Tree(spans []Span) string {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	children := map[string][]Span{}
	var roots []Span
	for _, s := range spans {
		if s.ParentID == "" || !ids[s.ParentID] {
			roots = append(roots, s)
		} else {
			children[s.ParentID] = append(children[s.ParentID], s)
		}
	}
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + s.Name + "\n")
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, s := range roots {
		walk(s, 0)
	}
	return b.String()
}
