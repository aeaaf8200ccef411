package serve

import (
	"errors"
	"net/http"
	"strings"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workflow"
)

// Workflow runs (ext): GET /api/runs lists the run records in the store
// (skein run, workflow_execute), GET /api/runs/{id} returns one with its
// steps and the graph of the path it took.

type runSummaryJSON struct {
	ID        string `json:"id"`
	Workflow  string `json:"workflow"`
	Status    string `json:"status"`
	Steps     int    `json:"steps"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

type runListJSON struct {
	Runs   []runSummaryJSON `json:"runs"`
	Total  int              `json:"total"`
	Limit  int              `json:"limit"`
	Offset int              `json:"offset"`
}

type runStepJSON struct {
	Node         string `json:"node"`
	SessionID    string `json:"sessionId"`
	Status       string `json:"status"`
	Output       string `json:"output"`
	Error        string `json:"error"`
	StartedAt    string `json:"startedAt"`
	DurationMs   int64  `json:"durationMs"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
}

// runGraphJSON is the graph of a run's path: each node it visited (how
// often, its last status) and each transition taken (how often), plus
// the node it runs next.
type runGraphJSON struct {
	Nodes []runNodeJSON `json:"nodes"`
	Edges []runEdgeJSON `json:"edges"`
}

type runNodeJSON struct {
	Name   string `json:"name"`
	Visits int    `json:"visits"`
	Status string `json:"status"` // the last visit's, or "next"
}

type runEdgeJSON struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Count int    `json:"count"`
}

type runJSON struct {
	runSummaryJSON
	Task      string        `json:"task"`
	Error     string        `json:"error"`
	Output    string        `json:"output"`
	Next      string        `json:"next"`
	StepsList []runStepJSON `json:"stepList"`
	Graph     runGraphJSON  `json:"graph"`
}

// listRuns handles GET /api/runs?status=&workflow=&limit=&offset=.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	limit, offset, err := pageQuery(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := sessions.RunFilter{Workflow: q.Get("workflow"), Limit: limit, Offset: offset}
	if v := q.Get("status"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			st = strings.TrimSpace(st)
			known := false
			for _, k := range workflow.Statuses {
				known = known || string(k) == st
			}
			if !known {
				return errorf(http.StatusBadRequest, "bad_query", "unknown run status '%s' (expected one of: cancelled, completed, failed, max_steps, running)", sessions.Escape(truncate(st, 40)))
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	list, total, err := s.store.ListRuns(r.Context(), f)
	if err != nil {
		return err
	}
	out := runListJSON{Runs: make([]runSummaryJSON, len(list)), Total: total, Limit: limit, Offset: offset}
	for i, sum := range list {
		out.Runs[i] = runSummaryJSON{ID: sum.ID, Workflow: sum.Workflow, Status: sum.Status, Steps: sum.Steps,
			CreatedAt: formatTime(sum.CreatedAt), UpdatedAt: formatTime(sum.UpdatedAt)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getRun handles GET /api/runs/{id}.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	run, err := workflow.Load(r.Context(), s.store, id)
	if errors.Is(err, sessions.ErrRunNotFound) {
		return errorf(http.StatusNotFound, "not_found", "no run '%s'", truncate(id, 80))
	}
	if err != nil {
		return err
	}
	out := runJSON{runSummaryJSON: runSummaryJSON{ID: run.ID, Workflow: run.Workflow, Status: string(run.Status), Steps: len(run.Steps),
		CreatedAt: formatTime(run.CreatedAt), UpdatedAt: formatTime(run.UpdatedAt)},
		Task: run.Task, Error: run.Error, Output: run.Output, Next: run.Next, StepsList: make([]runStepJSON, len(run.Steps))}
	nodes := map[string]int{}
	edges := map[[2]string]int{}
	visit := func(name, status string) {
		i, ok := nodes[name]
		if !ok {
			i = len(out.Graph.Nodes)
			nodes[name] = i
			out.Graph.Nodes = append(out.Graph.Nodes, runNodeJSON{Name: name})
		}
		if status != "next" {
			out.Graph.Nodes[i].Visits++
		}
		out.Graph.Nodes[i].Status = status
	}
	for i, st := range run.Steps {
		out.StepsList[i] = runStepJSON{Node: st.Node, SessionID: st.SessionID, Status: st.Status, Output: st.Output, Error: st.Error,
			StartedAt: formatTime(st.StartedAt), DurationMs: st.DurationMS, InputTokens: st.Usage.InputTokens, OutputTokens: st.Usage.OutputTokens}
		visit(st.Node, st.Status)
		if i > 0 {
			edges[[2]string{run.Steps[i-1].Node, st.Node}]++
		}
	}
	if run.Next != "" && run.Status == workflow.StatusRunning {
		if n := len(run.Steps); n > 0 {
			edges[[2]string{run.Steps[n-1].Node, run.Next}]++
		}
		visit(run.Next, "next")
	}
	out.Graph.Edges = []runEdgeJSON{}
	if out.Graph.Nodes == nil {
		out.Graph.Nodes = []runNodeJSON{}
	}
	for i := 1; i < len(run.Steps); i++ { // in the order first taken
		k := [2]string{run.Steps[i-1].Node, run.Steps[i].Node}
		if c, ok := edges[k]; ok {
			out.Graph.Edges = append(out.Graph.Edges, runEdgeJSON{From: k[0], To: k[1], Count: c})
			delete(edges, k)
		}
	}
	for k, c := range edges {
		out.Graph.Edges = append(out.Graph.Edges, runEdgeJSON{From: k[0], To: k[1], Count: c})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
