package serve

import (
	"errors"
	"net/http"

	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/sessions"
)

// Eval runs (ext): GET /api/evals lists the runs of `skein eval` kept in
// the store, GET /api/evals/{id} returns one with its matrix, the
// comparison with its baseline and every case's result (with the case's
// session).

type evalSummaryJSON struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	File        string   `json:"file"`
	StartedAt   string   `json:"startedAt"`
	DurationMs  int64    `json:"durationMs"`
	Cases       int      `json:"cases"`
	Repeat      int      `json:"repeat"`
	Variants    []string `json:"variants"`
	Scorers     []string `json:"scorers"`
	Runs        int      `json:"runs"`     // cases × variants × repeats
	Mean        float64  `json:"mean"`     // over every score of the run
	PassRate    float64  `json:"passRate"` // likewise
	Errors      int      `json:"errors"`   // results whose task failed
	CostUSD     float64  `json:"costUsd"`
	CostKnown   bool     `json:"costKnown"`
	Baseline    string   `json:"baseline"` // "" when compared with nothing
	Regressions int      `json:"regressions"`
}

type evalListJSON struct {
	Evals  []evalSummaryJSON `json:"evals"`
	Total  int               `json:"total"`
	Limit  int               `json:"limit"`
	Offset int               `json:"offset"`
}

type evalVariantJSON struct {
	Name    string         `json:"name"`
	Options map[string]any `json:"options"`
}

// evalCellJSON is a matrix cell; the delta fields hold only when
// hasBaseline.
type evalCellJSON struct {
	Variant       string  `json:"variant"`
	Scorer        string  `json:"scorer"`
	N             int     `json:"n"`
	Mean          float64 `json:"mean"`
	PassRate      float64 `json:"passRate"`
	CILow         float64 `json:"ciLow"`
	CIHigh        float64 `json:"ciHigh"`
	Errors        int     `json:"errors"`
	CostUSD       float64 `json:"costUsd"`
	CostKnown     bool    `json:"costKnown"`
	P50Ms         float64 `json:"p50Ms"`
	P95Ms         float64 `json:"p95Ms"`
	HasBaseline   bool    `json:"hasBaseline"`
	BaselineMean  float64 `json:"baselineMean"`
	DeltaMean     float64 `json:"deltaMean"`
	DeltaPassRate float64 `json:"deltaPassRate"`
	Regression    bool    `json:"regression"`
}

type evalScoreJSON struct {
	Scorer string  `json:"scorer"`
	Score  float64 `json:"score"`
	Pass   bool    `json:"pass"`
	Reason string  `json:"reason"`
}

type evalResultJSON struct {
	Variant     string          `json:"variant"`
	Case        string          `json:"case"`
	CaseIndex   int             `json:"caseIndex"`
	Repeat      int             `json:"repeat"`
	SessionID   string          `json:"sessionId"`
	Output      any             `json:"output"`
	Error       string          `json:"error"`
	Pass        bool            `json:"pass"` // every score passed
	Scores      []evalScoreJSON `json:"scores"`
	LatencyMs   float64         `json:"latencyMs"`
	CostUSD     float64         `json:"costUsd"`
	CostKnown   bool            `json:"costKnown"`
	Calls       int             `json:"calls"`
	CachedCalls int             `json:"cachedCalls"`
}

type evalJSON struct {
	evalSummaryJSON
	Parallel     int               `json:"parallel"`
	VariantList  []evalVariantJSON `json:"variantList"`
	Matrix       []evalCellJSON    `json:"matrix"`
	NewlyFailing []string          `json:"newlyFailing"`
	Results      []evalResultJSON  `json:"results"`
}

// evalSummary is the part of rec the list shows.
func evalSummary(rec *eval.Record) evalSummaryJSON {
	out := evalSummaryJSON{ID: rec.ID, Name: rec.Name, File: rec.File, StartedAt: formatTime(rec.Started),
		DurationMs: rec.Duration.Milliseconds(), Cases: rec.Cases, Repeat: rec.Repeat,
		Variants: make([]string, len(rec.Variants)), Scorers: append([]string{}, rec.Scorers...),
		Runs: rec.Cases * len(rec.Variants) * rec.Repeat, CostKnown: true}
	for i, v := range rec.Variants {
		out.Variants[i] = v.Name
	}
	n, mean, pass := 0, 0.0, 0.0
	costs := map[string]bool{} // a cell holds its variant's cost and errors
	for _, c := range rec.Matrix {
		n += c.N
		mean += c.Mean * float64(c.N)
		pass += c.PassRate * float64(c.N)
		if !costs[c.Variant] {
			costs[c.Variant] = true
			out.Errors += c.Errors
			out.CostUSD += c.CostUSD
			out.CostKnown = out.CostKnown && c.CostKnown
		}
	}
	if n > 0 {
		out.Mean, out.PassRate = mean/float64(n), pass/float64(n)
	}
	if rec.Comparison != nil {
		out.Baseline, out.Regressions = rec.Comparison.Baseline, rec.Comparison.Regressions
	}
	return out
}

// listEvals handles GET /api/evals?name=&limit=&offset=.
func (s *Server) listEvals(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	list, total, err := eval.List(r.Context(), s.store, r.URL.Query().Get("name"), limit, offset)
	if err != nil {
		return err
	}
	out := evalListJSON{Evals: make([]evalSummaryJSON, len(list)), Total: total, Limit: limit, Offset: offset}
	for i, rec := range list {
		out.Evals[i] = evalSummary(rec)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getEval handles GET /api/evals/{id}.
func (s *Server) getEval(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if e := checkID(id); e != nil {
		return e
	}
	rec, err := eval.Load(r.Context(), s.store, id)
	switch {
	case errors.Is(err, sessions.ErrRunNotFound), errors.Is(err, sessions.ErrNoRuns):
		return errorf(http.StatusNotFound, "not_found", "no eval run '%s'", truncate(id, 80))
	case errors.Is(err, eval.ErrNotEval):
		return errorf(http.StatusNotFound, "not_found", "run '%s' is a workflow run, not an eval run", truncate(id, 80))
	case err != nil:
		return err
	}
	out := evalJSON{evalSummaryJSON: evalSummary(rec), Parallel: rec.Parallel,
		VariantList: make([]evalVariantJSON, len(rec.Variants)), Matrix: make([]evalCellJSON, len(rec.Matrix)),
		NewlyFailing: []string{}, Results: make([]evalResultJSON, len(rec.Results))}
	for i, v := range rec.Variants {
		opts := v.Options
		if opts == nil {
			opts = map[string]any{}
		}
		out.VariantList[i] = evalVariantJSON{Name: v.Name, Options: opts}
	}
	deltas := map[[2]string]eval.Delta{}
	if rec.Comparison != nil {
		for _, d := range rec.Comparison.Deltas {
			deltas[[2]string{d.Variant, d.Scorer}] = d
		}
		out.NewlyFailing = append(out.NewlyFailing, rec.Comparison.NewlyFailing...)
	}
	for i, c := range rec.Matrix {
		cell := evalCellJSON{Variant: c.Variant, Scorer: c.Scorer, N: c.N, Mean: c.Mean, PassRate: c.PassRate,
			CILow: c.Low, CIHigh: c.High, Errors: c.Errors, CostUSD: c.CostUSD, CostKnown: c.CostKnown, P50Ms: c.P50MS, P95Ms: c.P95MS}
		if d, ok := deltas[[2]string{c.Variant, c.Scorer}]; ok {
			cell.HasBaseline, cell.BaselineMean, cell.DeltaMean, cell.DeltaPassRate, cell.Regression = true, d.Before, d.Mean, d.PassRate, d.Regression
		}
		out.Matrix[i] = cell
	}
	for i := range rec.Results {
		res := &rec.Results[i]
		o := evalResultJSON{Variant: res.Variant, Case: res.Case, CaseIndex: res.CaseIndex, Repeat: res.Repeat, SessionID: res.SessionID,
			Output: res.Output, Error: res.Error, Pass: res.Error == "", Scores: []evalScoreJSON{}, LatencyMs: res.LatencyMS,
			CostUSD: res.CostUSD, CostKnown: res.CostKnown, Calls: res.Calls, CachedCalls: res.CachedCalls}
		for _, name := range rec.Scorers {
			if sc, ok := res.Scores[name]; ok {
				o.Scores = append(o.Scores, evalScoreJSON{Scorer: name, Score: sc.Value, Pass: sc.Pass, Reason: sc.Reason})
				o.Pass = o.Pass && sc.Pass
			}
		}
		out.Results[i] = o
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
