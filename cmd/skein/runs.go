package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workflow"
)

const runsUsage = "<command> [flags] [arguments]"

func runsCommands() []sessionsCommand {
	return []sessionsCommand{
		{"ls", "[flags]", "list workflow runs, newest first", runsLs},
		{"show", "[flags] RUN_ID", "print a run: status, stages with durations, tokens and session ids", runsShow},
	}
}

// runsMain implements `skein runs ls|show`: the workflow run records of
// a database.
func runsMain(args []string, std stdio) int {
	return dispatch(args, std, "skein runs", runsUsage, runsCommands(),
		"Every command takes --store (default $SKEIN_STORE, else .skein/sessions.db, or a\npostgres:// URL) and opens a file read-only.")
}

// runBackend opens the database of a runs subcommand.
func runBackend(store *storeFlag) (sessions.RunBackend, func() error, error) {
	b, err := storedBackend(store, storeRead)
	if err != nil {
		return nil, nil, err
	}
	rb, ok := b.(sessions.RunBackend)
	if !ok {
		b.Close()
		return nil, nil, sessions.ErrNoRuns
	}
	return rb, b.Close, nil
}

// runsLs implements `skein runs ls`.
func runsLs(args []string, std stdio) int {
	var store storeFlag
	fs := newFlagSet("runs ls")
	store.register(fs)
	status := fs.String("status", "", "only runs with one of these statuses, comma-separated ("+strings.Join(runStatuses(), ", ")+")")
	name := fs.String("workflow", "", "only runs of the workflow of this name")
	limit := fs.Int("limit", 20, "runs per page (0: all)")
	offset := fs.Int("offset", 0, "runs to skip before the page")
	asJSON := fs.Bool("json", false, `print {"runs": [...], "total", "limit", "offset"} as JSON`)
	rest, code, stop := parseInterleaved(fs, args, std)
	if stop {
		return code
	}
	switch {
	case len(rest) > 0:
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q", rest[0]))
	case *limit < 0:
		return usageError(std, fs.Name(), fmt.Sprintf("--limit must be >= 0, got %d", *limit))
	case *offset < 0:
		return usageError(std, fs.Name(), fmt.Sprintf("--offset must be >= 0, got %d", *offset))
	}
	var statuses []string
	if *status != "" {
		for _, s := range strings.Split(*status, ",") {
			s = strings.TrimSpace(s)
			if !contains(runStatuses(), s) {
				return usageError(std, fs.Name(), fmt.Sprintf("--status: unknown run status '%s' (expected one of: %s)", sessions.Escape(s), strings.Join(runStatuses(), ", ")))
			}
			statuses = append(statuses, s)
		}
	}
	rb, closeFn, err := runBackend(&store)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer closeFn()
	page, total, err := rb.ListRuns(context.Background(), sessions.RunFilter{Statuses: statuses, Workflow: *name, Limit: *limit, Offset: *offset})
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	if *asJSON {
		type runJSON struct {
			ID          string `json:"run_id"`
			Workflow    string `json:"workflow"`
			Fingerprint string `json:"fingerprint"`
			Status      string `json:"status"`
			Steps       int    `json:"steps"`
			CreatedAt   string `json:"created_at"`
			UpdatedAt   string `json:"updated_at"`
		}
		out := struct {
			Runs   []runJSON `json:"runs"`
			Total  int       `json:"total"`
			Limit  int       `json:"limit"`
			Offset int       `json:"offset"`
		}{Runs: []runJSON{}, Total: total, Limit: *limit, Offset: *offset}
		for _, r := range page {
			out.Runs = append(out.Runs, runJSON{r.ID, r.Workflow, r.Fingerprint, r.Status, r.Steps,
				r.CreatedAt.UTC().Format(sessions.TimeFormat), r.UpdatedAt.UTC().Format(sessions.TimeFormat)})
		}
		return printJSON(std, fs.Name(), out)
	}
	if len(page) > 0 {
		tw := tabwriter.NewWriter(std.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tWORKFLOW\tSTATUS\tSTEPS\tCREATED\tUPDATED")
		for _, r := range page {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", printable(r.ID), printable(r.Workflow), r.Status, r.Steps, listTime(r.CreatedAt), listTime(r.UpdatedAt))
		}
		tw.Flush()
	}
	pageSummary(std.out, "run", len(page), total, *offset, "")
	return exitOK
}

func runStatuses() []string {
	out := make([]string, len(workflow.Statuses))
	for i, s := range workflow.Statuses {
		out[i] = string(s)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runsShow implements `skein runs show RUN_ID`.
func runsShow(args []string, std stdio) int {
	var store storeFlag
	fs := newFlagSet("runs show")
	store.register(fs)
	asJSON := fs.Bool("json", false, "print the run as workflow_execute returns it, as JSON")
	id, code, stop := parseOne(fs, args, "RUN_ID", std)
	if stop {
		return code
	}
	rb, closeFn, err := runBackend(&store)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer closeFn()
	run, err := workflow.Load(context.Background(), rb, id)
	if errors.Is(err, sessions.ErrRunNotFound) {
		err = fmt.Errorf("unknown run id '%s' in %s", id, &store)
	}
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	if *asJSON {
		return printJSON(std, fs.Name(), run.Map())
	}
	printRun(std, run)
	return exitOK
}

func printRun(std stdio, r *workflow.Run) {
	w := std.out
	fmt.Fprintf(w, "run %s\n", printable(r.ID))
	field := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-11s %s\n", name, fmt.Sprintf(format, args...))
	}
	field("workflow", "%s (%s)", printable(r.Workflow), r.Fingerprint)
	field("status", "%s", r.Status)
	field("task", "%s", oneLine(r.Task))
	field("created", "%s", listTime(r.CreatedAt))
	field("updated", "%s", listTime(r.UpdatedAt))
	if r.Next != "" && r.Status != workflow.StatusCompleted {
		field("next", "%s", printable(r.Next))
	}
	if r.Error != "" {
		field("error", "%s", oneLine(r.Error))
	}
	in, out := 0, 0
	for _, s := range r.Steps {
		in, out = in+s.Usage.InputTokens, out+s.Usage.OutputTokens
	}
	field("tokens", "%d in, %d out", in, out)
	if len(r.Steps) == 0 {
		fmt.Fprintln(w, "\nno stages run")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tNODE\tSTATUS\tDURATION\tTOKENS IN\tTOKENS OUT\tSESSION\tOUTPUT")
	for i, s := range r.Steps {
		text := s.Output
		if s.Error != "" {
			text = "error: " + s.Error
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%dms\t%d\t%d\t%s\t%s\n", i, printable(s.Node), s.Status, s.DurationMS, s.Usage.InputTokens, s.Usage.OutputTokens,
			printable(orDash(s.SessionID)), clipLine(text, 60))
	}
	tw.Flush()
	if r.Status == workflow.StatusCompleted {
		fmt.Fprintf(w, "\noutput:\n%s\n", printableText(r.Output))
	}
}

// clipLine is s on one line, cut to n runes.
func clipLine(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func printJSON(std stdio, cmd string, v any) int {
	enc := json.NewEncoder(std.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(std, cmd, err)
	}
	return exitOK
}
