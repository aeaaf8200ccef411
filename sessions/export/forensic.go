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
//     tokens_out, thinking, subagent_*), each when it applies. A
//     "message" event becomes an event of the message's role (system,
//     user, assistant, tool) with its text as content; every other event
//     keeps its type.
//   - "footer", last: status (running for an active session, complete,
//     failed for an error or a cancelled session), result (the last
//     assistant reply), error, outputs ({"text": result}), updated_at.
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
	EventCount *int               `json:"event_count,omitempty"`
	Messages   []sessions.Message `json:"messages,omitempty"`
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
	Model         string `json:"model,omitempty"`
	LatencyMs     int64  `json:"latency_ms,omitempty"`
	TokensIn      int64  `json:"tokens_in,omitempty"`
	TokensOut     int64  `json:"tokens_out,omitempty"`
	Thinking      string `json:"thinking,omitempty"`
	SubAgentName  string `json:"subagent_name,omitempty"`
	SubAgentTask  string `json:"subagent_task,omitempty"`
	SubAgentModel string `json:"subagent_model,omitempty"`
}

// forensicSkein is an event record's "skein": the event as logged.
type forensicSkein struct {
	Seq     int64             `json:"seq"`
	Type    string            `json:"type"`
	Data    json.RawMessage   `json:"data,omitempty"`
	Message *sessions.Message `json:"message,omitempty"`
}

type forensicFooterJSON struct {
	Type      string            `json:"_type"`
	Status    string            `json:"status"`
	Result    string            `json:"result,omitempty"`
	Error     string            `json:"error,omitempty"`
	Outputs   map[string]string `json:"outputs"`
	UpdatedAt string            `json:"updated_at"`
	Skein     *forensicFields   `json:"skein"`
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
	buf           bytes.Buffer
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
func (fw *ForensicWriter) Event(e *sessions.Event, m *sessions.Message) error {
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
	case "subagent_start":
		r.Agent = str("child_id")
		r.Meta = &forensicMeta{SubAgentName: str("child_id"), SubAgentTask: str("task")}
	case "subagent_end":
		ok := str("status") == "done"
		r.Agent, r.Success = str("child_id"), &ok
		r.Meta = &forensicMeta{SubAgentName: str("child_id"), TokensIn: num("input_tokens"), TokensOut: num("output_tokens")}
	case "workflow_start", "workflow_end", "stage_start", "stage_end":
		r.Step, r.Error = str("node"), str("error")
		if status := str("status"); status != "" {
			ok := status == "completed" || status == "done"
			r.Success = &ok
		}
	case "error", "cancelled":
		r.Error = str("error")
		if r.Error == "" {
			r.Error = str("reason")
		}
	}
	return fw.line(r)
}

// messageFields sets the seed fields of a message's record.
func (fw *ForensicWriter) messageFields(r *forensicEventJSON, m *sessions.Message) {
	r.Content = m.TextContent()
	switch m.Role {
	case sessions.RoleAssistant:
		fw.lastAssistant = r.Seq
		meta := &forensicMeta{Model: m.Model}
		meta.TokensIn, _ = m.Usage["input_tokens"].(int64)
		meta.TokensOut, _ = m.Usage["output_tokens"].(int64)
		var thinking []string
		for _, b := range m.Blocks {
			if b.Type == sessions.BlockThinking {
				thinking = append(thinking, b.Thinking)
			}
		}
		meta.Thinking = strings.Join(thinking, "\n")
		if *meta != (forensicMeta{}) {
			r.Meta = meta
		}
	case sessions.RoleTool:
		ok := !m.IsError
		r.Tool, r.Success, r.Parent = m.Name, &ok, fw.calls[m.ToolCallID]
		fw.outputs[m.ToolCallID] = r.Content
	}
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
		msgs = []sessions.Message{}
	}
	r := forensicFooterJSON{Type: forensicFooter, Status: ForensicStatus(rec.Status), Outputs: map[string]string{},
		UpdatedAt: formatTime(rec.UpdatedAt), Skein: &forensicFields{Version: ExportVersion, sessionFields: f, EventCount: &count, Messages: msgs}}
	for i := len(rec.Messages) - 1; i >= 0; i-- {
		if m := &rec.Messages[i]; m.Role == sessions.RoleAssistant && !m.HasToolCalls() {
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
		if s, ok := e.Data["error"].(string); ok {
			return s
		}
		if s, ok := e.Data["reason"].(string); ok {
			return "cancelled: " + s
		}
		return e.Type
	}
	return ""
}

// WriteForensic writes rec as a forensic log; appended holds the
// messages of its "message" events by seq (see sessions.HistoryBackend), or nil.
func WriteForensic(w io.Writer, rec *sessions.Record, appended map[int64]sessions.Message) error {
	bw := bufio.NewWriter(w)
	fw := NewForensicWriter(bw)
	if err := fw.Header(rec); err != nil {
		return err
	}
	for i := range rec.Events {
		e := &rec.Events[i]
		var m *sessions.Message
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
func readForensic(first []byte, br *bufio.Reader) (*sessions.Record, map[int64]sessions.Message, error) {
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
	appended := map[int64]sessions.Message{}
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
			return fmt.Errorf("unknown record type %q (expected event or footer)", probe.Type)
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
func (r *forensicEventJSON) event() (sessions.Event, *sessions.Message, error) {
	if r.Skein == nil {
		return sessions.Event{}, nil, errors.New(`no "skein" fields: only logs skein wrote can be imported`)
	}
	e := sessions.Event{Seq: r.Skein.Seq, Type: r.Skein.Type, CorrID: r.CorrID}
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
