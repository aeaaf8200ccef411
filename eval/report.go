package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// MaxFailuresShown bounds the failures WriteText lists (all are in the
// JSON and HTML reports).
const MaxFailuresShown = 50

// Failure is one score that did not pass.
type Failure struct {
	Variant, Case, Scorer, Reason, SessionID string
	Repeat                                   int
}

// Failures lists the scores that did not pass, in result order; a result
// whose task failed is one failure (Scorer "") with the task's error.
func (r *Record) Failures() []Failure {
	var out []Failure
	for i := range r.Results {
		res := &r.Results[i]
		if res.Error != "" {
			out = append(out, Failure{Variant: res.Variant, Case: res.Case, Reason: "the task failed: " + res.Error, SessionID: res.SessionID, Repeat: res.Repeat})
			continue
		}
		for _, s := range r.Scorers {
			sc, ok := res.Scores[s]
			if !ok || sc.Pass {
				continue
			}
			reason := sc.Reason
			if reason == "" {
				reason = fmt.Sprintf("score %s", formatScore(sc.Value))
			}
			out = append(out, Failure{Variant: res.Variant, Case: res.Case, Scorer: s, Reason: reason, SessionID: res.SessionID, Repeat: res.Repeat})
		}
	}
	return out
}

func formatScore(f float64) string { return fmt.Sprintf("%.2f", f) }

func formatCost(c Cell) string {
	if !c.CostKnown {
		return "?"
	}
	return fmt.Sprintf("$%.4f", c.CostUSD)
}

func formatMS(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// Summary is the report's first line.
func (r *Record) Summary() string {
	runs := r.Cases * len(r.Variants) * r.Repeat
	return fmt.Sprintf("eval %s: %d cases × %d variants × %d repeats = %d runs in %s (run %s)",
		r.Name, r.Cases, len(r.Variants), r.Repeat, runs, r.Duration.Round(time.Millisecond), r.ID)
}

// WriteText writes the report for a terminal: the summary, the matrix,
// the comparison with the baseline, and the failures with their reasons.
func WriteText(w io.Writer, r *Record) error {
	var b strings.Builder
	b.WriteString(r.Summary() + "\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tscorer\tmean\tpass\t95% CI\tcost\tp50\tp95\terrors")
	for _, c := range r.Matrix {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f%%\t%s-%s\t%s\t%s\t%s\t%d\n", c.Variant, c.Scorer, formatScore(c.Mean), 100*c.PassRate,
			formatScore(c.Low), formatScore(c.High), formatCost(c), formatMS(c.P50MS), formatMS(c.P95MS), c.Errors)
	}
	tw.Flush()
	if cmp := r.Comparison; cmp != nil {
		fmt.Fprintf(&b, "\ncompared with run %s:\n", cmp.Baseline)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "variant\tscorer\tbefore\tafter\tdelta\t")
		for _, d := range cmp.Deltas {
			flag := ""
			if d.Regression {
				flag = "REGRESSION"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%+.2f\t%s\n", d.Variant, d.Scorer, formatScore(d.Before), formatScore(d.After), d.Mean, flag)
		}
		tw.Flush()
		switch cmp.Regressions {
		case 0:
			b.WriteString("no regression\n")
		case 1:
			b.WriteString("1 regression\n")
		default:
			fmt.Fprintf(&b, "%d regressions\n", cmp.Regressions)
		}
		if n := len(cmp.NewlyFailing); n > 0 {
			fmt.Fprintf(&b, "newly failing (%d): %s\n", n, strings.Join(clipList(cmp.NewlyFailing, 20), "; "))
		}
	}
	fails := r.Failures()
	if len(fails) > 0 {
		fmt.Fprintf(&b, "\nfailures (%d):\n", len(fails))
		for i, f := range fails {
			if i == MaxFailuresShown {
				fmt.Fprintf(&b, "  ... and %d more (all are in --json and --html)\n", len(fails)-i)
				break
			}
			where := fmt.Sprintf("%s / %s / repeat %d", f.Variant, f.Case, f.Repeat+1)
			if f.Scorer != "" {
				where += " / " + f.Scorer
			}
			fmt.Fprintf(&b, "  %s: %s", where, oneLine(f.Reason))
			if f.SessionID != "" {
				fmt.Fprintf(&b, " (session %s)", f.SessionID)
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(append([]string{}, l[:n]...), fmt.Sprintf("... and %d more", len(l)-n))
}

// oneLine shortens a reason to one line of at most 200 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:197]) + "..."
	}
	return s
}

// WriteJSON writes the run record as indented JSON.
func WriteJSON(w io.Writer, r *Record) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// scorerNames returns the scorers of the matrix in order.
func (r *Record) scorerNames() []string {
	names := append([]string{}, r.Scorers...)
	if len(names) == 0 {
		seen := map[string]bool{}
		for _, c := range r.Matrix {
			if !seen[c.Scorer] {
				seen[c.Scorer] = true
				names = append(names, c.Scorer)
			}
		}
		sort.Strings(names)
	}
	return names
}
