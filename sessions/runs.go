package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
)

// Run records are what package workflow writes about each workflow run:
// a small header that changes as the run goes (status, the next node)
// and the list of stages it ran, which only grows. The store keeps them
// beside the sessions the stages used, so a run survives the process as
// its sessions do and a later process can resume it.
//
// The bodies are JSON documents owned by package workflow; a backend
// stores them as given.

// Errors of run records, tested with errors.Is.
var (
	ErrRunNotFound = errors.New("unknown run id")
	ErrRunExists   = errors.New("run already exists")
	// ErrNoRuns means the store's backend keeps no run records.
	ErrNoRuns = errors.New("this session store keeps no run records")
)

// RunRecord is one stored workflow run.
type RunRecord struct {
	ID          string
	Workflow    string // the graph's name
	Fingerprint string // the graph's fingerprint
	Status      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Head is the run's JSON header (task, vars, next node, error, ...).
	Head []byte
	// Steps are the JSON records of the stages run, oldest first.
	Steps [][]byte
}

// RunUpdate is one atomic write to a run record: the new status, time
// and header, and the steps to append.
type RunUpdate struct {
	Status    string
	UpdatedAt time.Time
	Head      []byte
	Steps     [][]byte
}

// RunSummary is one row of a run listing.
type RunSummary struct {
	ID          string
	Workflow    string
	Fingerprint string
	Status      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Steps       int
}

// RunFilter selects runs for RunBackend.ListRuns. Zero fields do not
// filter.
type RunFilter struct {
	Statuses []string
	Workflow string
	Limit    int // 0: no limit
	Offset   int
}

// RunBackend is implemented by backends that store run records. Every
// call is atomic, like the Backend's.
type RunBackend interface {
	// CreateRun stores a new run (ErrRunExists).
	CreateRun(ctx context.Context, rec *RunRecord) error
	// UpdateRun applies u to the run (ErrRunNotFound).
	UpdateRun(ctx context.Context, id string, u *RunUpdate) error
	// LoadRun returns the run with its steps (ErrRunNotFound).
	LoadRun(ctx context.Context, id string) (*RunRecord, error)
	// ListRuns returns the matching runs, newest first (CreatedAt, then
	// id, descending), and the number that match before Limit and Offset.
	ListRuns(ctx context.Context, f RunFilter) ([]RunSummary, int, error)
}

// RunWriteBackend is implemented by backends that write a session's
// changes and a run record's update in one transaction, as a workflow
// stage ends (its stage_end event and its step): Store.ApplyRun.
type RunWriteBackend interface {
	// WriteRun is Write that also applies u to the run runID, in the
	// same transaction: both are made or neither is. A missing run is
	// ErrRunNotFound.
	WriteRun(ctx context.Context, id string, base int64, runID string, u *RunUpdate, changes ...*Change) error
}

// runWrite is a run record's update that rides with a session's write.
type runWrite struct {
	id     string
	update *RunUpdate
}

// ApplyRun is Apply that also writes u to the run record runID: in the
// same commit when the backend can (RunWriteBackend), else right after
// the session's write. A workflow writes each stage's end so, the
// stage_end event in the stage's session and the step in the run's
// record.
func (s *Store) ApplyRun(ctx context.Context, id string, ch *Change, runID string, u *RunUpdate) ([]Event, error) {
	if _, err := s.runs(); err != nil {
		return nil, err
	}
	if _, ok := s.backend.(RunWriteBackend); !ok {
		events, err := s.Apply(ctx, id, ch)
		if err != nil {
			return nil, err
		}
		return events, s.UpdateRun(ctx, runID, u)
	}
	return s.write(ctx, id, ch, anyVersion, false, &runWrite{id: runID, update: u})
}

// writeBackend writes changes to session id at version base, and run's
// update with them if there is one (the backend is a RunWriteBackend).
func (s *Store) writeBackend(ctx context.Context, id string, base int64, run *runWrite, changes []*Change) error {
	if run == nil {
		return wrap(id, s.backend.Write(ctx, id, base, changes...))
	}
	err := s.backend.(RunWriteBackend).WriteRun(ctx, id, base, run.id, run.update, changes...)
	if errors.Is(err, ErrRunNotFound) {
		return wrapRun(run.id, err)
	}
	return wrap(id, err)
}

func (s *Store) runs() (RunBackend, error) {
	rb, ok := s.backend.(RunBackend)
	if !ok {
		return nil, ErrNoRuns
	}
	return rb, nil
}

// checkRunID refuses an empty run id or one with control characters
// (those CheckID refuses in a session id, C1 controls included).
func checkRunID(id string) error {
	if id == "" {
		return fmt.Errorf("a run id must not be empty")
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("run id %q contains a control character", id)
		}
	}
	return nil
}

func wrapRun(id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("run '%s': %w", id, err)
}

// CreateRun stores a new run record.
func (s *Store) CreateRun(ctx context.Context, rec *RunRecord) error {
	rb, err := s.runs()
	if err != nil {
		return err
	}
	if err := checkRunID(rec.ID); err != nil {
		return err
	}
	return wrapRun(rec.ID, rb.CreateRun(ctx, rec))
}

// UpdateRun writes u to the run record id.
func (s *Store) UpdateRun(ctx context.Context, id string, u *RunUpdate) error {
	rb, err := s.runs()
	if err != nil {
		return err
	}
	return wrapRun(id, rb.UpdateRun(ctx, id, u))
}

// LoadRun returns the run record id.
func (s *Store) LoadRun(ctx context.Context, id string) (*RunRecord, error) {
	rb, err := s.runs()
	if err != nil {
		return nil, err
	}
	rec, err := rb.LoadRun(ctx, id)
	return rec, wrapRun(id, err)
}

// ListRuns lists run records, newest first.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]RunSummary, int, error) {
	rb, err := s.runs()
	if err != nil {
		return nil, 0, err
	}
	return rb.ListRuns(ctx, f)
}
