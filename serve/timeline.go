package serve

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// The timeline of a session (ext): GET /api/sessions/{id}/timeline reads
// the session's stored event log and returns its loop turns, each with
// the model calls, tool calls and sub-agents in it (durations, tokens,
// cost), the totals, and why the session ended. The viewer's timeline
// and debug views show it.

type timelineJSON struct {
	SessionID string          `json:"sessionId"`
	Turns     []timelineTurn  `json:"turns"`
	Totals    timelineTotals  `json:"totals"`
	Ended     *timelineEnding `json:"ended,omitempty"`
}

// timelineTurn is one loop iteration (a turn_start to its turn_end); a
// call outside any loop (llm_call) is in a turn of iteration 0.
type timelineTurn struct {
	Iteration  int64          `json:"iteration"`
	Seq        int64          `json:"seq"`
	Start      string         `json:"start"`
	DurationMs int64          `json:"durationMs"`
	Open       bool           `json:"open,omitempty"` // no turn_end yet: running, or cut short
	Items      []timelineItem `json:"items"`
	// What the turn_start recorded of the request (debug view): the
	// system prompt sent, the tools' names and schemas, the estimated
	// tokens.
	System          string `json:"system,omitempty"`
	Tools           []any  `json:"tools,omitempty"`
	EstimatedTokens int64  `json:"estimatedTokens,omitempty"`
}

// timelineItem is a model call, a tool call, a sub-agent or a notable
// event (retry, refusal, compaction, error).
type timelineItem struct {
	Kind         string   `json:"kind"` // model, tool, subagent, retry, security, compaction, error, note
	Seq          int64    `json:"seq"`
	Time         string   `json:"time"`
	Name         string   `json:"name"`
	Provider     string   `json:"provider,omitempty"`
	DurationMs   int64    `json:"durationMs"`
	InputTokens  int64    `json:"inputTokens,omitempty"`
	OutputTokens int64    `json:"outputTokens,omitempty"`
	CostUSD      *float64 `json:"costUsd,omitempty"`
	Status       string   `json:"status,omitempty"`
	Detail       string   `json:"detail,omitempty"`
	CallID       string   `json:"callId,omitempty"`
	ChildID      string   `json:"childId,omitempty"`
}

type timelineTotals struct {
	Turns        int     `json:"turns"`
	ModelCalls   int     `json:"modelCalls"`
	ToolCalls    int     `json:"toolCalls"`
	ToolErrors   int     `json:"toolErrors"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
	CostKnown    bool    `json:"costKnown"` // every model call was priced
	ModelMs      int64   `json:"modelMs"`   // time in model calls
	ToolMs       int64   `json:"toolMs"`    // time in tools
}

// timelineEnding says why a session ended (or why its last loop did).
type timelineEnding struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Seq    int64  `json:"seq,omitempty"`
}

// sessionTimeline handles GET /api/sessions/{id}/timeline.
func (s *Server) sessionTimeline(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rec, err := s.meta(r.Context(), id)
	if err != nil {
		return err
	}
	events, err := sessions.EventsAfter(r.Context(), s.store.Backend(), id, 0)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, buildTimeline(rec, events))
	return nil
}

// buildTimeline folds a session's event log into its timeline.
func buildTimeline(rec *sessions.Record, events []sessions.Event) *timelineJSON {
	t := &timelineJSON{SessionID: rec.ID, Turns: []timelineTurn{}}
	t.Totals.CostKnown = true
	var cur *timelineTurn
	var curStart time.Time
	turn := func(e *sessions.Event) *timelineTurn {
		if cur == nil {
			t.Turns = append(t.Turns, timelineTurn{Seq: e.Seq, Start: formatTime(e.Time), Items: []timelineItem{}})
			cur, curStart = &t.Turns[len(t.Turns)-1], e.Time
		}
		return cur
	}
	var lastEnding *timelineEnding
	for i := range events {
		e := &events[i]
		str := func(k string) string { v, _ := e.Data[k].(string); return v }
		num := func(k string) int64 { v, _ := e.Data[k].(int64); return v }
		item := timelineItem{Seq: e.Seq, Time: formatTime(e.Time), CallID: e.CorrID}
		switch e.Type {
		case "turn_start":
			t.Turns = append(t.Turns, timelineTurn{Iteration: num("iteration"), Seq: e.Seq, Start: formatTime(e.Time), Open: true, Items: []timelineItem{},
				System: str("system"), EstimatedTokens: num("estimated_tokens")})
			cur, curStart = &t.Turns[len(t.Turns)-1], e.Time
			if tools, ok := e.Data["tools"].([]any); ok {
				cur.Tools = tools
			}
			continue
		case "turn_end":
			if cur != nil {
				cur.DurationMs, cur.Open = e.Time.Sub(curStart).Milliseconds(), false
				cur = nil
			}
			continue
		case "llm_call":
			item.Kind, item.Name, item.Provider, item.DurationMs = "model", str("model"), str("provider"), num("latency_ms")
			item.InputTokens, item.OutputTokens, item.Status = num("input_tokens"), num("output_tokens"), str("stop_reason")
			if c, ok := e.Data["cost_usd"].(float64); ok {
				item.CostUSD = &c
				t.Totals.CostUSD += c
			} else {
				t.Totals.CostKnown = false
			}
			t.Totals.ModelCalls++
			t.Totals.InputTokens += item.InputTokens
			t.Totals.OutputTokens += item.OutputTokens
			t.Totals.ModelMs += item.DurationMs
		case "tool_result":
			item.Kind, item.Name, item.DurationMs, item.Status, item.Detail = "tool", str("name"), num("duration_ms"), str("status"), str("error")
			t.Totals.ToolCalls++
			t.Totals.ToolMs += item.DurationMs
			if item.Status != "ok" {
				t.Totals.ToolErrors++
			}
		case "subagent_start":
			item.Kind, item.Name, item.ChildID, item.Status, item.Detail = "subagent", str("task"), str("child_id"), "running", str("model")
		case "subagent_end":
			// completes its subagent_start's item
			if cur != nil {
				for j := len(cur.Items) - 1; j >= 0; j-- {
					if it := &cur.Items[j]; it.Kind == "subagent" && it.ChildID == str("child_id") {
						it.Status, it.InputTokens, it.OutputTokens = str("status"), num("input_tokens"), num("output_tokens")
						if st, err := time.Parse(sessions.TimeFormat, it.Time); err == nil {
							it.DurationMs = e.Time.Sub(st).Milliseconds()
						}
						if msg := str("error"); msg != "" {
							it.Detail = msg
						}
						break
					}
				}
			}
			continue
		case "llm_retry":
			item.Kind, item.Name, item.Provider, item.DurationMs = "retry", str("category"), str("provider"), num("wait_ms")
			item.Detail = fmt.Sprintf("attempt %d: %s", num("attempt"), str("message"))
		case "fallback":
			item.Kind, item.Name, item.Detail = "retry", "fallback", fmt.Sprintf("%s → %s (%s)", str("from"), str("to"), str("reason"))
		case "security_decision":
			item.Kind, item.Name, item.Status, item.Detail = "security", str("tool"), str("decision"), str("reason")
		case sessions.EventContextCompacted:
			item.Kind, item.Name = "compaction", str("strategy")
			item.Detail = fmt.Sprintf("%d → %d tokens, %d messages archived (%s)", num("tokens_before"), num("tokens_after"), num("archived"), str("trigger"))
		case "error":
			item.Kind, item.Name, item.Detail = "error", cmp.Or(str("category"), "error"), str("message")
			lastEnding = &timelineEnding{Status: "error", Reason: str("message"), Seq: e.Seq}
		case "cancelled":
			lastEnding = &timelineEnding{Status: "cancelled", Reason: "cancelled: " + str("reason"), Seq: e.Seq}
			item.Kind, item.Name, item.Detail = "error", "cancelled", str("reason")
		case "budget_exhausted":
			lastEnding = &timelineEnding{Status: "budget_exhausted", Reason: fmt.Sprintf("the loop made max_iterations (%d) model calls", num("max_iterations")), Seq: e.Seq}
			item.Kind, item.Name, item.Detail = "note", e.Type, lastEnding.Reason
		case "cost_limit":
			lastEnding = &timelineEnding{Status: "budget_exhausted", Reason: fmt.Sprintf("the next call would have passed max_cost_usd (%v)", e.Data["max_cost_usd"]), Seq: e.Seq}
			item.Kind, item.Name, item.Detail = "note", e.Type, lastEnding.Reason
		case "turn_limit":
			lastEnding = &timelineEnding{Status: "turn_limit", Reason: fmt.Sprintf("the session reached its turn cap of %d", num("max_turns")), Seq: e.Seq}
			item.Kind, item.Name, item.Detail = "note", e.Type, lastEnding.Reason
		case "loop_stuck":
			lastEnding = &timelineEnding{Status: "stuck", Reason: fmt.Sprintf("%d nudges without the done sentinel", num("nudges")), Seq: e.Seq}
			item.Kind, item.Name, item.Detail = "note", e.Type, lastEnding.Reason
		default:
			continue
		}
		tt := turn(e)
		tt.Items = append(tt.Items, item)
	}
	for i := range t.Turns {
		if t.Turns[i].Iteration > 0 {
			t.Totals.Turns++
		}
	}
	t.Ended = ending(rec, lastEnding)
	return t
}

// ending says why a session that is not active ended (the reason in its
// metadata, else its last error, cancellation or limit), and for an
// active one how its last loop ended when a limit or error ended it.
func ending(rec *sessions.Record, last *timelineEnding) *timelineEnding {
	if reason := strOf(rec.Metadata, "reason"); reason != "" {
		return &timelineEnding{Status: string(rec.Status), Reason: reason}
	}
	switch {
	case rec.Status == sessions.StatusActive:
		return last
	case last != nil:
		return &timelineEnding{Status: string(rec.Status), Reason: last.Reason, Seq: last.Seq}
	case rec.Status == sessions.StatusCompleted:
		return &timelineEnding{Status: string(rec.Status), Reason: "closed"}
	}
	return &timelineEnding{Status: string(rec.Status), Reason: string(rec.Status)}
}
