package serve

import (
	"bytes"
	"compress/gzip"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The server writes GET /metrics in the Prometheus text exposition format
// (version 0.0.4) itself rather than through
// github.com/prometheus/client_golang: that library and what it pulls in
// (procfs, protobuf, the default registry's collectors) did their set-up
// in package initialisation, which every skein command paid at start
// (about a quarter of `skein run`'s start-up time) although only
// `skein serve` exports metrics. The names, types, labels and help texts
// are the ones that library produced (TestMetricsFamilies checks them
// against its output).

// metricsContentType is the Content-Type of the text format, as
// client_golang's handler sent it for a client that asks for nothing
// else.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// family is one metric family: its name, help text, type ("counter",
// "gauge", "histogram" or "summary"), label names and series.
type family struct {
	name, help, typ string
	labels          []string  // label names, in the order their values are given
	buckets         []float64 // a histogram's upper bounds, ascending, +Inf left out

	mu     sync.Mutex
	series map[string]*series // by label values joined with 0xff
}

// series is the value of one family for one set of label values.
type series struct {
	f         *family
	values    []string  // label values, in the order of f.labels
	value     float64   // a counter's or a gauge's value
	counts    []uint64  // a histogram's observations per bucket (not cumulative), +Inf last
	quantiles []float64 // a summary's values at summaryQuantiles
	sum       float64   // a histogram's or a summary's sum
	count     uint64    // a histogram's or a summary's count
}

// summaryQuantiles are the quantiles a summary reports.
var summaryQuantiles = []float64{0, 0.25, 0.5, 0.75, 1}

// newFamily returns a family of type typ. One without labels has its one
// series from the start (it is written as 0 until it changes); one with
// labels is written once a series has been used.
func newFamily(typ, name, help string, labels ...string) *family {
	f := &family{name: name, help: help, typ: typ, labels: labels, series: map[string]*series{}}
	if len(labels) == 0 {
		f.WithLabelValues()
	}
	return f
}

// newHistogram returns a histogram family with the given bucket bounds.
func newHistogram(name, help string, buckets []float64, labels ...string) *family {
	f := &family{name: name, help: help, typ: "histogram", labels: labels, buckets: buckets, series: map[string]*series{}}
	if len(labels) == 0 {
		f.WithLabelValues()
	}
	return f
}

// defBuckets are client_golang's default histogram buckets (seconds).
var defBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// exponentialBuckets returns count bounds, the first start, each factor
// times the one before.
func exponentialBuckets(start, factor float64, count int) []float64 {
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// WithLabelValues returns the series for the given label values, one per
// label name, creating it on first use.
func (f *family) WithLabelValues(values ...string) *series {
	if len(values) != len(f.labels) {
		panic("metrics: " + f.name + ": " + strconv.Itoa(len(values)) + " label values for " + strconv.Itoa(len(f.labels)) + " labels")
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[key]
	if s == nil {
		s = &series{f: f, values: slices.Clone(values)}
		if f.typ == "histogram" {
			s.counts = make([]uint64, len(f.buckets)+1)
		}
		f.series[key] = s
	}
	return s
}

// Inc adds 1 to the series of a family without labels.
func (f *family) Inc() { f.WithLabelValues().Add(1) }

// Dec subtracts 1 from the series of a family without labels.
func (f *family) Dec() { f.WithLabelValues().Add(-1) }

// Set sets the series of a family without labels.
func (f *family) Set(v float64) { f.WithLabelValues().Set(v) }

// Observe records v in the series of a histogram without labels.
func (f *family) Observe(v float64) { f.WithLabelValues().Observe(v) }

// Inc adds 1.
func (s *series) Inc() { s.Add(1) }

// Add adds v.
func (s *series) Add(v float64) {
	s.f.mu.Lock()
	s.value += v
	s.f.mu.Unlock()
}

// Set sets the value to v.
func (s *series) Set(v float64) {
	s.f.mu.Lock()
	s.value = v
	s.f.mu.Unlock()
}

// Observe records v in a histogram: the first bucket whose bound is at
// least v counts it.
func (s *series) Observe(v float64) {
	i := sort.SearchFloat64s(s.f.buckets, v)
	s.f.mu.Lock()
	s.counts[i]++
	s.sum += v
	s.count++
	s.f.mu.Unlock()
}

// write appends the family in the text format: nothing if it has no
// series, else its HELP and TYPE lines and its samples, the series
// ordered by their label values taken in the order of the label names.
func (f *family) write(b *bytes.Buffer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.series) == 0 {
		return
	}
	order := make([]int, len(f.labels)) // label indexes by name
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return f.labels[order[i]] < f.labels[order[j]] })
	all := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool {
		for _, k := range order {
			if a, b := all[i].values[k], all[j].values[k]; a != b {
				return a < b
			}
		}
		return false
	})
	b.WriteString("# HELP ")
	b.WriteString(f.name)
	b.WriteByte(' ')
	writeEscaped(b, f.help, false)
	b.WriteString("\n# TYPE ")
	b.WriteString(f.name)
	b.WriteByte(' ')
	b.WriteString(f.typ)
	b.WriteByte('\n')
	for _, s := range all {
		switch f.typ {
		case "histogram":
			var cum uint64
			for i, n := range s.counts {
				cum += n
				le := math.Inf(1)
				if i < len(f.buckets) {
					le = f.buckets[i]
				}
				f.writeSample(b, "_bucket", s, order, "le", le, nil, cum)
			}
			f.writeSample(b, "_sum", s, order, "", 0, &s.sum, 0)
			f.writeSample(b, "_count", s, order, "", 0, nil, s.count)
		case "summary":
			for i, q := range summaryQuantiles {
				f.writeSample(b, "", s, order, "quantile", q, &s.quantiles[i], 0)
			}
			f.writeSample(b, "_sum", s, order, "", 0, &s.sum, 0)
			f.writeSample(b, "_count", s, order, "", 0, nil, s.count)
		default:
			f.writeSample(b, "", s, order, "", 0, &s.value, 0)
		}
	}
}

// writeSample writes one line: the name with suffix, the series' labels
// (and extra="extraValue" when extra is set), then v, or n when v is nil.
func (f *family) writeSample(b *bytes.Buffer, suffix string, s *series, order []int, extra string, extraValue float64, v *float64, n uint64) {
	b.WriteString(f.name)
	b.WriteString(suffix)
	if len(order) > 0 || extra != "" {
		b.WriteByte('{')
		for i, k := range order {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f.labels[k])
			b.WriteString(`="`)
			writeEscaped(b, s.values[k], true)
			b.WriteByte('"')
		}
		if extra != "" {
			if len(order) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(extra)
			b.WriteString(`="`)
			writeFloat(b, extraValue)
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	if v != nil {
		writeFloat(b, *v)
	} else {
		b.Write(strconv.AppendUint(b.AvailableBuffer(), n, 10))
	}
	b.WriteByte('\n')
}

// writeFloat writes f as the text format does: 'g' formatting with the
// fewest digits that read back exactly, and +Inf, -Inf, NaN.
func writeFloat(b *bytes.Buffer, f float64) {
	switch {
	case math.IsNaN(f):
		b.WriteString("NaN")
	case math.IsInf(f, 1):
		b.WriteString("+Inf")
	case math.IsInf(f, -1):
		b.WriteString("-Inf")
	default:
		b.Write(strconv.AppendFloat(b.AvailableBuffer(), f, 'g', -1, 64))
	}
}

// writeEscaped writes v with backslash and newline escaped, and the
// double quote too in a label value.
func writeEscaped(b *bytes.Buffer, v string, quote bool) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// serveExposition writes the families, sorted by name, to w: gzipped when
// the request accepts gzip, only the families named by name[] parameters
// when there are any (as client_golang's handler did).
func serveExposition(w http.ResponseWriter, r *http.Request, families []*family) {
	sort.Slice(families, func(i, j int) bool { return families[i].name < families[j].name })
	var only map[string]bool
	if r.URL != nil {
		if names := r.URL.Query()["name[]"]; len(names) > 0 {
			only = map[string]bool{}
			for _, n := range names {
				only[n] = true
			}
		}
	}
	var body bytes.Buffer
	for _, f := range families {
		if only == nil || only[f.name] {
			f.write(&body)
		}
	}
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Type", metricsContentType)
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Write(body.Bytes())
		return
	}
	h.Set("Content-Encoding", "gzip")
	gz := gzip.NewWriter(w)
	gz.Write(body.Bytes())
	gz.Close()
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip (or *)
// with a quality above 0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		if v, err := strconv.ParseFloat(q, 64); err == nil && v > 0 {
			return true
		}
	}
	return false
}
