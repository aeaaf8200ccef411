package telemetry

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpServer is a loopback OTLP/HTTP server counting the connections
// opened to it, the requests and the spans they decode to (with the
// OTLP project's Go types); it answers status (and text when not 200),
// after delay.
type otlpServer struct {
	*httptest.Server
	mu                     sync.Mutex
	conns, requests, spans int
	headers                []http.Header
	status                 int
	text                   string
	delay                  time.Duration
}

func newOTLPServer(t *testing.T, tlsOn bool) *otlpServer {
	s := &otlpServer{status: http.StatusOK}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := readExportBody(r)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil {
			t.Error(err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.requests++
		s.headers = append(s.headers, r.Header.Clone())
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				s.spans += len(ss.Spans)
			}
		}
		status, text, delay := s.status, s.text, s.delay
		s.mu.Unlock()
		time.Sleep(delay)
		if status != http.StatusOK {
			http.Error(w, text, status)
		}
	}))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	if tlsOn {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *otlpServer) counts() (conns, requests, spans int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.requests, s.spans
}

func (s *otlpServer) set(status int, text string, delay time.Duration) {
	s.mu.Lock()
	s.status, s.text, s.delay = status, text, delay
	s.mu.Unlock()
}

// testExporter is the exporter the OTEL_* variables configure.
func testExporter(t *testing.T) *otlpExporter {
	cfg, err := otlpConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	e := newOTLPExporter(cfg, resource.Empty())
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

// spanChunk is one ended span, encoded as an export's chunk.
func spanChunk(name string) []byte {
	d := &record{op: OpTool, name: name, kind: trace.SpanKindInternal, start: time.Now().UnixNano()}
	d.tid, d.sid, d.flags = newTraceID(), newSpanID(), trace.FlagsSampled
	d.end = d.start + int64(time.Millisecond)
	return appendSpanField(nil, d)
}

// TestOTLPConnection: exports share one connection; when the collector
// has closed it while idle, the export is sent again on a new one; a
// status other than 2xx is an error naming it and the answer's text;
// the configured headers are sent, and not in place of the exporter's.
func TestOTLPConnection(t *testing.T) {
	srv := newOTLPServer(t, false)
	clearEnv(t)
	t.Setenv(EnvTracesEndpoint, srv.URL+"/v1/traces?x=1")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=obs,content-type=text/plain")
	e := testExporter(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := e.ExportSpans(ctx, [][]byte{spanChunk("a"), spanChunk("b")}, 2); err != nil {
			t.Fatalf("export %d: %v", i, err)
		}
	}
	if conns, requests, spans := srv.counts(); conns != 1 || requests != 3 || spans != 6 {
		t.Fatalf("%d connections, %d requests, %d spans", conns, requests, spans)
	}
	srv.CloseClientConnections()
	if _, err := e.ExportSpans(ctx, [][]byte{spanChunk("c")}, 1); err != nil {
		t.Fatalf("export after the collector closed the connection: %v", err)
	}
	if conns, requests, spans := srv.counts(); conns != 2 || requests != 4 || spans != 7 {
		t.Fatalf("%d connections, %d requests, %d spans", conns, requests, spans)
	}
	srv.set(http.StatusServiceUnavailable, "try later\x00", 0)
	_, err := e.ExportSpans(ctx, [][]byte{spanChunk("d")}, 1)
	if err == nil || err.Error() != "otlp: exporting 1 spans: 503 Service Unavailable: try later" {
		t.Fatalf("error %v", err)
	}
	srv.set(http.StatusOK, "", 0)
	if _, err := e.ExportSpans(ctx, [][]byte{spanChunk("e")}, 1); err != nil {
		t.Fatal(err)
	}
	h := srv.headers[len(srv.headers)-1]
	if h.Get("X-Team") != "obs" || h.Get("Content-Type") != "application/x-protobuf" || h.Get("User-Agent") != "skein-otlp-exporter" {
		t.Errorf("headers %v", h)
	}
}

// TestOTLPTimeout: an export the collector does not answer within
// OTEL_EXPORTER_OTLP_TIMEOUT fails, and the next goes through.
func TestOTLPTimeout(t *testing.T) {
	srv := newOTLPServer(t, false)
	clearEnv(t)
	t.Setenv(EnvEndpoint, srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "100")
	e := testExporter(t)
	srv.set(http.StatusOK, "", time.Second)
	start := time.Now()
	if _, err := e.ExportSpans(context.Background(), [][]byte{spanChunk("a")}, 1); err == nil || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("error %v after %v", err, time.Since(start))
	}
	srv.set(http.StatusOK, "", 0)
	if _, err := e.ExportSpans(context.Background(), [][]byte{spanChunk("b")}, 1); err != nil {
		t.Fatal(err)
	}
}

// TestOTLPExportTLS: spans reach an https collector whose certificate
// OTEL_EXPORTER_OTLP_CERTIFICATE names, gzipped.
func TestOTLPExportTLS(t *testing.T) {
	srv := newOTLPServer(t, true)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	clearEnv(t)
	t.Setenv(EnvEndpoint, srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	for range 3 {
		_, s := Tool(ctx, "noop", "call_1")
		s.End(nil, "")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, requests, spans := srv.counts(); requests != 1 || spans != 3 {
		t.Fatalf("%d requests, %d spans", requests, spans)
	}
	if h := srv.headers[0]; h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers %v", h)
	}
	// without the certificate: refused
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", "")
	if _, err := testExporter(t).ExportSpans(context.Background(), [][]byte{spanChunk("a")}, 1); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error %v", err)
	}
}
