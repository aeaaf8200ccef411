package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// Record is one eval run: what ran, the matrix, every case's result and,
// when there was a run to compare with, the comparison.
type Record struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	File     string        `json:"file"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Variants []Variant     `json:"variants"`
	Scorers  []string      `json:"scorers"`
	Cases    int           `json:"cases"`
	Repeat   int           `json:"repeat"`
	Parallel int           `json:"parallel"`
	Matrix   []Cell        `json:"matrix"`
	// Comparison is the run compared with its baseline (nil: none).
	Comparison *Comparison `json:"comparison,omitempty"`
	// Results are the cases' results: variants, then cases, then repeats.
	Results []CaseResult `json:"results"`
}

// Cell returns the matrix cell of variant and scorer.
func (r *Record) Cell(variant, scorer string) (Cell, bool) {
	for _, c := range r.Matrix {
		if c.Variant == variant && c.Scorer == scorer {
			return c, true
		}
	}
	return Cell{}, false
}

// ErrNotEval is Load's error for a run record that is not an eval run.
var ErrNotEval = errors.New("not an eval run")

// runKind prefixes the workflow name of the run records that hold eval
// runs: "eval:<name>".
const runKind = "eval:"

// Save stores the run in the store's run records (the runs `skein runs`
// lists, as workflow "eval:<name>"): its header (everything but the
// results) and one step per case result.
func Save(ctx context.Context, store *sessions.Store, rec *Record) error {
	head := *rec
	head.Results = nil
	data, err := json.Marshal(&head)
	if err != nil {
		return err
	}
	steps := make([][]byte, len(rec.Results))
	for i := range rec.Results {
		if steps[i], err = json.Marshal(&rec.Results[i]); err != nil {
			return err
		}
	}
	end := rec.Started.Add(rec.Duration)
	return store.CreateRun(ctx, &sessions.RunRecord{ID: rec.ID, Workflow: runKind + rec.Name, Status: "completed",
		CreatedAt: rec.Started, UpdatedAt: end, Head: data, Steps: steps})
}

// Load reads the eval run id from the store.
func Load(ctx context.Context, store *sessions.Store, id string) (*Record, error) {
	rr, err := store.LoadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(rr.Workflow) < len(runKind) || rr.Workflow[:len(runKind)] != runKind {
		return nil, fmt.Errorf("run '%s' is a workflow run, %w", id, ErrNotEval)
	}
	rec, err := decodeHead(rr)
	if err != nil {
		return nil, err
	}
	rec.Results = make([]CaseResult, len(rr.Steps))
	for i, s := range rr.Steps {
		if err := json.Unmarshal(s, &rec.Results[i]); err != nil {
			return nil, fmt.Errorf("run '%s': result %d: %v", id, i+1, err)
		}
	}
	return rec, nil
}

// Previous returns the newest stored run of name other than except, or
// nil when there is none (or the store keeps no run records).
func Previous(ctx context.Context, store *sessions.Store, name, except string) (*Record, error) {
	runs, _, err := store.ListRuns(ctx, sessions.RunFilter{Workflow: runKind + name, Limit: 2})
	if errors.Is(err, sessions.ErrNoRuns) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if r.ID != except {
			return Load(ctx, store, r.ID)
		}
	}
	return nil, nil
}

// List returns the stored eval runs, newest first, without their
// results (Results is nil): those of name only when name is not "",
// offset runs skipped, at most limit (0: all), and how many there are in
// all. A store that keeps no run records has none.
func List(ctx context.Context, store *sessions.Store, name string, limit, offset int) ([]*Record, int, error) {
	f := sessions.RunFilter{}
	if name != "" {
		f.Workflow = runKind + name
	}
	runs, _, err := store.ListRuns(ctx, f)
	if errors.Is(err, sessions.ErrNoRuns) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var ids []string
	for _, r := range runs {
		if strings.HasPrefix(r.Workflow, runKind) {
			ids = append(ids, r.ID)
		}
	}
	total := len(ids)
	ids = ids[min(offset, total):]
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]*Record, 0, len(ids))
	for _, id := range ids {
		rr, err := store.LoadRun(ctx, id)
		if errors.Is(err, sessions.ErrRunNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, 0, err
		}
		rec, err := decodeHead(rr)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, rec)
	}
	return out, total, nil
}

// decodeHead reads an eval run record's header: the run without its
// results.
func decodeHead(rr *sessions.RunRecord) (*Record, error) {
	rec := &Record{}
	if err := json.Unmarshal(rr.Head, rec); err != nil {
		return nil, fmt.Errorf("run '%s': %v", rr.ID, err)
	}
	return rec, nil
}
