package eval

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Variant is one set of call defaults the task runs under.
type Variant struct {
	Name string `json:"name"`
	// Options are the variant's options as JSON values (for reports).
	Options map[string]any `json:"options"`
}

// Case is one case of the dataset, as reports name it.
type Case struct {
	Index int    // position in the dataset, from 0
	ID    string // its "id" value when it has one, else "#N" (N from 1)
}

// Label names the case in messages: "case 3 ('paris')" or "case 3".
func (c Case) Label() string {
	if c.ID == fmt.Sprintf("#%d", c.Index+1) {
		return fmt.Sprintf("case %d", c.Index+1)
	}
	return fmt.Sprintf("case %d ('%s')", c.Index+1, c.ID)
}

// Job is one run of the task: one case under one variant, one repeat.
type Job struct {
	Case    int // index into Suite.Cases
	Variant int // index into Suite.Variants
	Repeat  int // from 0
	// SessionID is the case's own session: the default session of every
	// model call the task makes.
	SessionID string
}

// PassMark is the least score that passes when a scorer returns a number.
const PassMark = 0.5

// Score is one scorer's verdict on one result.
type Score struct {
	Value  float64 `json:"score"`
	Pass   bool    `json:"pass"`
	Reason string  `json:"reason,omitempty"`
}

// CaseResult is what one job produced.
type CaseResult struct {
	Variant   string `json:"variant"`
	Case      string `json:"case"`
	CaseIndex int    `json:"case_index"`
	Repeat    int    `json:"repeat"`
	// SessionID is the case's session when the task used it ("" when it
	// made no model call on it).
	SessionID string `json:"session_id,omitempty"`
	Output    any    `json:"output"`
	// Error is the task's error: every scorer then scores 0 with it as
	// the reason.
	Error       string           `json:"error,omitempty"`
	Scores      map[string]Score `json:"scores"`
	LatencyMS   float64          `json:"latency_ms"`
	CostUSD     float64          `json:"cost_usd"`
	CostKnown   bool             `json:"cost_known"`
	Calls       int              `json:"calls"`        // model calls logged on the case's session
	CachedCalls int              `json:"cached_calls"` // of the provider requests, those the cache answered
}

// Suite is what an eval evaluates.
type Suite interface {
	// Cases returns the dataset's cases.
	Cases() []Case
	// Variants returns the variants (at least one).
	Variants() []Variant
	// Scorers returns the scorer names, in report order.
	Scorers() []string
	// Run runs one job: the task, then every scorer. A task that fails
	// is a result (CaseResult.Error), not an error; an error (a scorer
	// that fails or returns something that is not a score, cancellation)
	// stops the eval.
	Run(ctx context.Context, job Job) (*CaseResult, error)
}

// Options configure Run.
type Options struct {
	ID       string // the run's id (required)
	Name     string // what is evaluated: runs of one name are compared
	File     string // the eval file, for reports
	Repeat   int    // runs of each case under each variant (0: 1)
	Parallel int    // jobs at once (0: DefaultParallel)
	// Progress, if set, is called after each job (from one goroutine at a
	// time).
	Progress func(Progress)
	Clock    func() time.Time // nil: time.Now
}

// DefaultParallel is how many jobs run at once by default.
const DefaultParallel = 4

// Progress is how far a run is.
type Progress struct {
	Done, Total    int
	Passed, Scored int // scores that passed, of all scores so far
	CostUSD        float64
}

// SessionID is the session of a job of run id: "<id>-v<V>-c<C>-r<R>",
// all from 1.
func SessionID(id string, variant, caseIndex, repeat int) string {
	return fmt.Sprintf("%s-v%d-c%d-r%d", id, variant+1, caseIndex+1, repeat+1)
}

// Run runs every case × variant × repeat of s, Options.Parallel at a
// time, and returns the run's record with its matrix. The first error
// stops the run: jobs not started are not, and the error names the job.
func Run(ctx context.Context, s Suite, o Options) (*Record, error) {
	if o.Repeat <= 0 {
		o.Repeat = 1
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	cases, variants := s.Cases(), s.Variants()
	if len(cases) == 0 {
		return nil, errors.New("the dataset has no cases")
	}
	if len(variants) == 0 {
		return nil, errors.New("no variants")
	}
	jobs := make([]Job, 0, len(cases)*len(variants)*o.Repeat)
	for v := range variants {
		for r := 0; r < o.Repeat; r++ {
			for c := range cases {
				jobs = append(jobs, Job{Case: c, Variant: v, Repeat: r, SessionID: SessionID(o.ID, v, c, r)})
			}
		}
	}
	rec := &Record{ID: o.ID, Name: o.Name, File: o.File, Started: clock().UTC(), Variants: variants, Scorers: s.Scorers(),
		Cases: len(cases), Repeat: o.Repeat, Parallel: o.Parallel}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]*CaseResult, len(jobs))
	var (
		mu       sync.Mutex
		firstErr error
		prog     = Progress{Total: len(jobs)}
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(o.Parallel, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				job := jobs[i]
				res, err := s.Run(ctx, job)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("%s, variant '%s', repeat %d: %w", cases[job.Case].Label(), variants[job.Variant].Name, job.Repeat+1, err)
						cancel()
					}
					mu.Unlock()
					continue
				}
				res.Variant, res.Case, res.CaseIndex, res.Repeat = variants[job.Variant].Name, cases[job.Case].ID, job.Case, job.Repeat
				results[i] = res
				prog.Done++
				prog.CostUSD += res.CostUSD
				for _, sc := range res.Scores {
					prog.Scored++
					if sc.Pass {
						prog.Passed++
					}
				}
				if o.Progress != nil {
					o.Progress(prog)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec.Results = make([]CaseResult, len(results))
	for i, r := range results {
		rec.Results[i] = *r
	}
	sort.SliceStable(rec.Results, func(i, j int) bool {
		a, b := &rec.Results[i], &rec.Results[j]
		if a.Variant != b.Variant {
			return variantIndex(variants, a.Variant) < variantIndex(variants, b.Variant)
		}
		if a.CaseIndex != b.CaseIndex {
			return a.CaseIndex < b.CaseIndex
		}
		return a.Repeat < b.Repeat
	})
	rec.Duration = clock().Sub(rec.Started)
	rec.Matrix = matrix(rec)
	return rec, nil
}

func variantIndex(vs []Variant, name string) int {
	for i, v := range vs {
		if v.Name == name {
			return i
		}
	}
	return len(vs)
}
