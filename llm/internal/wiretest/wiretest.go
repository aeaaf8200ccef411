// Package wiretest is the test kit of the HTTP provider clients: a
// loopback server that answers with scripted replies and records the
// requests it gets, golden-file comparison of request bodies, and the
// conformance suite every wire protocol's client runs (Run): each client
// gives a small adapter (Protocol) with fixture replies in its protocol's
// real wire format, and gets every shared case (plain, streamed, tool
// calls, parallel calls, the thinking round trip, every error category
// with retry-after, cancellation, timeouts, the key kept out of errors).
// It also checks and benchmarks request building from llm.WireCache. It
// is imported by tests only.
package wiretest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Reply is one scripted answer of the Server.
type Reply struct {
	Status int // 0: 200
	Header map[string]string
	Body   string
	// Hold keeps the response open after Body is written and flushed, until
	// the client goes away or the test ends: a stream that stalls.
	Hold bool
	// EchoHeaders appends the request's headers to Body, as a broken
	// server or proxy might in an error page.
	EchoHeaders bool
}

// SSE is a 200 reply carrying an event stream.
func SSE(body string) Reply {
	return Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body}
}

// JSON is a reply with a JSON body.
func JSON(status int, body string) Reply {
	return Reply{Status: status, Header: map[string]string{"Content-Type": "application/json"}, Body: body}
}

// Request is a request the Server received.
type Request struct {
	Method string
	Path   string
	URL    string // the path and query as sent
	Header http.Header
	Body   []byte
}

// Server is a loopback HTTP server answering each request with the next
// scripted reply.
type Server struct {
	*httptest.Server
	t        testing.TB
	done     chan struct{}
	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// NewServer starts a server that answers with replies in order; a request
// beyond them fails the test. The server stops when the test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	s := &Server{t: t, done: make(chan struct{}), replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.done) }) // runs first: releases held replies
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, URL: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		s.t.Errorf("unexpected request %d to %s", len(s.requests), r.URL.Path)
		http.Error(w, "no scripted reply", http.StatusTeapot)
		return
	}
	rep := s.replies[0]
	s.replies = s.replies[1:]
	s.mu.Unlock()

	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	io.WriteString(w, rep.Body)
	if rep.EchoHeaders {
		r.Header.Write(w)
	}
	if rep.Hold {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Read returns the content of a file, failing the test if it cannot.
func Read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Golden compares a JSON document with the golden file at path, both in a
// canonical form (sorted keys, indented), so that the file can be written
// by hand. With -update it rewrites the file instead.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	canon := func(b []byte) []byte {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out, _ := json.MarshalIndent(v, "", "  ")
		return append(out, '\n')
	}
	g := canon(got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, g, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := canon([]byte(Read(t, path)))
	if !bytes.Equal(g, want) {
		t.Errorf("request body differs from %s (run with -update to rewrite)\ngot:\n%s\nwant:\n%s", path, g, want)
	}
}

// With returns r with one more response header.
func (r Reply) With(key, value string) Reply {
	h := map[string]string{key: value}
	for k, v := range r.Header {
		h[k] = v
	}
	r.Header = h
	return r
}

// NoJitter stands in for llm.RetryPolicy.Jitter: the waits are exact.
func NoJitter() float64 { return 0 }

// Sleeper stands in for llm.RetryPolicy.Sleep: it records the waits asked
// for and returns at once.
type Sleeper struct{ Waits []time.Duration }

// Sleep records d.
func (s *Sleeper) Sleep(_ context.Context, d time.Duration) error {
	s.Waits = append(s.Waits, d)
	return nil
}

// CheckScrubbed fails the test if err, printed in any of the usual ways,
// contains secret, or if it does not show the redaction marker (the
// server's answer must have carried the secret for the check to mean
// anything).
func CheckScrubbed(t testing.TB, err error, secret string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, secret) {
			t.Errorf("the key leaked: %s", s)
		}
	}
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("the key was not in the server's answer, so the check proves nothing: %v", err)
	}
}
