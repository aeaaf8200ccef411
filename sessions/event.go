package sessions

import (
	"fmt"
	"slices"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions/message"
)

// Event types written by this package. The agent loop and the compaction
// engine define the others (turn_start, llm_call, tool_call, ...); the log
// accepts any type.
const (
	EventMessage = "message"           // a message was appended to the transcript
	EventReset   = EventContextCleared // agent_session_reset: the transcript and summary were dropped
	EventTrim    = "trim"              // the transcript was cut to its newest messages
	EventFork    = "fork"              // a session was forked (logged on source and child)
	EventHealed  = "healed"            // open tool calls were closed with error results
	EventStatus  = "status"            // the session's status changed
	EventRewind  = "rewind"            // the last user turns were dropped from the transcript
)

// Event types named by the agent-session specification: its session
// lifecycle (session:*) and steering (agent:*) events. The loop and the
// session builtins log them; they are defined here so that the store can
// read the names they replace (see EventType).
const (
	EventSessionStarted    = "session:started"          // a session was created (its first event; the store logs it, see Info.Started)
	EventDirectiveInjected = "agent:directive_injected" // queued feedback reached the loop
	EventContextCompacted  = "agent:context_compacted"  // a compaction replaced the transcript with a summary
	EventContextCleared    = "agent:context_cleared"    // the transcript and summary were dropped (a reset)
)

// EventType returns the current name of a stored event type: an old name
// (session_started, feedback_injected, compaction, reset) is read as the
// name that replaced it, so a log written before the rename reads as one
// written now; any other type is returned unchanged.
func EventType(stored string) string {
	switch stored { // the old names (a switch: a map would be built at every start)
	case "session_started":
		return EventSessionStarted
	case "feedback_injected":
		return EventDirectiveInjected
	case "compaction":
		return EventContextCompacted
	case "reset":
		return EventContextCleared
	}
	return stored
}

// Event is one entry of a session's append-only event log.
//
// Seq is assigned by the session (1, 2, 3, ... per session) and Time by the
// store's clock when the event is appended. Data holds the type-specific
// fields as JSON values; its keys never shadow the envelope keys
// (type, session_id, seq, timestamp, corr_id).
type Event struct {
	Seq       int64
	Type      string
	SessionID string
	Time      time.Time
	CorrID    string
	Data      map[string]any
	// Message is the message a "message" event appended, as stored, on
	// the events a store gives its observers of committed events
	// (Store.Observe); nil elsewhere. It is not part of the event's
	// stored or JSON form.
	Message *message.Message
}

// envelopeKeys are the keys of an event's JSON form that Data must not use.
var envelopeKeys = []string{"type", "session_id", "seq", "timestamp", "corr_id"}

// NewEvent returns an unsequenced event of the given type with data.
func NewEvent(typ string, data map[string]any) Event {
	return Event{Type: typ, Data: data}
}

// TimeFormat is how timestamps are written in snapshots, events and exports.
const TimeFormat = time.RFC3339Nano

// Fields returns the event as one flat map: the envelope keys plus Data.
// The result is freshly allocated but shares nested values with Data.
func (e *Event) Fields() map[string]any {
	out := make(map[string]any, len(e.Data)+5)
	for k, v := range e.Data {
		out[k] = v
	}
	out["type"] = e.Type
	out["session_id"] = e.SessionID
	out["seq"] = e.Seq
	out["timestamp"] = e.Time.UTC().Format(TimeFormat)
	if e.CorrID != "" {
		out["corr_id"] = e.CorrID
	}
	return out
}

// MarshalJSON encodes the event as one flat object (see Fields), with
// floats encoded as jsonvalue.Encode writes them.
func (e Event) MarshalJSON() ([]byte, error) {
	return jsonvalue.Encode(e.Fields())
}

// UnmarshalJSON decodes the flat form written by MarshalJSON.
func (e *Event) UnmarshalJSON(data []byte) error {
	m, err := jsonvalue.DecodeObject(data)
	if err != nil {
		return err
	}
	return e.SetFields(m)
}

// SetFields sets e from its flat form m (see Fields), which it takes
// over: the envelope keys are removed from it and the rest becomes Data.
func (e *Event) SetFields(m map[string]any) error {
	var err error
	*e = Event{}
	typ, _ := m["type"].(string)
	if typ == "" {
		return fmt.Errorf("event has no string 'type'")
	}
	e.Type = EventType(typ)
	e.SessionID, _ = m["session_id"].(string)
	e.CorrID, _ = m["corr_id"].(string)
	switch seq := m["seq"].(type) {
	case int64:
		e.Seq = seq
	default:
		return fmt.Errorf("event has no integer 'seq'")
	}
	if ts, ok := m["timestamp"].(string); ok {
		if e.Time, err = time.Parse(TimeFormat, ts); err != nil {
			return fmt.Errorf("event timestamp: %v", err)
		}
	}
	for _, k := range envelopeKeys {
		delete(m, k)
	}
	if len(m) > 0 {
		e.Data = m
	}
	return nil
}

// CheckEvent checks what an event must be before it is logged: a type,
// no Data key that shadows an envelope key, and JSON values.
func CheckEvent(e *Event) error {
	if e.Type == "" {
		return fmt.Errorf("event has no type")
	}
	for k, v := range e.Data {
		if slices.Contains(envelopeKeys, k) {
			return fmt.Errorf("event %s: data key %q is reserved", e.Type, k)
		}
		if err := jsonvalue.Check(v); err != nil {
			return fmt.Errorf("event %s: field %q: %v", e.Type, k, err)
		}
	}
	return nil
}
