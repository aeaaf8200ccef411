package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// The forensic log.
//
// A forensic log (WriteForensic, and ForensicWriter for a log written
// while a session runs) is one JSON object per line, told apart by
// "_type", in the record shapes of the common forensic session log:
//
//   - "header", first: id, workflow_name (the session's title), inputs
//     (the string values of its metadata), created_at.
//   - "event", one per event of the session's log, oldest first: seq
//     (1, 2, 3, ... in the file), type, timestamp, corr_id, parent (the
//     seq of the event this one answers: a tool call's assistant message,
//     a tool result's call), agent, step, content, tool, args, success,
//     error, duration_ms and meta (model, latency_ms, tokens_in,
//     tokens_out, prompt, response, thinking, subagent_*, and a
//     security decision's action, reason, rule and refused), each when
//     it applies. A "message" event becomes an event of the message's
//     role (system, user, assistant, tool) with its text as content; an
//     assistant message's meta.prompt is the input the model got since
//     its previous reply (the system prompt when it changed, user
//     messages, tool results) and meta.response the reply (its text and
//     calls). Events that warn (a retried or fallen-back model call, a
//     compaction that archived messages, healed tool calls, a loop ended
//     by a limit) become "warning" records whose content says what
//     happened and whose meta.warning is the event's type; every other
//     event keeps its type. Everything comes from the stored session,
//     in which known secrets are already redacted.
//   - "footer", last: status (running for an active session, complete,
//     failed for an error or a cancelled session), result (the last
//     assistant reply), error (the newest error's text), outputs
//     ({"text": result}), state (the session's status, turns, messages,
//     lineage, token and cost totals, and why it ended), updated_at.
//
// Each record also has "skein": what an import needs to restore the
// session exactly (the header's and footer's session fields, the
// footer's current transcript and event count, each event's own seq,
// type, fields and appended message). Readers of the common format
// ignore it.

// Forensic record types.
const (
	forensicHeader = "header"
	forensicEvent  = "event"
	forensicFooter = "footer"
)

// Footer statuses of a forensic log.
const (
	ForensicRunning  = "running"
	ForensicComplete = "complete"
	ForensicFailed   = "failed"
)

type forensicHeaderJSON struct {
	Type         string            `json:"_type"`
	ID           string            `json:"id"`
	WorkflowName string            `json:"workflow_name"`
	Inputs       map[string]string `json:"inputs"`
	CreatedAt    string            `json:"created_at"`
	Skein        *forensicFields   `json:"skein"`
}

// forensicFields are the session's own fields in a header or footer.
type forensicFields struct {
	Version int `json:"version"`
	sessionFields
	// Footer only: the number of event records and the current messages.
	EventCount *int              `json:"event_count,omitempty"`
	Messages   []message.Message `json:"messages,omitempty"`
}

type forensicEventJSON struct {
	Type       string          `json:"_type"`
	Seq        int64           `json:"seq"`
	EventType  string          `json:"type"`
	Timestamp  string          `json:"timestamp"`
	CorrID     string          `json:"corr_id,omitempty"`
	Parent     int64           `json:"parent,omitempty"`
	Agent      string          `json:"agent,omitempty"`
	AgentRole  string          `json:"agent_role,omitempty"`
	Goal       string          `json:"goal,omitempty"`
	Step       string          `json:"step,omitempty"`
	Content    string          `json:"content,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Success    *bool           `json:"success,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMs int64           `json:"duration_ms,omitempty"`
	Meta       *forensicMeta   `json:"meta,omitempty"`
	Skein      *forensicSkein  `json:"skein,omitempty"`
}

type forensicMeta struct {
	Model          string `json:"model,omitempty"`
	LatencyMs      int64  `json:"latency_ms,omitempty"`
	TokensIn       int64  `json:"tokens_in,omitempty"`
	TokensOut      int64  `json:"tokens_out,omitempty"`
	Prompt         string `json:"prompt,omitempty"`
	Response       string `json:"response,omitempty"`
	Thinking       string `json:"thinking,omitempty"`
	SubAgentName   string `json:"subagent_name,omitempty"`
	SubAgentRole   string `json:"subagent_role,omitempty"`
	SubAgentTask   string `json:"subagent_task,omitempty"`
	SubAgentModel  string `json:"subagent_model,omitempty"`
	SubAgentOutput string `json:"subagent_output,omitempty"`
	// A security decision: action (deny), reason (the refusal's text),
	// rule (what refused it) and refused (the action refused).
	Action  string `json:"action,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Refused string `json:"refused,omitempty"`
	// Warning is the type of the event a warning record stands for.
	Warning string `json:"warning,omitempty"`
}

// forensicSkein is an event record's "skein": the event as logged.
type forensicSkein struct {
	Seq     int64            `json:"seq"`
	Type    string           `json:"type"`
	Data    json.RawMessage  `json:"data,omitempty"`
	Message *message.Message `json:"message,omitempty"`
}

type forensicFooterJSON struct {
	Type      string            `json:"_type"`
	Status    string            `json:"status"`
	Result    string            `json:"result,omitempty"`
	Error     string            `json:"error,omitempty"`
	Outputs   map[string]string `json:"outputs"`
	State     *forensicState    `json:"state,omitempty"`
	UpdatedAt string            `json:"updated_at"`
	Skein     *forensicFields   `json:"skein"`
}

// forensicState is a footer's state: where the session stands.
type forensicState struct {
	Status   sessions.Status `json:"status"`
	Reason   string          `json:"reason,omitempty"` // why it ended (metadata.reason, the newest error)
	Turns    int             `json:"turns"`
	Messages int             `json:"messages"`
	Parent   string          `json:"parent_id,omitempty"`
	Children []string        `json:"child_ids,omitempty"`
	// Totals of the log's llm_call events.
	Calls     int64    `json:"llm_calls"`
	TokensIn  int64    `json:"tokens_in"`
	TokensOut int64    `json:"tokens_out"`
	CostUSD   *float64 `json:"cost_usd,omitempty"`
}

// ForensicWriter writes a forensic log record by record: Header, then
// Event for each event in order, then Footer. It keeps what the seed
// fields of later events refer to (tool calls by id, the latest assistant
// message). Each record is one Write to the underlying writer.
type ForensicWriter struct {
	w             io.Writer
	seq           int64
	calls         map[string]int64  // tool call id -> seq of its tool_call record
	outputs       map[string]string // tool call id -> the text of its result
	lastAssistant int64
	// input is the model's input since the last assistant message (the
	// next one's meta.prompt); system the last system prompt a turn_start
	// recorded.
	input  []string
	system string
	// totals of the llm_call events, for the footer's state
	llmCalls, tokensIn, tokensOut int64
	cost                          float64
	costed                        bool
	buf                           bytes.Buffer
}

// NewForensicWriter returns a writer of one forensic log to w.
func NewForensicWriter(w io.Writer) *ForensicWriter {
	return &ForensicWriter{w: w, calls: map[string]int64{}, outputs: map[string]string{}}
}

// Events returns the number of event records written.
func (fw *ForensicWriter) Events() int64 { return fw.seq }

func (fw *ForensicWriter) line(v any) error {
	fw.buf.Reset()
	enc := json.NewEncoder(&fw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := fw.w.Write(fw.buf.Bytes())
	return err
}

// Header writes the header record of rec's session (its messages and
// events are not used).
func (fw *ForensicWriter) Header(rec *sessions.Record) error {
	f, err := fieldsOf(rec)
	if err != nil {
		return err
	}
	inputs := map[string]string{}
	for k, v := range rec.Metadata {
		if s, ok := v.(string); ok {
			inputs[k] = s
		}
	}
	return fw.line(forensicHeaderJSON{Type: forensicHeader, ID: rec.ID, WorkflowName: rec.Title, Inputs: inputs,
		CreatedAt: formatTime(rec.CreatedAt), Skein: &forensicFields{Version: ExportVersion, sessionFields: f}})
}

// Event writes the record of e; m is the message a "message" event
// appended, or nil when it is not known.
func (fw *ForensicWriter) Event(e *sessions.Event, m *message.Message) error {
	fw.seq++
	r := forensicEventJSON{Type: forensicEvent, Seq: fw.seq, EventType: e.Type, Timestamp: formatTime(e.Time), CorrID: e.CorrID,
		Skein: &forensicSkein{Seq: e.Seq, Type: e.Type}}
	if len(e.Data) > 0 {
		data, err := jsonvalue.Encode(e.Data)
		if err != nil {
			return fmt.Errorf("event %d: %v", e.Seq, err)
		}
		r.Skein.Data = data
	}
	str := func(k string) string { s, _ := e.Data[k].(string); return s }
	num := func(k string) int64 { n, _ := e.Data[k].(int64); return n }
	switch e.Type {
	case sessions.EventMessage:
		if role := str("role"); role != "" {
			r.EventType = role
		}
		if m != nil {
			r.Skein.Message = m
			fw.messageFields(&r, m)
		}
	case "tool_call":
		r.Tool, r.Parent = str("name"), fw.lastAssistant
		if args, ok := e.Data["arguments"].(map[string]any); ok {
			data, err := jsonvalue.Encode(args)
			if err != nil {
				return fmt.Errorf("event %d: arguments: %v", e.Seq, err)
			}
			r.Args = data
		}
		if e.CorrID != "" {
			fw.calls[e.CorrID] = fw.seq
		}
	case "tool_result":
		ok := str("status") == "ok"
		r.Tool, r.Success, r.Error, r.DurationMs = str("name"), &ok, str("error"), num("duration_ms")
		r.Parent, r.Content = fw.calls[e.CorrID], fw.outputs[e.CorrID]
	case "llm_call":
		r.Meta = &forensicMeta{Model: str("model"), LatencyMs: num("latency_ms"), TokensIn: num("input_tokens"), TokensOut: num("output_tokens")}
		fw.llmCalls++
		fw.tokensIn += r.Meta.TokensIn
		fw.tokensOut += r.Meta.TokensOut
		if c, ok := e.Data["cost_usd"].(float64); ok {
			fw.cost, fw.costed = fw.cost+c, true
		}
	case "turn_start":
		if sys := str("system"); sys != "" && sys != fw.system {
			fw.system = sys
			fw.input = append(fw.input, "system: "+sys)
		}
	case "subagent_start":
		r.Agent, r.AgentRole = str("child_id"), str("role")
		r.Meta = &forensicMeta{SubAgentName: str("child_id"), SubAgentRole: str("role"), SubAgentTask: str("task"), SubAgentModel: str("model")}
	case "subagent_end":
		ok := str("status") == "done"
		r.Agent, r.AgentRole, r.Success, r.Error = str("child_id"), str("role"), &ok, str("error")
		r.Meta = &forensicMeta{SubAgentName: str("child_id"), SubAgentRole: str("role"), SubAgentModel: str("model"), SubAgentOutput: str("output"),
			TokensIn: num("input_tokens"), TokensOut: num("output_tokens")}
	case "security_decision":
		f := false
		r.Tool, r.Success, r.Parent, r.Content = str("tool"), &f, fw.calls[e.CorrID], str("reason")
		r.Meta = &forensicMeta{Action: str("decision"), Reason: str("reason"), Rule: str("rule"), Refused: str("action")}
	case "workflow_start", "workflow_end", "stage_start", "stage_end":
		r.Step, r.Error = str("node"), str("error")
		if status := str("status"); status != "" {
			ok := status == "completed" || status == "done"
			r.Success = &ok
		}
	case "error", "cancelled":
		f := false
		r.Error, r.Success = eventError(e), &f
	}
	if warning := warningText(e); warning != "" {
		r.EventType, r.Content = "warning", warning
		if r.Meta == nil {
			r.Meta = &forensicMeta{}
		}
		r.Meta.Warning = e.Type
	}
	return fw.line(r)
}

// eventError is the text of an error or cancelled event: the loop's
// "message", a workflow's "error", a cancellation's "reason".
func eventError(e *sessions.Event) string {
	for _, k := range []string{"message", "error"} {
		if s, ok := e.Data[k].(string); ok && s != "" {
			return s
		}
	}
	if s, ok := e.Data["reason"].(string); ok && s != "" {
		return "cancelled: " + s
	}
	return ""
}

// warningText is what a warning record says of e, or "" when e does not
// warn: a model call retried or answered by a fallback, a compaction
// that archived messages, tool calls healed, a loop ended by a limit.
func warningText(e *sessions.Event) string {
	str := func(k string) string { s, _ := e.Data[k].(string); return s }
	num := func(k string) int64 { n, _ := e.Data[k].(int64); return n }
	switch e.Type {
	case "llm_retry":
		return fmt.Sprintf("model call retried (attempt %d, %s from %s, waiting %d ms): %s", num("attempt"), str("category"), str("provider"), num("wait_ms"), str("message"))
	case "fallback":
		return fmt.Sprintf("model call fell back from %s to %s (%s)", str("from"), str("to"), str("reason"))
	case sessions.EventContextCompacted:
		if n := num("archived"); n > 0 {
			return fmt.Sprintf("compaction (%s) archived %d messages into a summary: %d to %d tokens", str("strategy"), n, num("tokens_before"), num("tokens_after"))
		}
	case sessions.EventHealed:
		return fmt.Sprintf("tool calls left without results were closed with error results (%s)", str("reason"))
	case "loop_stuck":
		return fmt.Sprintf("loop stuck: %d nudges without the done sentinel", num("nudges"))
	case "budget_exhausted":
		return fmt.Sprintf("loop ended: max_iterations (%d) reached", num("max_iterations"))
	case "cost_limit":
		return "loop ended: a cost budget would be exceeded"
	case "turn_limit":
		return fmt.Sprintf("loop refused: the session reached its turn cap of %d", num("max_turns"))
	}
	return ""
}

// messageFields sets the seed fields of a message's record.
func (fw *ForensicWriter) messageFields(r *forensicEventJSON, m *message.Message) {
	r.Content = m.TextContent()
	switch m.Role {
	case message.RoleAssistant:
		fw.lastAssistant = r.Seq
		meta := &forensicMeta{Model: m.Model, Prompt: strings.Join(fw.input, "\n\n"), Response: response(r.Content, m.ToolCalls)}
		fw.input = fw.input[:0]
		meta.TokensIn, _ = m.Usage["input_tokens"].(int64)
		meta.TokensOut, _ = m.Usage["output_tokens"].(int64)
		var thinking []string
		for _, b := range m.Blocks {
			if b.Type == message.BlockThinking {
				thinking = append(thinking, b.Thinking)
			}
		}
		meta.Thinking = strings.Join(thinking, "\n")
		if *meta != (forensicMeta{}) {
			r.Meta = meta
		}
	case message.RoleTool:
		ok := !m.IsError
		r.Tool, r.Success, r.Parent = m.Name, &ok, fw.calls[m.ToolCallID]
		fw.outputs[m.ToolCallID] = r.Content
		fw.input = append(fw.input, "tool "+m.Name+": "+r.Content)
	default:
		fw.input = append(fw.input, m.Role+": "+r.Content)
	}
}

// response is an assistant message's meta.response: its text, then a line
// per tool call with the call's JSON arguments.
func response(text string, calls []message.ToolCall) string {
	if len(calls) == 0 {
		return text
	}
	lines := make([]string, 0, len(calls)+1)
	if text != "" {
		lines = append(lines, text)
	}
	for _, c := range calls {
		args, err := jsonvalue.Encode(map[string]any(c.Arguments))
		if err != nil {
			args = []byte("{}")
		}
		lines = append(lines, "call "+c.Name+" "+string(args))
	}
	return strings.Join(lines, "\n")
}

// Footer writes the footer record: rec's status and current messages
// (its events are not used).
func (fw *ForensicWriter) Footer(rec *sessions.Record, lastError string) error {
	f, err := fieldsOf(rec)
	if err != nil {
		return err
	}
	count := int(fw.seq)
	msgs := rec.Messages
	if msgs == nil {
		msgs = []message.Message{}
	}
	r := forensicFooterJSON{Type: forensicFooter, Status: ForensicStatus(rec.Status), Outputs: map[string]string{},
		UpdatedAt: formatTime(rec.UpdatedAt), Skein: &forensicFields{Version: ExportVersion, sessionFields: f, EventCount: &count, Messages: msgs}}
	for i := len(rec.Messages) - 1; i >= 0; i-- {
		if m := &rec.Messages[i]; m.Role == message.RoleAssistant && !m.HasToolCalls() {
			r.Result = m.TextContent()
			r.Outputs["text"] = r.Result
			break
		}
	}
	if r.Status == ForensicFailed {
		r.Error = lastError
		if r.Error == "" {
			r.Error = string(rec.Status)
		}
	}
	st := &forensicState{Status: rec.Status, Turns: rec.Turns, Messages: len(rec.Messages), Parent: rec.ParentID, Children: rec.ChildIDs,
		Calls: fw.llmCalls, TokensIn: fw.tokensIn, TokensOut: fw.tokensOut}
	if fw.costed {
		st.CostUSD = &fw.cost
	}
	if reason, ok := rec.Metadata["reason"].(string); ok && reason != "" {
		st.Reason = reason
	} else if rec.Status != sessions.StatusActive && rec.Status != sessions.StatusCompleted {
		st.Reason = r.Error
	}
	r.State = st
	return fw.line(r)
}

// ForensicStatus maps a session status to a forensic footer status.
func ForensicStatus(s sessions.Status) string {
	switch s {
	case sessions.StatusActive:
		return ForensicRunning
	case sessions.StatusCompleted:
		return ForensicComplete
	}
	return ForensicFailed
}

// LastError returns the error of the newest "error" or "cancelled" event
// of events, for a forensic footer.
func LastError(events []sessions.Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		e := &events[i]
		if e.Type != "error" && e.Type != "cancelled" {
			continue
		}
		if s := eventError(e); s != "" {
			return s
		}
		return e.Type
	}
	return ""
}

// WriteForensic writes rec as a forensic log; appended holds the
// messages of its "message" events by seq (see sessions.HistoryBackend), or nil.
func WriteForensic(w io.Writer, rec *sessions.Record, appended map[int64]message.Message) error {
	bw := bufio.NewWriter(w)
	fw := NewForensicWriter(bw)
	if err := fw.Header(rec); err != nil {
		return err
	}
	for i := range rec.Events {
		e := &rec.Events[i]
		var m *message.Message
		if msg, ok := appended[e.Seq]; ok && e.Type == sessions.EventMessage {
			m = &msg
		}
		if err := fw.Event(e, m); err != nil {
			return err
		}
	}
	if err := fw.Footer(rec, LastError(rec.Events)); err != nil {
		return err
	}
	return bw.Flush()
}

// isForensicHeader reports whether a header record is a forensic log's
// (it has workflow_name, which a JSONL export's header has not).
func isForensicHeader(line []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	_, ok := probe["workflow_name"]
	return ok
}

// readForensic reads a forensic log whose header line is first. It
// refuses event seqs with gaps or repeats, a missing footer, and a log
// without the "skein" fields an import needs.
func readForensic(first []byte, br *bufio.Reader) (*sessions.Record, map[int64]message.Message, error) {
	var header forensicHeaderJSON
	if err := json.Unmarshal(first, &header); err != nil {
		return nil, nil, fmt.Errorf("forensic header: %v", err)
	}
	if header.Skein == nil {
		return nil, nil, errors.New(`forensic header has no "skein" fields: only logs skein wrote can be imported`)
	}
	if err := checkVersion(header.Skein.Version); err != nil {
		return nil, nil, err
	}
	var events []sessions.Event
	appended := map[int64]message.Message{}
	var footer *forensicFooterJSON
	err := eachLine(br, func(line []byte) error {
		if footer != nil {
			return errors.New("a record after the footer")
		}
		var probe struct {
			Type string `json:"_type"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return err
		}
		switch probe.Type {
		case forensicEvent:
			var r forensicEventJSON
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			if want := int64(len(events) + 1); r.Seq != want {
				if r.Seq < want {
					return fmt.Errorf("event seq %d repeats (the event before it has seq %d): seqs must be 1, 2, 3, ... without gaps or repeats", r.Seq, want-1)
				}
				return fmt.Errorf("event seq %d follows %d: seqs %d to %d are missing (seqs must be 1, 2, 3, ... without gaps or repeats)", r.Seq, want-1, want, r.Seq-1)
			}
			e, m, err := r.event()
			if err != nil {
				return fmt.Errorf("event %d: %w", r.Seq, err)
			}
			events = append(events, e)
			if m != nil {
				appended[e.Seq] = *m
			}
		case forensicFooter:
			footer = &forensicFooterJSON{}
			return json.Unmarshal(line, footer)
		case forensicHeader:
			return errors.New("a second header")
		default:
			return fmt.Errorf("unknown record type '%s' (expected event or footer)", sessions.Escape(probe.Type))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	switch {
	case footer == nil:
		return nil, nil, fmt.Errorf("no footer after %d events: the log is truncated, or its run has not finished", len(events))
	case footer.Skein == nil || footer.Skein.EventCount == nil:
		return nil, nil, errors.New(`forensic footer has no "skein" fields: only logs skein wrote can be imported`)
	case *footer.Skein.EventCount != len(events):
		return nil, nil, fmt.Errorf("the footer counts %d events, the log has %d", *footer.Skein.EventCount, len(events))
	}
	if err := checkVersion(footer.Skein.Version); err != nil {
		return nil, nil, err
	}
	rec, err := footer.Skein.record()
	if err != nil {
		return nil, nil, err
	}
	if rec.ID != header.ID {
		return nil, nil, fmt.Errorf("the footer is of session %q, the header of %q", rec.ID, header.ID)
	}
	rec.Messages, rec.Events = footer.Skein.Messages, events
	if len(appended) == 0 {
		appended = nil
	}
	return rec, appended, checkImported(rec, appended)
}

// event returns the logged event (and appended message) an event record
// carries in its "skein" fields.
func (r *forensicEventJSON) event() (sessions.Event, *message.Message, error) {
	if r.Skein == nil {
		return sessions.Event{}, nil, errors.New(`no "skein" fields: only logs skein wrote can be imported`)
	}
	e := sessions.Event{Seq: r.Skein.Seq, Type: sessions.EventType(r.Skein.Type), CorrID: r.CorrID}
	var err error
	if e.Time, err = time.Parse(sessions.TimeFormat, r.Timestamp); err != nil {
		return e, nil, fmt.Errorf("timestamp: %v", err)
	}
	if len(r.Skein.Data) > 0 {
		if e.Data, err = jsonvalue.DecodeObject(r.Skein.Data); err != nil {
			return e, nil, fmt.Errorf("data: %v", err)
		}
	}
	if r.Skein.Message != nil && e.Type != sessions.EventMessage {
		return e, nil, fmt.Errorf("a %s event cannot carry a message", e.Type)
	}
	return e, r.Skein.Message, nil
}
