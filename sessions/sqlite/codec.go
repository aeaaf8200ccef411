package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
)

// zeroTime is how the zero time.Time is stored: below every real time, so
// it sorts first and is "before" any filter time, as in memory.
const zeroTime = math.MinInt64

// encodeTime returns t as Unix nanoseconds.
func encodeTime(t time.Time) (int64, error) {
	if t.IsZero() {
		return zeroTime, nil
	}
	ns := t.UnixNano()
	if ns == zeroTime || !time.Unix(0, ns).Equal(t) {
		return 0, fmt.Errorf("time %s is outside the storable range (years 1678 to 2262)", t.Format(time.RFC3339))
	}
	return ns, nil
}

// decodeTime is the inverse of encodeTime; times come back in UTC.
func decodeTime(ns int64) time.Time {
	if ns == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// encodeObject returns a JSON object column value: NULL for a nil map.
func encodeObject(m map[string]any) (any, error) {
	if m == nil {
		return nil, nil
	}
	data, err := jsonvalue.Encode(m)
	if err != nil {
		return nil, err
	}
	return string(data), nil
}

// decodeObject is the inverse of encodeObject.
func decodeObject(s sql.NullString) (map[string]any, error) {
	if !s.Valid {
		return nil, nil
	}
	return jsonvalue.DecodeObject([]byte(s.String))
}

// nullString returns s as a column value, NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// storedBody is the stored form of one message: its JSON
// (sessions.Message's MarshalJSON) and that JSON's sessions.Checksum.
type storedBody struct {
	json string
	sum  uint32
}

// encodeMessage returns the stored form of m.
func encodeMessage(m *sessions.Message) (storedBody, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return storedBody{}, err
	}
	return storedBody{string(data), sessions.Checksum(data)}, nil
}

// encodeMessages returns the stored form of msgs.
// An error names the message by what ("message", "appended message") and
// its index in msgs: the index in the session only for a new session.
func encodeMessages(id, what string, msgs []sessions.Message) ([]storedBody, error) {
	out := make([]storedBody, len(msgs))
	for i := range msgs {
		var err error
		if out[i], err = encodeMessage(&msgs[i]); err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("%s %d: %w", what, i, err))
		}
	}
	return out, nil
}

// eventRow is the stored form of a sessions.Event.
type eventRow struct {
	seq    int64
	typ    string
	time   int64
	corrID any
	data   any
	pos    any // a "message" event's message row, or NULL
}

// pairAppended sets the pos of the "message" events among events to the
// rows of the messages they record, appended at positions first,
// first+1, ...: when there is exactly one such event per appended
// message (see sessions.HistoryBackend); otherwise it records none.
func pairAppended(events []eventRow, first int64, appended int) {
	var msgEvents []int
	for i := range events {
		if events[i].typ == sessions.EventMessage {
			msgEvents = append(msgEvents, i)
		}
	}
	if len(msgEvents) != appended {
		return
	}
	for k, i := range msgEvents {
		events[i].pos = first + int64(k)
	}
}

// encodeEvents returns the stored form of events logged on session id.
// An event's SessionID must be id or empty: it is not stored, and loads
// give the session's id.
func encodeEvents(id string, events []sessions.Event) ([]eventRow, error) {
	out := make([]eventRow, len(events))
	for i, e := range events {
		if e.SessionID != "" && e.SessionID != id {
			return nil, sessions.IDError(id, fmt.Errorf("event %d (seq %d) belongs to session %q", i, e.Seq, e.SessionID))
		}
		t, err := encodeTime(e.Time)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("event %d: %w", e.Seq, err))
		}
		data, err := encodeObject(e.Data)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("event %d: %w", e.Seq, err))
		}
		out[i] = eventRow{seq: e.Seq, typ: e.Type, time: t, corrID: nullString(e.CorrID), data: data}
	}
	return out, nil
}

// sessionRow is the stored form of a Record's own fields (not messages,
// events, lineage of children or version bookkeeping).
type sessionRow struct {
	status             string
	created, updated   int64
	summary, metadata  any
	parentID, branched any
	title, firstPrompt any
}

func encodeSession(rec *sessions.Record) (*sessionRow, error) {
	r := &sessionRow{status: string(rec.Status), parentID: nullString(rec.ParentID),
		title: nullString(rec.Title), firstPrompt: nullString(rec.FirstPrompt)}
	var err error
	if r.created, err = encodeTime(rec.CreatedAt); err != nil {
		return nil, sessions.IDError(rec.ID, fmt.Errorf("created_at: %w", err))
	}
	if r.updated, err = encodeTime(rec.UpdatedAt); err != nil {
		return nil, sessions.IDError(rec.ID, fmt.Errorf("updated_at: %w", err))
	}
	if r.metadata, err = encodeObject(rec.Metadata); err != nil {
		return nil, sessions.IDError(rec.ID, fmt.Errorf("metadata: %w", err))
	}
	if rec.Summary != nil {
		r.summary = *rec.Summary
	}
	if rec.BranchedAt != nil {
		r.branched = int64(*rec.BranchedAt)
	}
	return r, nil
}

// encodeHistory returns the stored form of appended, the messages of
// some "message" events among events by seq, in seq order, and sets
// those events' pos to the rows the messages will take: 0, 1, ... (see
// CreateWithHistory).
func encodeHistory(id string, events []eventRow, appended map[int64]sessions.Message) ([]storedBody, error) {
	if len(appended) == 0 {
		return nil, nil
	}
	var bodies []storedBody
	for i := range events {
		m, ok := appended[events[i].seq]
		if !ok {
			continue
		}
		if events[i].typ != sessions.EventMessage {
			return nil, sessions.IDError(id, fmt.Errorf("event %d is a %s event, not a message event: it appended no message", events[i].seq, events[i].typ))
		}
		body, err := encodeMessage(&m)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("message of event %d: %w", events[i].seq, err))
		}
		events[i].pos = int64(len(bodies))
		bodies = append(bodies, body)
	}
	if len(bodies) != len(appended) {
		return nil, sessions.IDError(id, fmt.Errorf("%d appended messages name events the session does not log", len(appended)-len(bodies)))
	}
	return bodies, nil
}
