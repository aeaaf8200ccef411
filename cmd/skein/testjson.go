package main

import (
	"encoding/json"
	"io"

	"github.com/skein-dev/skein/vm"
)

// jsonReport prints one JSON object per test (--json), one per line, in
// the order of the tests.
type jsonReport struct{ enc *json.Encoder }

var _ reporter = (*jsonReport)(nil)

func newJSONReport(w io.Writer) *jsonReport {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonReport{enc: enc}
}

// jsonResult is the JSON form of one test's result.
type jsonResult struct {
	File       string        `json:"file"`
	Test       string        `json:"test"` // "" for a file that could not be loaded
	Status     string        `json:"status"`
	DurationMS float64       `json:"duration_ms"`
	Assertions int           `json:"assertions"`
	Failures   []jsonFailure `json:"failures,omitempty"`
	Error      string        `json:"error,omitempty"`
	SkipReason string        `json:"skip_reason,omitempty"`
	Warning    string        `json:"warning,omitempty"`
	Output     string        `json:"output,omitempty"`
}

type jsonFailure struct {
	Pos       string `json:"pos"`
	Assertion string `json:"assertion"`
	Message   string `json:"message"`
}

func (r *jsonReport) result(res vm.TestResult) {
	j := jsonResult{
		File: res.File, Test: res.Name, Status: string(res.Status),
		DurationMS: float64(res.Duration.Microseconds()) / 1000, Assertions: res.Assertions,
		Error: res.Error, SkipReason: res.SkipReason, Output: res.Output,
	}
	for _, f := range res.Failures {
		j.Failures = append(j.Failures, jsonFailure{Pos: f.Pos, Assertion: f.Assertion, Message: f.Message})
	}
	if unasserted(res) {
		j.Warning = noAssertions
	}
	r.enc.Encode(j) // a failing stdout shows in the summary anyway
}

func (r *jsonReport) progress(done, total, failed int) {}

func (r *jsonReport) done() {}
