package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workflow"
)

// The trace of `skein run -v`: one line on stderr per event a session
// logs, as it is logged, so a long agent_loop shows what it is doing:
//
//	[1.20s] chat: turn 2
//	[2.41s] chat: model openai/gpt-4o-mini 1.21s: 1834 tokens in, 52 out (tool_calls)
//	[2.41s] chat: tool weather {"city":"Paris"}
//	[2.45s] chat: tool weather ok 38ms
//	[2.45s] chat: turn 2 done: 1 tool call
//
// The time is since the run started. message events are left out (the
// model, tool and turn lines say what was appended), and so are the
// events that are never stored (text_delta, state). Every value is
// printable: a control character from a model or a tool is escaped.

// tracer writes the trace of a run to w.
type tracer struct {
	w     io.Writer
	color bool
	start time.Time
	now   func() time.Time

	mu sync.Mutex // one line at a time, from any session's goroutine
}

// newTracer returns a tracer on w that colours its lines when color is
// set (see colorOn).
func newTracer(w io.Writer, color bool) *tracer {
	return &tracer{w: w, color: color, start: time.Now(), now: time.Now}
}

// ANSI styles of the trace.
const (
	styleDim    = "\x1b[2m"
	styleBold   = "\x1b[1m"
	styleRed    = "\x1b[31m"
	styleGreen  = "\x1b[32m"
	styleYellow = "\x1b[33m"
	styleBlue   = "\x1b[34m"
	styleCyan   = "\x1b[36m"
	styleReset  = "\x1b[0m"
)

// colorOn reports whether a trace on w is coloured: w is a terminal,
// NO_COLOR is unset or empty (no-color.org) and TERM is not "dumb".
func colorOn(w io.Writer, getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb" && isTerminal(w)
}

// event writes e's line, if it has one.
func (t *tracer) event(e sessions.Event) {
	style, text := traceLine(e)
	if text == "" {
		return
	}
	stamp := fmt.Sprintf("[%.2fs]", t.now().Sub(t.start).Seconds())
	id := printable(e.SessionID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.color {
		fmt.Fprintf(t.w, "%s%s%s %s: %s%s%s\n", styleDim, stamp, styleReset, id, style, text, styleReset)
	} else {
		fmt.Fprintf(t.w, "%s %s: %s\n", stamp, id, text)
	}
}

// traceLine is the style and the text of e's line ("" for an event that
// is not traced).
func traceLine(e sessions.Event) (style, text string) {
	d := traceData(e.Data)
	switch e.Type {
	case sessions.EventMessage, agent.EventTextDelta, agent.EventState, agent.EventChildState:
		return "", ""
	case agent.EventTurnStart:
		return styleBold, "turn " + d.str("iteration")
	case agent.EventTurnEnd:
		return styleBold, fmt.Sprintf("turn %s done: %s", d.str("iteration"), plural(int(d.num("tool_calls")), "tool call"))
	case agent.EventLLMCall:
		text = fmt.Sprintf("model %s/%s %s: %s tokens in, %s out", d.str("provider"), d.str("model"),
			millis(d.num("latency_ms")), d.str("input_tokens"), d.str("output_tokens"))
		if r := d.str("stop_reason"); r != "" {
			text += " (" + r + ")"
		}
		if c := d.num("cost_usd"); c > 0 {
			text += fmt.Sprintf(" $%.6f", c)
		}
		return styleCyan, text
	case agent.EventLLMRetry:
		return styleYellow, fmt.Sprintf("model retry %s (%s, %s) in %s: %s", d.str("attempt"), d.str("provider"),
			d.str("category"), millis(d.num("wait_ms")), d.str("message"))
	case agent.EventToolCall:
		return styleBlue, "tool " + d.str("name") + " " + d.str("arguments")
	case agent.EventToolResult:
		text = fmt.Sprintf("tool %s %s %s", d.str("name"), d.str("status"), millis(d.num("duration_ms")))
		if d.str("status") != "ok" {
			return styleRed, text + ": " + d.str("error")
		}
		return styleGreen, text
	case agent.EventToolProgress:
		text = "tool " + d.str("name") + " progress " + d.str("progress")
		if _, ok := d["total"]; ok {
			text += "/" + d.str("total")
		}
		if m := d.str("message"); m != "" {
			text += ": " + m
		}
		return styleBlue, text
	case agent.EventCompaction:
		return styleYellow, fmt.Sprintf("compaction %s (%s): archived %s, %s -> %s tokens, %s -> %s messages",
			d.str("strategy"), d.str("trigger"), plural(int(d.num("archived")), "message"), d.str("tokens_before"), d.str("tokens_after"),
			d.str("messages_before"), d.str("messages_after"))
	case agent.EventError:
		return styleRed, "error: " + d.str("message")
	case agent.EventCancelled:
		return styleYellow, "cancelled: " + d.str("reason")
	case agent.EventTurnLimit, agent.EventBudgetExhausted, agent.EventCostLimit, agent.EventLoopStuck:
		return styleYellow, e.Type + d.rest()
	case workflow.EventStageStart, workflow.EventStageEnd, workflow.EventWorkflowStart, workflow.EventWorkflowEnd:
		return styleBold, e.Type + d.rest()
	}
	return "", e.Type + d.rest()
}

// traceData reads an event's data for a trace line.
type traceData map[string]any

// str is the value of key, printable on one line, cut after 200
// characters (not bytes: a cut never splits one): a string as it is, a number or a bool as Go prints it, a
// list or a map as compact JSON; "" when missing.
func (d traceData) str(key string) string {
	v, ok := d[key]
	if !ok || v == nil {
		return ""
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		s = string(b)
	default:
		s = fmt.Sprint(x)
	}
	s = printable(s)
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "..."
	}
	return s
}

// num is the numeric value of key (0 when missing).
func (d traceData) num(key string) float64 { return number(d[key]) }

// rest is every key with its value, sorted: " k=v k=v".
func (d traceData) rest() string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", printable(k), d.str(k))
	}
	return b.String()
}

// number is v as a float64 (0 for a value that is not a number).
func number(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return 0
}

// millis writes a duration in milliseconds as "38ms" or "1.21s".
func millis(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.2fs", ms/1000)
}
