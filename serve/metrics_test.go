package serve

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
)

// TestMetricsFamilies drives every family, scrapes /metrics and checks
// the output, values left out, line for line against
// testdata/metrics.golden: the output of github.com/prometheus/client_golang
// v1.25.0 (the library /metrics was written with before) for the same
// requests, so names, types, labels, help texts, bucket bounds and order
// are what that library wrote. It also parses the output with
// Prometheus's own text parser.
func TestMetricsFamilies(t *testing.T) {
	ts := newTestServer(t, Config{})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "hi"}), http.StatusAccepted, "")
	ts.waitIdle(id)
	ts.srv.metrics.observe(sessions.Event{Type: agent.EventLLMCall, Data: map[string]any{"input_tokens": int64(39), "output_tokens": int64(9)}})
	ts.do("GET", "/api/sessions/nope", nil)
	ts.do("GET", "/metrics", nil)
	r := ts.do("GET", "/metrics", nil)
	ts.expect(r, http.StatusOK, "")
	if ct := r.header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8; escaping=underscores" {
		t.Errorf("Content-Type %q", ct)
	}

	golden, err := os.ReadFile("testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	want := string(golden)
	if runtime.GOOS != "linux" { // the process_* families come from /proc
		want = regexp.MustCompile(`(?m)^(# \w+ )?process_.*\n`).ReplaceAllString(want, "")
	}
	got := regexp.MustCompile(`(?m)^([^#].*) \S+$`).ReplaceAllString(string(r.body), "$1")
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("line %d:\n got %s\nwant %s\n\nwhole output:\n%s", i+1, g, w, r.body)
			}
		}
	}

	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("Prometheus's parser: %v\n%s", err, r.body)
	}
	for name, wantValue := range map[string]float64{
		"skein_turns_running":    0,
		"skein_sessions_active":  1,
		"go_gc_gomemlimit_bytes": math.MaxInt64,
	} {
		f := families[name]
		if f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != wantValue {
			t.Errorf("%s: %v, want %v", name, f, wantValue)
		}
	}
	if tokens := families["skein_llm_tokens_total"]; tokens == nil || tokens.Metric[0].GetCounter().GetValue() != 39 {
		t.Errorf("skein_llm_tokens_total: %v", tokens)
	}
	h := families["skein_turn_duration_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.Bucket[len(h.Bucket)-1].GetCumulativeCount() != 1 {
		t.Errorf("skein_turn_duration_seconds: %v", h)
	}
	if g := families["go_goroutines"].GetMetric()[0].GetGauge().GetValue(); g < 2 {
		t.Errorf("go_goroutines %v", g)
	}
	if runtime.GOOS == "linux" {
		if v := families["process_resident_memory_bytes"].GetMetric()[0].GetGauge().GetValue(); v < 1<<20 {
			t.Errorf("process_resident_memory_bytes %v", v)
		}
		if v := families["process_open_fds"].GetMetric()[0].GetGauge().GetValue(); v < 3 {
			t.Errorf("process_open_fds %v", v)
		}
	}
}

// TestMetricsGzipAndFilter: a client that accepts gzip gets the body
// gzipped, and name[] parameters pick families, as with client_golang's
// handler.
func TestMetricsGzipAndFilter(t *testing.T) {
	ts := newTestServer(t, Config{})
	req, err := http.NewRequest("GET", ts.http.URL+"/metrics?name[]=skein_sse_clients&name[]=go_info", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	want := "# HELP go_info Information about the Go environment.\n# TYPE go_info gauge\ngo_info{version=\"" + runtime.Version() + "\"} 1\n" +
		"# HELP skein_sse_clients Connected Server-Sent Events clients.\n# TYPE skein_sse_clients gauge\nskein_sse_clients 0\n"
	if string(body) != want {
		t.Fatalf("got\n%s\nwant\n%s", body, want)
	}
}

// TestExpositionWriter checks the writer on what the server's own
// families do not show: escaping, ordering of series and float forms.
func TestExpositionWriter(t *testing.T) {
	f := newFamily("counter", "x_total", "Help with \\ and\nnewline.", "b", "a")
	f.WithLabelValues("q\"uote", "2").Add(1.5)
	f.WithLabelValues("back\\slash\nnl", "1").Add(1e-7)
	f.WithLabelValues("z", "1").Add(math.Inf(1))
	g := newFamily("gauge", "y", "Y.")
	g.Set(-1)
	h := newHistogram("h_seconds", "H.", []float64{0.1, 1})
	h.Observe(0.1)
	h.Observe(0.5)
	h.Observe(7)
	var b bytes.Buffer
	for _, fam := range []*family{f, g, h} {
		fam.write(&b)
	}
	want := `# HELP x_total Help with \\ and\nnewline.
# TYPE x_total counter
x_total{a="1",b="back\\slash\nnl"} 1e-07
x_total{a="1",b="z"} +Inf
x_total{a="2",b="q\"uote"} 1.5
# HELP y Y.
# TYPE y gauge
y -1
# HELP h_seconds H.
# TYPE h_seconds histogram
h_seconds_bucket{le="0.1"} 1
h_seconds_bucket{le="1"} 2
h_seconds_bucket{le="+Inf"} 3
h_seconds_sum 7.6
h_seconds_count 3
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]bool{"": false, "gzip": true, "deflate, gzip;q=0.5": true, "gzip;q=0": false, "br": false, "*": true, "GZIP ; q=1.0": true} {
		if acceptsGzip(header) != want {
			t.Errorf("acceptsGzip(%q) = %v", header, !want)
		}
	}
}

// TestGOGC: go_gc_gogc_percent reads GOGC as the runtime does.
func TestGOGC(t *testing.T) {
	for env, want := range map[string]int64{"": 100, "off": -1, "50": 50, "-5": -1, "x": 100} {
		t.Setenv("GOGC", env)
		if got := gogc(); got != want {
			t.Errorf("GOGC=%q: %d, want %d", env, got, want)
		}
	}
}
