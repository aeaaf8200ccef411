package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
)

// Status is a run's status.
type Status string

// Run statuses. Only a completed run is final: a resumed run with any
// other status continues from its next node.
const (
	StatusRunning   Status = "running"   // started, not finished (or killed)
	StatusCompleted Status = "completed" // a node with no edge taken ended it
	StatusFailed    Status = "failed"    // a stage failed; Error says why
	StatusMaxSteps  Status = "max_steps" // the step limit stopped it
	StatusCancelled Status = "cancelled" // its context was cancelled
)

// Statuses lists the run statuses in sorted order.
var Statuses = []Status{StatusCancelled, StatusCompleted, StatusFailed, StatusMaxSteps, StatusRunning}

// Stage statuses besides an agent loop's (done, stuck, budget_exhausted,
// timeout).
const (
	StageDone      = "done"
	StageFailed    = "failed"
	StageCancelled = "cancelled"
)

// Usage is a stage's token usage.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Step is the record of one stage run.
type Step struct {
	Node      string `json:"node"`
	SessionID string `json:"session_id"`
	// Status is the stage's status: done, an agent loop's status, or
	// failed / cancelled for a stage that did not complete.
	Status     string         `json:"status"`
	Output     string         `json:"output"`
	Error      string         `json:"error,omitempty"`
	StartedAt  time.Time      `json:"started_at"`
	DurationMS int64          `json:"duration_ms"`
	Usage      Usage          `json:"usage"`
	Vars       map[string]any `json:"vars,omitempty"` // what the stage merged into the run's vars
}

// Completed reports whether the stage completed (its output counts).
func (s *Step) Completed() bool { return s.Status != StageFailed && s.Status != StageCancelled }

// Run is a workflow run: its record in the store and Execute's result.
type Run struct {
	ID          string
	Workflow    string
	Fingerprint string
	Task        string
	Status      Status
	// Vars are the run's variables: the initial ones with every fn
	// stage's additions merged in.
	Vars map[string]any
	// Outputs maps each node that completed to its last output.
	Outputs map[string]string
	// Output is the last completed stage's output.
	Output string
	// Error is why the run failed ("" otherwise).
	Error string
	// Next is the node to run next ("" when the run is completed).
	Next      string
	Steps     []Step
	CreatedAt time.Time
	UpdatedAt time.Time

	initialVars map[string]any
	headPrefix  []byte // the encoded task and initial vars (head)
	saved       int    // the steps the stored record has
	visits      map[string]int
	completed   int // completed steps
}

// head is the stored header of a run: what cannot be rebuilt from its
// steps.
type head struct {
	Task   string         `json:"task"`
	Vars   map[string]any `json:"vars"` // the initial vars
	Next   string         `json:"next,omitempty"`
	Output string         `json:"output"`
	Error  string         `json:"error,omitempty"`
}

// RunLoader reads run records: a *sessions.Store, or a backend that
// implements sessions.RunBackend.
type RunLoader interface {
	LoadRun(ctx context.Context, id string) (*sessions.RunRecord, error)
}

// Load reads the run record id (sessions.ErrRunNotFound if there is
// none).
func Load(ctx context.Context, store RunLoader, id string) (*Run, error) {
	rec, err := store.LoadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return decodeRun(rec)
}

func decodeRun(rec *sessions.RunRecord) (*Run, error) {
	var h head
	if err := json.Unmarshal(rec.Head, &h); err != nil {
		return nil, fmt.Errorf("run '%s': bad record: %w", rec.ID, err)
	}
	r := &Run{ID: rec.ID, Workflow: rec.Workflow, Fingerprint: rec.Fingerprint, Task: h.Task, Status: Status(rec.Status),
		Output: h.Output, Error: h.Error, Next: h.Next, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}
	r.reset(h.Vars)
	for i, b := range rec.Steps {
		var s Step
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("run '%s': bad step %d: %w", rec.ID, i, err)
		}
		r.add(s)
	}
	r.saved = len(r.Steps)
	return r, nil
}

// reset starts the run's state from its initial vars.
func (r *Run) reset(vars map[string]any) {
	if vars == nil {
		vars = map[string]any{}
	}
	r.initialVars, r.headPrefix = vars, nil
	r.Vars = make(map[string]any, len(vars))
	for k, v := range vars {
		r.Vars[k] = v
	}
	r.Outputs, r.visits = map[string]string{}, map[string]int{}
}

// add appends a step and folds a completed one into the run's state.
func (r *Run) add(s Step) {
	r.Steps = append(r.Steps, s)
	if !s.Completed() {
		return
	}
	r.completed++
	r.visits[s.Node]++
	r.Outputs[s.Node] = s.Output
	for k, v := range s.Vars {
		r.Vars[k] = v
	}
}

// Visits returns how many times each node completed.
func (r *Run) Visits() map[string]int { return r.visits }

// head encodes the run's header as json.Marshal(head{...}) would: the
// task and the initial vars, which never change, are encoded once.
func (r *Run) head() []byte {
	if r.headPrefix == nil {
		task, err := json.Marshal(r.Task)
		if err == nil {
			var vars []byte
			if vars, err = json.Marshal(r.initialVars); err == nil {
				r.headPrefix = append(append(append([]byte(`{"task":`), task...), `,"vars":`...), vars...)
			}
		}
		if err != nil {
			// initial vars were checked to be JSON when the run started
			panic(fmt.Sprintf("workflow: run header: %v", err))
		}
	}
	b := make([]byte, 0, len(r.headPrefix)+len(r.Next)+len(r.Output)+len(r.Error)+40)
	b = append(b, r.headPrefix...)
	if r.Next != "" {
		b = jsonvalue.AppendString(append(b, `,"next":`...), r.Next)
	}
	b = jsonvalue.AppendString(append(b, `,"output":`...), r.Output)
	if r.Error != "" {
		b = jsonvalue.AppendString(append(b, `,"error":`...), r.Error)
	}
	return append(b, '}')
}

// appendJSON appends the step as json.Marshal encodes it, without
// reflection (a run record is written after every stage).
func (s *Step) appendJSON(b []byte) ([]byte, error) {
	b = jsonvalue.AppendString(append(b, `{"node":`...), s.Node)
	b = jsonvalue.AppendString(append(b, `,"session_id":`...), s.SessionID)
	b = jsonvalue.AppendString(append(b, `,"status":`...), s.Status)
	b = jsonvalue.AppendString(append(b, `,"output":`...), s.Output)
	if s.Error != "" {
		b = jsonvalue.AppendString(append(b, `,"error":`...), s.Error)
	}
	b = append(b, `,"started_at":`...)
	t, err := s.StartedAt.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b = append(b, t...)
	b = strconv.AppendInt(append(b, `,"duration_ms":`...), s.DurationMS, 10)
	b = strconv.AppendInt(append(b, `,"usage":{"input_tokens":`...), int64(s.Usage.InputTokens), 10)
	b = strconv.AppendInt(append(b, `,"output_tokens":`...), int64(s.Usage.OutputTokens), 10)
	b = append(b, '}')
	if len(s.Vars) > 0 {
		v, err := json.Marshal(s.Vars)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"vars":`...), v...)
	}
	return append(b, '}'), nil
}

// update returns the write that brings the stored record up to date:
// the header and the steps not yet stored. Once it is written, stored
// records it.
func (r *Run) update() (*sessions.RunUpdate, error) {
	steps := make([][]byte, 0, len(r.Steps)-r.saved)
	for i := r.saved; i < len(r.Steps); i++ {
		b, err := r.Steps[i].appendJSON(nil)
		if err != nil {
			return nil, fmt.Errorf("run '%s': step %d (%s): %w", r.ID, i, r.Steps[i].Node, err)
		}
		steps = append(steps, b)
	}
	return &sessions.RunUpdate{Status: string(r.Status), UpdatedAt: r.UpdatedAt, Head: r.head(), Steps: steps}, nil
}

// stored records that the write u returned is in the store.
func (r *Run) stored(u *sessions.RunUpdate) { r.saved += len(u.Steps) }

// pending reports whether the run has steps the store does not have.
func (r *Run) pending() bool { return r.saved < len(r.Steps) }

// save writes the run's header and the steps not yet stored (create:
// stores the new record). The write is not cancelled with the run: a
// cancelled run is recorded too.
func (r *Run) save(ctx context.Context, store *sessions.Store, create bool) error {
	ctx = context.WithoutCancel(ctx)
	u, err := r.update()
	if err != nil {
		return err
	}
	if create {
		err = store.CreateRun(ctx, &sessions.RunRecord{ID: r.ID, Workflow: r.Workflow, Fingerprint: r.Fingerprint,
			Status: u.Status, CreatedAt: r.CreatedAt, UpdatedAt: u.UpdatedAt, Head: u.Head, Steps: u.Steps})
	} else {
		err = store.UpdateRun(ctx, r.ID, u)
	}
	if err == nil {
		r.stored(u)
	}
	return err
}

// Fields calls f with each of the step's fields as Map gives them, the
// keys in sorted order: duration_ms, error (when set), node, output,
// session_id, started_at, status, usage.
func (s *Step) Fields(f func(key string, value any)) {
	f("duration_ms", s.DurationMS)
	if s.Error != "" {
		f("error", s.Error)
	}
	f("node", s.Node)
	f("output", s.Output)
	f("session_id", s.SessionID)
	f("started_at", s.StartedAt.UTC().Format(sessions.TimeFormat))
	f("status", s.Status)
	f("usage", map[string]any{"input_tokens": s.Usage.InputTokens, "output_tokens": s.Usage.OutputTokens})
}

// Map returns the run as JSON-like values: the result of
// workflow_execute and what `skein runs show --json` prints.
func (r *Run) Map() map[string]any {
	steps := make([]any, len(r.Steps))
	for i := range r.Steps {
		m := make(map[string]any, 8)
		r.Steps[i].Fields(func(k string, v any) { m[k] = v })
		steps[i] = m
	}
	return r.MapWith(steps)
}

// MapWith is Map with steps as the value of "steps": for a caller that
// converts the steps itself (from Step.Fields).
func (r *Run) MapWith(steps any) map[string]any {
	outputs := make(map[string]any, len(r.Outputs))
	for k, v := range r.Outputs {
		outputs[k] = v
	}
	m := map[string]any{
		"status": string(r.Status), "run_id": r.ID, "workflow": r.Workflow, "task": r.Task, "output": r.Output,
		"outputs": outputs, "vars": r.Vars, "steps": steps,
		"created_at": r.CreatedAt.UTC().Format(sessions.TimeFormat), "updated_at": r.UpdatedAt.UTC().Format(sessions.TimeFormat),
	}
	if r.Error != "" {
		m["error"] = r.Error
	}
	return m
}
