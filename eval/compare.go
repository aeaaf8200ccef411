package eval

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// RegressionDrop is how far a cell's mean score must fall below the
// baseline's for the cell to be flagged as a regression.
const RegressionDrop = 0.05

// Comparison is a run compared with a baseline run of the same eval.
type Comparison struct {
	Baseline string  `json:"baseline"` // the baseline run's id
	Deltas   []Delta `json:"deltas"`
	// Regressions counts the deltas flagged as regressions.
	Regressions int `json:"regressions"`
	// NewlyFailing lists the scores that passed in the baseline and fail
	// now: "variant / case / scorer" (repeat 1 of each).
	NewlyFailing []string `json:"newly_failing,omitempty"`
}

// Delta is one matrix cell against the baseline's.
type Delta struct {
	Variant    string  `json:"variant"`
	Scorer     string  `json:"scorer"`
	Before     float64 `json:"before"`
	After      float64 `json:"after"`
	Mean       float64 `json:"delta_mean"`      // After - Before
	PassRate   float64 `json:"delta_pass_rate"` // of the pass rates
	Regression bool    `json:"regression"`      // the mean fell by more than RegressionDrop
}

// Compare compares run with base: a delta per cell the two share, and
// the scores that passed in base and fail in run.
func Compare(run, base *Record) *Comparison {
	c := &Comparison{Baseline: base.ID}
	for _, cell := range run.Matrix {
		b, ok := base.Cell(cell.Variant, cell.Scorer)
		if !ok {
			continue
		}
		d := Delta{Variant: cell.Variant, Scorer: cell.Scorer, Before: b.Mean, After: cell.Mean,
			Mean: cell.Mean - b.Mean, PassRate: cell.PassRate - b.PassRate}
		d.Regression = d.Mean < -RegressionDrop
		if d.Regression {
			c.Regressions++
		}
		c.Deltas = append(c.Deltas, d)
	}
	before := map[string]bool{}
	for i := range base.Results {
		r := &base.Results[i]
		for s, sc := range r.Scores {
			if r.Repeat == 0 && sc.Pass {
				before[r.Variant+"\x00"+r.Case+"\x00"+s] = true
			}
		}
	}
	for i := range run.Results {
		r := &run.Results[i]
		if r.Repeat != 0 {
			continue
		}
		for _, s := range run.Scorers {
			if sc, ok := r.Scores[s]; ok && !sc.Pass && before[r.Variant+"\x00"+r.Case+"\x00"+s] {
				c.NewlyFailing = append(c.NewlyFailing, fmt.Sprintf("%s / %s / %s", r.Variant, r.Case, s))
			}
		}
	}
	return c
}

// Threshold is a --fail-under bound: every variant's mean score of
// Scorer must be at least Min.
type Threshold struct {
	Scorer string
	Min    float64
}

// ParseThreshold reads "SCORER=X" with X in [0, 1]; SCORER may be
// written with its "score_" prefix or without.
func ParseThreshold(s string) (Threshold, error) {
	name, val, ok := strings.Cut(s, "=")
	name = strings.TrimPrefix(strings.TrimSpace(name), "score_")
	if !ok || name == "" {
		return Threshold{}, fmt.Errorf("got %q, want SCORER=X (a scorer's name and a number in [0, 1])", s)
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if err != nil || x < 0 || x > 1 {
		return Threshold{}, fmt.Errorf("%q: %q is not a number in [0, 1]", s, val)
	}
	return Threshold{Scorer: name, Min: x}, nil
}

// Missed returns a line per cell below its threshold: "score_exact under
// variant 'x': mean 0.40 < 0.80". A threshold naming no scorer of the run
// is an error.
func Missed(rec *Record, ts []Threshold) ([]string, error) {
	var out []string
	for _, t := range ts {
		found := false
		for _, c := range rec.Matrix {
			if c.Scorer != t.Scorer {
				continue
			}
			found = true
			if c.Mean < t.Min {
				out = append(out, fmt.Sprintf("%s under variant '%s': mean %.2f < %.2f", c.Scorer, c.Variant, c.Mean, t.Min))
			}
		}
		if !found {
			names := append([]string{}, rec.Scorers...)
			sort.Strings(names)
			return nil, fmt.Errorf("--fail-under: no scorer '%s' (scorers: %s)", t.Scorer, strings.Join(names, ", "))
		}
	}
	return out, nil
}
