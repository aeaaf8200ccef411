package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/yamlfile"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/telemetry"
)

// Event types a run emits.
const (
	EventWorkflowStart = "workflow_start"
	EventStageStart    = "stage_start"
	EventStageEnd      = "stage_end"
	EventWorkflowEnd   = "workflow_end"
)

// DefaultMaxSteps is the default limit on the stages one run runs.
const DefaultMaxSteps = 50

// Executor runs stages. Execute calls it on its own goroutine, one stage
// at a time.
type Executor interface {
	// RunStage runs one stage. An error fails the stage (and the run);
	// with ctx cancelled it cancels the run instead.
	RunStage(ctx context.Context, s *Stage) (*StageResult, error)
}

// Stage is what an Executor is given. Its maps belong to the run and
// must not be modified.
type Stage struct {
	RunID string
	Node  *Node
	// SessionID is the stage session (created if missing), "" for an llm
	// or fn stage without one.
	SessionID string
	// Prompt is the node's rendered prompt ("" for fn stages).
	Prompt  string
	Task    string
	Input   string            // the previous stage's output
	Outputs map[string]string // last output of each node that has run
	Vars    map[string]any
}

// StageResult is what a stage produced.
type StageResult struct {
	Output string
	// Status is an agent loop's status; "" means done.
	Status string
	// Vars are merged into the run's vars.
	Vars  map[string]any
	Usage Usage
}

// Event is one workflow event, as passed to Options.OnEvent and logged
// into the session of the stage it concerns.
type Event struct {
	Type      string
	RunID     string
	Workflow  string
	Node      string // "" for workflow_start/workflow_end of a run without stages
	SessionID string
	Status    string // stage_end: the stage's status; workflow_end: the run's
	Step      int    // the stage's index in the run's steps
	Error     string
	Resumed   bool // workflow_start of a resumed run
}

// Data returns the event's fields, for a session log entry: run_id,
// workflow, node, status, step, error, resumed (the last ones when set).
func (e *Event) Data() map[string]any {
	d := map[string]any{"run_id": e.RunID, "workflow": e.Workflow, "node": e.Node}
	if e.Status != "" {
		d["status"] = e.Status
	}
	if e.Type == EventStageStart || e.Type == EventStageEnd {
		d["step"] = int64(e.Step)
	}
	if e.Error != "" {
		d["error"] = e.Error
	}
	if e.Resumed {
		d["resumed"] = true
	}
	return d
}

// Options configures Execute.
type Options struct {
	Graph *Graph
	Task  string
	// RunID names the run; "" mints one with NewID. A stored run of that
	// id is resumed (or returned, when it completed).
	RunID    string
	Vars     map[string]any
	MaxSteps int // 0: DefaultMaxSteps
	Executor Executor
	// Store keeps the stage sessions and the run record.
	Store *sessions.Store
	Clock func() time.Time // default time.Now
	NewID func() string
	// OnEvent, if set, receives every event; its error stops the run
	// (recorded as failed) and is returned.
	OnEvent func(*Event) error
}

// ErrGraphChanged is returned when a run is resumed with another graph.
var ErrGraphChanged = errors.New("was started with another graph")

type engine struct {
	Options
	run     *Run
	savedAt time.Time // when the run record was last written
	resumed bool
	opened  map[string]bool // the stage sessions this run opened
}

// recordAfter is how long the record of a stage without a session (an
// fn stage, an llm stage without one) may wait for the run's next
// write: a run of quick fn stages writes its record every few
// milliseconds, not after every stage. A crash loses at most the
// records of the stages that ended in that time, which then run again,
// as the stage a crash interrupts does; what the store holds is always
// a prefix of the run. An observer (OnEvent) only learns of a stage
// once its record is written.
var recordAfter = 5 * time.Millisecond

// Execute runs (or resumes) a workflow. Stage failures do not return an
// error: the run ends with status failed and the error in its last step
// and in Run.Error. Errors are returned for bad options, a resume that
// does not match the record, a stage whose input contract is not met, an
// OnEvent failure and a store that cannot be written; the run record is
// left resumable.
func Execute(ctx context.Context, opts Options) (*Run, error) {
	e := &engine{Options: opts}
	if e.Clock == nil {
		e.Clock = time.Now
	}
	if e.MaxSteps == 0 {
		e.MaxSteps = DefaultMaxSteps
	}
	if e.MaxSteps < 0 {
		return nil, fmt.Errorf("max_steps must be >= 1")
	}
	if e.Graph == nil || e.Executor == nil || e.Store == nil {
		return nil, fmt.Errorf("workflow.Execute needs a Graph, an Executor and a Store")
	}
	resumed, err := e.start(ctx)
	if err != nil {
		return nil, err
	}
	e.resumed = resumed
	if e.run.Status == StatusCompleted {
		return e.run, nil
	}
	ctx, span := telemetry.Workflow(ctx, e.Graph.Name, e.RunID)
	r, err := e.execute(ctx, resumed)
	switch {
	case err != nil:
		span.End(err, "")
	case r.Status == StatusFailed || r.Status == StatusMaxSteps:
		span.End(errors.New(cmp.Or(r.Error, string(r.Status))), string(r.Status))
	case r.Status == StatusCancelled:
		span.End(context.Canceled, "cancelled")
	default:
		span.End(nil, "")
	}
	return r, err
}

// execute runs the stages of a started run.
func (e *engine) execute(ctx context.Context, resumed bool) (*Run, error) {
	r := e.run
	if err := e.emit(ctx, &Event{Type: EventWorkflowStart, Node: r.Next, Resumed: resumed}, e.sessionOf(r.Next)); err != nil {
		return r, e.abort(ctx, err)
	}
	for r.Next != "" {
		if r.completed >= e.MaxSteps {
			r.Status = StatusMaxSteps
			break
		}
		if ctx.Err() != nil {
			r.Status = StatusCancelled
			break
		}
		stop, err := e.stage(ctx, e.Graph.Nodes[r.Next])
		if err != nil {
			return r, err
		}
		if stop {
			break
		}
	}
	if r.Next == "" {
		r.Status = StatusCompleted
	}
	r.UpdatedAt = e.Clock()
	last := ""
	if n := len(r.Steps); n > 0 {
		last = r.Steps[n-1].Node
	}
	// the final record and workflow_end are one commit
	if err := e.record(ctx, &Event{Type: EventWorkflowEnd, Node: last, Status: string(r.Status), Error: r.Error}, e.sessionOf(last)); err != nil {
		return r, err
	}
	return r, nil
}

// start creates the run record or loads the stored one, reporting
// whether it resumed.
func (e *engine) start(ctx context.Context) (bool, error) {
	g := e.Graph
	if e.RunID != "" {
		r, err := Load(ctx, e.Store, e.RunID)
		switch {
		case err == nil:
			if r.Fingerprint != g.Fingerprint() {
				return false, fmt.Errorf("run '%s' %w (workflow '%s', %s; this graph: workflow '%s', %s)",
					r.ID, ErrGraphChanged, r.Workflow, r.Fingerprint, g.Name, g.Fingerprint())
			}
			if r.Task != e.Task {
				return false, fmt.Errorf("run '%s' was started with another task (%q)", r.ID, clip(r.Task, 60))
			}
			e.run, e.savedAt = r, time.Now()
			return r.Status != StatusCompleted, nil
		case !errors.Is(err, sessions.ErrRunNotFound):
			return false, err
		}
	} else {
		if e.NewID == nil {
			return false, fmt.Errorf("workflow.Execute needs NewID to mint a run id")
		}
		e.RunID = e.NewID()
	}
	vars, err := yamlfile.Normalize(e.Vars, "vars")
	if err != nil {
		return false, err
	}
	if _, err := json.Marshal(vars); err != nil {
		return false, fmt.Errorf("vars: %w", err)
	}
	now := e.Clock()
	r := &Run{ID: e.RunID, Workflow: g.Name, Fingerprint: g.Fingerprint(), Task: e.Task, Status: StatusRunning,
		Next: g.Entry, CreatedAt: now, UpdatedAt: now}
	m, _ := vars.(map[string]any)
	r.reset(m)
	e.run, e.savedAt = r, time.Now()
	return false, r.save(ctx, e.Store, true)
}

// sessionOf is the stage session of node: model_policy.session_id (with
// {run_id} replaced by the run's id), else "<run_id>/<node>" for agent
// stages, else none.
func (e *engine) sessionOf(node string) string {
	n := e.Graph.Nodes[node]
	switch {
	case n == nil:
		return ""
	case n.ModelPolicy.SessionID != "":
		return strings.ReplaceAll(n.ModelPolicy.SessionID, "{run_id}", e.run.ID)
	case n.Mode == ModeAgent:
		return e.run.ID + "/" + n.Name
	}
	return ""
}

// started is the session:started data of a session that the run's stage
// node creates: {workflow, run_id, stage}.
func (e *engine) started(node string) sessions.Started {
	return sessions.Started{"workflow": e.run.Workflow, "run_id": e.run.ID, "stage": node}
}

// stage runs one stage and records it; it reports whether the run stops.
func (e *engine) stage(ctx context.Context, n *Node) (bool, error) {
	r := e.run
	sid := e.sessionOf(n.Name)
	if sid != "" {
		// the records of the stages before are written before a stage
		// that may take long starts (see recordAfter)
		if r.pending() {
			if err := e.save(ctx); err != nil {
				return true, err
			}
		}
		if n.RequireTranscript {
			length, err := e.Store.Length(ctx, sid)
			if err != nil && !errors.Is(err, sessions.ErrNotFound) {
				return true, err
			}
			if err != nil || length == 0 {
				err := fmt.Errorf("workflow stage '%s' requires an existing session '%s' with messages (input_contract.require_transcript)", n.Name, sid)
				return true, e.abort(ctx, err)
			}
		}
		if err := e.open(ctx, n, sid); err != nil {
			return true, err
		}
	}
	index := len(r.Steps)
	if err := e.emit(ctx, &Event{Type: EventStageStart, Node: n.Name, SessionID: sid, Step: index}, sid); err != nil {
		return true, e.abort(ctx, err)
	}
	started := e.Clock()
	step := Step{Node: n.Name, SessionID: sid, StartedAt: started}
	res, err := e.call(ctx, n, sid)
	step.DurationMS = e.Clock().Sub(started).Milliseconds()
	if res != nil {
		step.Output, step.Status, step.Usage = res.Output, res.Status, res.Usage
		if step.Status == "" {
			step.Status = StageDone
		}
		if len(res.Vars) > 0 {
			v, nerr := yamlfile.Normalize(res.Vars, "vars")
			if nerr == nil {
				_, nerr = json.Marshal(v)
			}
			if nerr != nil && err == nil {
				err = nerr
			}
			step.Vars, _ = v.(map[string]any)
		}
	}
	if err == nil {
		err = n.checkOutput(step.Output)
	}
	stop := false
	if err != nil {
		step.Status, step.Error, step.Vars = StageFailed, err.Error(), nil
		r.Status, r.Error = StatusFailed, fmt.Sprintf("stage '%s': %s", n.Name, err)
		if ctx.Err() != nil {
			step.Status, r.Status, r.Error = StageCancelled, StatusCancelled, ""
		}
		stop = true
	} else {
		r.add(step)
		r.Output, r.Error, r.Status = step.Output, "", StatusRunning
		next, err := e.next(n, &step)
		switch {
		case err != nil:
			// the stage completed but no successor could be chosen; a
			// resumed run runs it again
			r.Status, r.Error = StatusFailed, err.Error()
			stop = true
		case next == "":
			r.Next, r.Status = "", StatusCompleted
		default:
			r.Next = next
		}
	}
	if !step.Completed() {
		r.add(step)
	}
	r.UpdatedAt = e.Clock()
	end := &Event{Type: EventStageEnd, Node: n.Name, SessionID: sid, Status: step.Status, Step: index, Error: step.Error}
	if sid == "" && !stop && e.OnEvent == nil && time.Since(e.savedAt) < recordAfter {
		return false, nil // recorded with the run's next write
	}
	if err := e.record(ctx, end, sid); err != nil {
		if errors.Is(err, errEvent) {
			return true, e.abort(ctx, err)
		}
		return true, err
	}
	return stop, nil
}

// open opens the stage session sid of node n, creating it if missing.
// An agent stage's own session ("<run_id>/<node>") that a run which did
// not resume has not opened yet is new: it is created without being
// looked for first (and opened when it exists after all).
func (e *engine) open(ctx context.Context, n *Node, sid string) error {
	if !e.resumed && n.ModelPolicy.SessionID == "" && !e.opened[sid] {
		if e.opened == nil {
			e.opened = map[string]bool{}
		}
		e.opened[sid] = true
		err := e.Store.Create(ctx, sid, sessions.Info{Started: e.started(n.Name)})
		if !errors.Is(err, sessions.ErrExists) {
			return err
		}
	}
	_, err := e.Store.OpenWith(ctx, sid, sessions.OpenOptions{Info: sessions.Info{Started: e.started(n.Name)}})
	return err
}

// call renders the prompt and runs the stage: through the Executor,
// except input and output stages, which pass the task and the previous
// output on.
func (e *engine) call(ctx context.Context, n *Node, sid string) (*StageResult, error) {
	r := e.run
	switch n.Mode {
	case ModeInput:
		return &StageResult{Output: r.Task}, nil
	case ModeOutput:
		return &StageResult{Output: r.Output}, nil
	}
	s := &Stage{RunID: r.ID, Node: n, SessionID: sid, Task: r.Task, Input: r.Output, Outputs: r.Outputs, Vars: r.Vars}
	if n.prompt != nil {
		p, err := n.prompt.render(r.Task, r.Output, r.Outputs, r.Vars)
		if err != nil {
			return nil, err
		}
		s.Prompt = p
	}
	ctx, span := telemetry.Stage(ctx, n.Name, string(n.Mode), sid)
	res, err := e.Executor.RunStage(ctx, s)
	switch {
	case err != nil:
		span.End(err, "")
	case res != nil && res.Status == StageFailed:
		span.End(errors.New("the stage failed"), StageFailed)
	default:
		span.End(nil, "")
	}
	return res, err
}

// next picks the first edge from n whose condition holds ("" if none).
func (e *engine) next(n *Node, s *Step) (string, error) {
	r := e.run
	edges := e.Graph.Outgoing(n.Name)
	if len(edges) == 0 {
		return "", nil
	}
	env := &Env{Output: s.Output, Status: s.Status, Node: n.Name, Task: r.Task, Vars: r.Vars,
		Outputs: r.Outputs, Visits: r.visits, Steps: r.completed}
	for _, edge := range edges {
		ok, err := edge.eval(env)
		if err != nil {
			return "", err
		}
		if ok {
			return edge.To, nil
		}
	}
	return "", nil
}

// abort records the run as failed with err (the record stays resumable)
// and returns err.
func (e *engine) abort(ctx context.Context, err error) error {
	r := e.run
	r.Status, r.Error, r.UpdatedAt = StatusFailed, err.Error(), e.Clock()
	if serr := e.save(ctx); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// save writes the run record.
func (e *engine) save(ctx context.Context) error {
	if err := e.run.save(ctx, e.Store, false); err != nil {
		return err
	}
	e.savedAt = time.Now()
	return nil
}

// errEvent marks an error of logging an event or of OnEvent, as opposed
// to one of writing the run record.
var errEvent = errors.New("event")

// record writes the run record and logs ev into session sid (if any) in
// one commit, then passes ev to OnEvent. An error of the event's (its
// session, OnEvent) matches errEvent.
func (e *engine) record(ctx context.Context, ev *Event, sid string) error {
	if sid == "" {
		if err := e.save(ctx); err != nil {
			return err
		}
		return e.emit(ctx, ev, sid)
	}
	r := e.run
	ev.RunID, ev.Workflow = r.ID, r.Workflow
	ctx = context.WithoutCancel(ctx)
	if _, err := e.Store.OpenWith(ctx, sid, sessions.OpenOptions{Info: sessions.Info{Started: e.started(ev.Node)}}); err != nil {
		return eventError{err}
	}
	u, err := r.update()
	if err != nil {
		return err
	}
	ch := &sessions.Change{Events: []sessions.Event{sessions.NewEvent(ev.Type, ev.Data())}}
	if _, err := e.Store.ApplyRun(ctx, sid, ch, r.ID, u); err != nil {
		return eventError{err}
	}
	r.stored(u)
	e.savedAt = time.Now()
	return e.notify(ev, "")
}

// eventError is an error of an event's: errors.Is(err, errEvent).
type eventError struct{ error }

func (e eventError) Unwrap() error        { return e.error }
func (e eventError) Is(target error) bool { return target == errEvent }

// emit logs ev into session sid (if any) and passes it to OnEvent.
func (e *engine) emit(ctx context.Context, ev *Event, sid string) error {
	ev.RunID, ev.Workflow = e.run.ID, e.run.Workflow
	// a cancelled run still logs its end
	ctx = context.WithoutCancel(ctx)
	if sid != "" {
		if _, err := e.Store.OpenWith(ctx, sid, sessions.OpenOptions{Info: sessions.Info{Started: e.started(ev.Node)}}); err != nil {
			return eventError{err}
		}
		ch := &sessions.Change{Events: []sessions.Event{sessions.NewEvent(ev.Type, ev.Data())}}
		if ev.Type == EventStageStart {
			// Staged: it is written with the stage's first write of the
			// session (an agent loop's first step), or at the latest
			// with stage_end, one commit fewer a stage.
			if _, err := e.Store.Stage(ctx, sid, ch); err != nil {
				return eventError{err}
			}
		} else if _, err := e.Store.Apply(ctx, sid, ch); err != nil {
			return eventError{err}
		}
	}
	return e.notify(ev, sid)
}

// notify passes ev to OnEvent. sid is the session ev was staged in, if
// it was: a failing OnEvent writes it then.
func (e *engine) notify(ev *Event, sid string) error {
	if e.OnEvent != nil {
		if err := e.OnEvent(ev); err != nil {
			if sid != "" && ev.Type == EventStageStart {
				// the stage will not run: the event is written now
				err = errors.Join(err, e.Store.Commit(context.WithoutCancel(context.Background()), sid))
			}
			return eventError{err}
		}
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
