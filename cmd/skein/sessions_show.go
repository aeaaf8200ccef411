package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// Views of `skein sessions show`.
const (
	viewBasic   = "basic"   // the conversation: text of system, user and assistant messages
	viewVerbose = "verbose" // plus tool calls and results, thinking, images, message ids and times, models and usage
	viewDebug   = "debug"   // plus message metadata and every event with its fields
)

// sessionsShow implements `skein sessions show ID`.
func sessionsShow(args []string, std stdio) int {
	var store storeFlag
	fs := sessionsFlags("show", &store)
	view := fs.String("view", viewBasic, "basic (messages), verbose (plus tool calls and results, message ids and times, models and usage) or debug (plus every event)")
	id, code, stop := parseOne(fs, args, "session ID", std)
	if stop {
		return code
	}
	switch *view {
	case viewBasic, viewVerbose, viewDebug:
	default:
		return usageError(std, fs.Name(), fmt.Sprintf("--view %q: want basic, verbose or debug", *view))
	}
	b, err := storedBackend(&store, storeRead)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer b.Close()
	rec, err := b.Load(context.Background(), id)
	if err != nil {
		return fail(std, fs.Name(), sessionError(&store, id, err))
	}
	printSession(std.out, rec, *view)
	return exitOK
}

// printSession writes rec in a view.
func printSession(w io.Writer, rec *sessions.Record, view string) {
	fmt.Fprintf(w, "session %s\n", printable(rec.ID))
	field := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-9s %s\n", name, fmt.Sprintf(format, args...))
	}
	if rec.Title != "" {
		field("title", "%s", indentLines(printableText(rec.Title), 12))
	}
	field("status", "%s", rec.Status)
	field("created", "%s", listTime(rec.CreatedAt))
	field("updated", "%s", listTime(rec.UpdatedAt))
	if rec.ParentID != "" {
		if rec.BranchedAt != nil {
			field("parent", "%s (branched at message %d)", printable(rec.ParentID), *rec.BranchedAt)
		} else {
			field("parent", "%s", printable(rec.ParentID))
		}
	}
	if len(rec.ChildIDs) > 0 {
		field("forks", "%s", printableList(rec.ChildIDs))
	}
	if rec.MaxTurns > 0 {
		field("turns", "%d (cap %d)", rec.Turns, rec.MaxTurns)
	} else {
		field("turns", "%d", rec.Turns)
	}
	field("messages", "%d", len(rec.Messages))
	field("events", "%d", len(rec.Events))
	if len(rec.Metadata) > 0 {
		field("metadata", "%s", compactJSON(rec.Metadata))
	}
	if rec.Summary != nil {
		field("summary", "%s", indentLines(printableText(*rec.Summary), 12))
	}
	fmt.Fprintln(w)
	if len(rec.Messages) == 0 {
		fmt.Fprintln(w, "(no messages)")
	}
	hidden := 0
	for i := range rec.Messages {
		printMessage(w, i, &rec.Messages[i], view)
		if view == viewBasic && rec.Messages[i].Role == message.RoleTool {
			hidden++
		}
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%s hidden: --view verbose shows tool calls and results)\n", plural(hidden, "tool message"))
	}
	if view == viewDebug {
		fmt.Fprintln(w, "\nevents:")
		system := ""
		for i := range rec.Events {
			e := &rec.Events[i]
			printEvent(w, e)
			// the system prompt a turn sent, as text, whenever it changes
			if s, _ := e.Data["system"].(string); e.Type == "turn_start" && s != "" && s != system {
				system = s
				fmt.Fprintf(w, "    system prompt sent:\n      %s\n", indentLines(printableText(s), 6))
			}
		}
	}
}

// printMessage writes message i in a view: nothing at all for a message
// the view leaves out (tool calls and results in basic).
func printMessage(w io.Writer, i int, m *message.Message, view string) {
	prefix := fmt.Sprintf("[%d] %s", i, m.Role)
	width := len(prefix) + 2
	line := func(label, text string) {
		fmt.Fprintf(w, "%s%s: %s\n", prefix, label, indentLines(printableText(text), width))
	}
	if m.Role == message.RoleTool {
		if view == viewBasic {
			return
		}
		label := fmt.Sprintf(" %s (%s)", printable(m.Name), printable(m.ToolCallID))
		if m.IsError {
			label += " error"
		}
		line(label, m.TextContent())
	} else {
		text := m.TextContent()
		if view != viewBasic {
			for _, b := range m.Blocks {
				switch b.Type {
				case message.BlockThinking:
					line(" thinking", b.Thinking)
				case message.BlockRedactedThinking:
					line(" thinking", fmt.Sprintf("[redacted, %d bytes]", len(b.Data)))
				case message.BlockImage:
					line("", fmt.Sprintf("[image %s, %d bytes of base64]", printable(b.MediaType), len(b.Data)))
				}
			}
		}
		if text != "" || (len(m.ToolCalls) == 0 && m.Blocks == nil) {
			line("", text)
		}
		if view != viewBasic {
			for _, c := range m.ToolCalls {
				line(" calls", fmt.Sprintf("%s(%s) (%s)", printable(c.Name), compactJSON(map[string]any(c.Arguments)), printable(c.ID)))
			}
		}
	}
	if view == viewBasic {
		return
	}
	var parts []string
	if m.ID != "" {
		parts = append(parts, "id "+printable(m.ID))
	}
	if !m.CreatedAt.IsZero() {
		parts = append(parts, "at "+m.CreatedAt.UTC().Format(sessions.TimeFormat))
	}
	if m.Model != "" || m.Usage != nil || len(parts) > 0 {
		if m.Model != "" {
			parts = append(parts, "model "+printable(m.Model))
		}
		if m.Usage != nil {
			parts = append(parts, "usage "+compactJSON(m.Usage))
		}
		fmt.Fprintf(w, "%s(%s)\n", strings.Repeat(" ", width), strings.Join(parts, ", "))
	}
	if view == viewDebug && m.Metadata != nil {
		fmt.Fprintf(w, "%smetadata %s\n", strings.Repeat(" ", width), compactJSON(m.Metadata))
	}
}

// printEvent writes one event with every field: seq, time, type, corr_id
// and the event's own fields in sorted order.
func printEvent(w io.Writer, e *sessions.Event) {
	var b strings.Builder
	fmt.Fprintf(&b, "  #%d %s %s", e.Seq, e.Time.UTC().Format(sessions.TimeFormat), printable(e.Type))
	if e.CorrID != "" {
		fmt.Fprintf(&b, " corr_id=%s", printable(e.CorrID))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Data)) {
		fmt.Fprintf(&b, " %s=%s", printable(k), compactJSON(e.Data[k]))
	}
	fmt.Fprintln(w, b.String())
}

// compactJSON renders a JSON value on one line.
func compactJSON(v any) string {
	s, err := jsonvalue.Format(v)
	if err != nil {
		s = fmt.Sprintf("%v", v)
	}
	return printable(s) // JSON leaves DEL and C1 controls as they are
}

// indentLines indents the lines of s after the first by n spaces.
func indentLines(s string, n int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}
