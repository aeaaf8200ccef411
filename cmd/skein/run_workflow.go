package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workflow"
)

// workflowFlags are the flags of `skein run FLOW.yaml`.
type workflowFlags struct {
	task     string
	runID    string
	maxSteps int
	json     bool
	tools    string
}

func (f *workflowFlags) register(fs *flag.FlagSet) {
	registerFlags(fs, f.flags())
}

// flags is the table of the workflow flags of skein run.
func (f *workflowFlags) flags() []flagDef {
	return []flagDef{
		{name: "task", value: &f.task, usage: "workflow files: the run's task (required)"},
		{name: "run-id", value: &f.runID, usage: "workflow files: the run's id; an unfinished run of that id is resumed (default: a new id)"},
		{name: "max-stages", value: &f.maxSteps, def: strconv.Itoa(workflow.DefaultMaxSteps), usage: "workflow files: the most stages the run runs (workflow_execute's max_steps)"},
		{name: "json", value: &f.json, usage: "workflow files: print the whole result as JSON instead of the final output"},
		{name: "tools", value: &f.tools, usage: "workflow files: a .star file (beside the workflow or below it) whose top-level functions are tools the nodes may name"},
	}
}

// set reports whether any workflow flag was given.
func (f *workflowFlags) set(fs *flag.FlagSet) bool {
	return slices.ContainsFunc(f.flags(), func(d flagDef) bool { return flagSet(fs, d.name) })
}

// isWorkflowFile reports whether `skein run` treats file as a workflow.
func isWorkflowFile(file string) bool {
	ext := strings.ToLower(filepath.Ext(file))
	return ext == ".yaml" || ext == ".yml"
}

// runWorkflow implements `skein run FLOW.yaml --task TEXT`: it loads the
// workflow file, runs it (resuming --run-id if that run is unfinished)
// and prints the final output, or the result as JSON. It exits 1 when
// the file is invalid or the run does not complete.
func runWorkflow(std stdio, vf *vmFlags, wf *workflowFlags, file string) int {
	const cmd = "skein run"
	if !flagSetNonEmpty(wf.task) {
		return usageError(std, cmd, "a workflow file needs --task TEXT")
	}
	if wf.maxSteps < 1 {
		return usageError(std, cmd, fmt.Sprintf("--max-stages must be >= 1, got %d", wf.maxSteps))
	}
	st, closeVM, err := vf.newState(std, vmConfig{root: filepath.Dir(file)})
	if err != nil {
		return failState(std, cmd, err)
	}
	var named map[string]starlark.Value
	if wf.tools != "" {
		rel := wf.tools
		dir, errDir := filepath.Abs(filepath.Dir(file))
		tools, errTools := filepath.Abs(wf.tools)
		if errDir == nil && errTools == nil {
			if r, err := filepath.Rel(dir, tools); err == nil {
				rel = r
			}
		}
		if named, err = builtins.ModuleTools(st, file, filepath.ToSlash(rel)); err != nil {
			closeVM()
			fmt.Fprintf(std.err, "%s: --tools: %s\n", cmd, err)
			return exitFailed
		}
	}
	g, err := builtins.LoadGraph(st, file, named)
	if err != nil {
		closeVM()
		fmt.Fprintf(std.err, "%s: %s\n", cmd, err)
		return exitFailed
	}
	ctx, stopRun := runContext(vf.timeout, std.err)
	end := st.Begin(ctx)
	thread := st.NewThread("workflow")
	vm.SetFile(thread, file)
	run, err := builtins.ExecuteGraph(thread, g, wf.task, wf.runID, wf.maxSteps)
	st.Release(thread)
	end()
	stopRun()
	closeErr := closeVM()
	if err != nil {
		return scriptFailed(std, vf, err)
	}
	if wf.json {
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(run.Map()); err != nil {
			fmt.Fprintf(std.err, "%s: %v\n", cmd, err)
			return exitFailed
		}
	} else if run.Status == workflow.StatusCompleted {
		fmt.Fprintln(std.out, run.Output)
	}
	if closeErr != nil {
		fmt.Fprintf(std.err, "%s: %v\n", cmd, closeErr)
		return exitFailed
	}
	if run.Status != workflow.StatusCompleted {
		msg := fmt.Sprintf("%s: run %s of %s ended with status %s", cmd, run.ID, file, run.Status)
		if run.Error != "" {
			msg += ": " + oneLine(run.Error)
		}
		if run.Next != "" {
			msg += fmt.Sprintf(" (resume it with --run-id %s)", run.ID)
		}
		fmt.Fprintln(std.err, msg)
		return exitFailed
	}
	return exitOK
}

func flagSetNonEmpty(s string) bool { return strings.TrimSpace(s) != "" }
