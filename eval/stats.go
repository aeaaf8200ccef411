package eval

import (
	"math"
	"sort"
)

// Cell is one cell of the matrix: a scorer's scores under one variant,
// with the variant's cost and latency.
type Cell struct {
	Variant  string  `json:"variant"`
	Scorer   string  `json:"scorer"`
	N        int     `json:"n"`         // scores (cases × repeats)
	Mean     float64 `json:"mean"`      // mean score
	PassRate float64 `json:"pass_rate"` // share of scores that passed
	// Low and High bound the 95% confidence interval of the mean (normal
	// approximation, clipped to [0, 1]).
	Low       float64 `json:"ci_low"`
	High      float64 `json:"ci_high"`
	Errors    int     `json:"errors"`   // results whose task failed
	CostUSD   float64 `json:"cost_usd"` // the variant's total
	CostKnown bool    `json:"cost_known"`
	P50MS     float64 `json:"p50_ms"` // the variant's task latency percentiles
	P95MS     float64 `json:"p95_ms"`
}

// matrix computes the cells of a run, variants then scorers in order.
func matrix(rec *Record) []Cell {
	var out []Cell
	for _, v := range rec.Variants {
		var lat []float64
		cost, known := 0.0, true
		errs := 0
		for i := range rec.Results {
			r := &rec.Results[i]
			if r.Variant != v.Name {
				continue
			}
			lat = append(lat, r.LatencyMS)
			cost += r.CostUSD
			known = known && r.CostKnown
			if r.Error != "" {
				errs++
			}
		}
		sort.Float64s(lat)
		for _, s := range rec.Scorers {
			var vals []float64
			passed := 0
			for i := range rec.Results {
				r := &rec.Results[i]
				if r.Variant != v.Name {
					continue
				}
				sc := r.Scores[s]
				vals = append(vals, sc.Value)
				if sc.Pass {
					passed++
				}
			}
			c := Cell{Variant: v.Name, Scorer: s, N: len(vals), Errors: errs, CostUSD: cost, CostKnown: known,
				P50MS: percentile(lat, 0.50), P95MS: percentile(lat, 0.95)}
			if len(vals) > 0 {
				c.Mean, c.Low, c.High = meanCI(vals)
				c.PassRate = float64(passed) / float64(len(vals))
			}
			out = append(out, c)
		}
	}
	return out
}

// meanCI returns the mean of vals and its 95% interval: mean ± 1.96
// standard errors (sample standard deviation), clipped to [0, 1].
func meanCI(vals []float64) (mean, low, high float64) {
	n := float64(len(vals))
	for _, v := range vals {
		mean += v
	}
	mean /= n
	if len(vals) < 2 {
		return mean, mean, mean
	}
	ss := 0.0
	for _, v := range vals {
		ss += (v - mean) * (v - mean)
	}
	half := 1.96 * math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	return mean, math.Max(0, mean-half), math.Min(1, mean+half)
}

// percentile is the nearest-rank percentile p (0..1] of sorted values (0
// for none).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}
