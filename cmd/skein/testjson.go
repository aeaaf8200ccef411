package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/skein-dev/skein/vm"
)

// The --json report: the event stream `go test -json` writes (the
// test2json format, `go doc cmd/test2json`), so that the tools that read
// Go's (gotestsum, IDEs, CI annotators) read skein's. A test file is a
// package, named by its path as the text report shows it; a test
// function is a test. Each file gets a "start" event; each test "run",
// "output" events (the "=== RUN" line, what it printed, its failures or
// traceback, the "--- PASS:" line) and "pass", "fail" or "skip" with its
// Elapsed seconds; then the file "output" events ("PASS" or "FAIL", "ok
// <file> 0.012s") and its "pass" or "fail". A file that cannot be loaded
// is a package that fails with the error as its output.

// testEvent is one event of the stream, with test2json's field names
// and order.
type testEvent struct {
	Time    time.Time
	Action  string
	Package string   `json:",omitempty"`
	Test    string   `json:",omitempty"`
	Elapsed *float64 `json:",omitempty"`
	Output  string   `json:",omitempty"`
}

// jsonReport writes the event stream of a run, in test order.
type jsonReport struct {
	enc *json.Encoder
	now func() time.Time
}

var _ reporter = (*jsonReport)(nil)

func newJSONReport(w io.Writer) *jsonReport {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonReport{enc: enc, now: time.Now}
}

// emit writes one event, at time t (now when zero).
func (r *jsonReport) emit(t time.Time, action, pkg, test string, elapsed *float64, output string) {
	if t.IsZero() {
		t = r.now()
	}
	r.enc.Encode(testEvent{Time: t, Action: action, Package: pkg, Test: test, Elapsed: elapsed, Output: output}) // a failing stdout shows in the exit code anyway
}

// lines emits text as output events, one per line, each indented by
// indent.
func (r *jsonReport) lines(t time.Time, pkg, test, indent, text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		r.emit(t, "output", pkg, test, nil, indent+line+"\n")
	}
}

func (r *jsonReport) fileStart(path string, started time.Time) {
	r.emit(started, "start", path, "", nil, "")
}

func (r *jsonReport) result(res vm.TestResult) {
	if res.Name == "" { // a file that could not be loaded
		r.lines(time.Time{}, res.File, "", "", res.Error)
		return
	}
	end := res.Started.Add(res.Duration)
	r.emit(res.Started, "run", res.File, res.Name, nil, "")
	r.emit(res.Started, "output", res.File, res.Name, nil, "=== RUN   "+res.Name+"\n")
	r.lines(end, res.File, res.Name, "", res.Output)
	action, status := "pass", "PASS"
	switch res.Status {
	case vm.TestFail:
		action, status = "fail", "FAIL"
		for _, f := range res.Failures {
			r.lines(end, res.File, res.Name, "    ", f.String())
		}
	case vm.TestError:
		action, status = "fail", "FAIL"
		r.lines(end, res.File, res.Name, "    ", res.Error)
	case vm.TestSkip:
		action, status = "skip", "SKIP"
		r.lines(end, res.File, res.Name, "    ", res.SkipReason)
	}
	if unasserted(res) {
		r.lines(end, res.File, res.Name, "    ", "WARN: "+noAssertions)
	}
	elapsed := roundSeconds(res.Duration, 2) // as go test prints it: (0.00s)
	r.emit(end, "output", res.File, res.Name, nil, fmt.Sprintf("--- %s: %s (%.2fs)\n", status, res.Name, elapsed))
	r.emit(end, action, res.File, res.Name, &elapsed, "")
}

func (r *jsonReport) fileDone(f fileOutcome) {
	elapsed := roundSeconds(f.elapsed, 3)
	switch {
	case f.loadErr:
		r.emit(time.Time{}, "output", f.path, "", nil, fmt.Sprintf("FAIL\t%s [load failed]\n", f.path))
		r.emit(time.Time{}, "fail", f.path, "", &elapsed, "")
	case f.failed:
		r.emit(time.Time{}, "output", f.path, "", nil, "FAIL\n")
		r.emit(time.Time{}, "output", f.path, "", nil, fmt.Sprintf("FAIL\t%s\t%.3fs\n", f.path, elapsed))
		r.emit(time.Time{}, "fail", f.path, "", &elapsed, "")
	default:
		r.emit(time.Time{}, "output", f.path, "", nil, "PASS\n")
		r.emit(time.Time{}, "output", f.path, "", nil, fmt.Sprintf("ok  \t%s\t%.3fs\n", f.path, elapsed))
		r.emit(time.Time{}, "pass", f.path, "", &elapsed, "")
	}
}

func (r *jsonReport) progress(done, total, failed int) {}

func (r *jsonReport) done() {}

// roundSeconds is d in seconds rounded to digits decimals.
func roundSeconds(d time.Duration, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(d.Seconds()*p) / p
}
