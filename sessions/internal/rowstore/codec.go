package rowstore

import (
	"fmt"
	"math"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// Stored values. Nullable columns are pointers (nil is SQL NULL), which
// both database/sql and pgx take as query arguments.

// zeroTime is how the zero time.Time is stored: below every real time, so
// it sorts first and is "before" any filter time, as in memory.
const zeroTime = math.MinInt64

// EncodeTime returns t as Unix nanoseconds, the stored form of every time.
func EncodeTime(t time.Time) (int64, error) {
	if t.IsZero() {
		return zeroTime, nil
	}
	ns := t.UnixNano()
	if ns == zeroTime || !time.Unix(0, ns).Equal(t) {
		return 0, fmt.Errorf("time %s is outside the storable range (years 1678 to 2262)", t.Format(time.RFC3339))
	}
	return ns, nil
}

// DecodeTime is the inverse of EncodeTime; times come back in UTC.
func DecodeTime(ns int64) time.Time {
	if ns == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// DecodeObject returns the JSON object data (package jsonvalue): data
// nil (a NULL column) is a nil map.
func DecodeObject(data []byte) (map[string]any, error) {
	if data == nil {
		return nil, nil
	}
	return jsonvalue.DecodeObject(data)
}

// NullString returns s as a column value, nil (NULL) when empty.
func NullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Body is the stored form of one message: its JSON (message.Message's
// MarshalJSON) and that JSON's sessions.Checksum, computed once when the
// message is appended and verified on every load (OpenBody); or, sealed
// with the store key, the sealed JSON string and no checksum (Sealed).
type Body struct {
	JSON   string
	Sum    uint32
	Sealed bool
}

// EncodeMessage returns the stored form of m, sealed with k unless k is
// nil.
func EncodeMessage(k *storekey.Key, m *message.Message) (Body, error) {
	data, err := m.MarshalJSON() // json.Marshal(m) would compact it again
	if err != nil {
		return Body{}, err
	}
	text, sum := EncodeJSON(k, FieldMessage, data)
	if sum == nil {
		return Body{JSON: text, Sealed: true}, nil
	}
	return Body{JSON: text, Sum: uint32(*sum)}, nil
}

// EncodeMessages returns the stored form of msgs. An error names the
// message by what ("message", "appended message") and its index in msgs:
// the index in the session only for a new session.
func EncodeMessages(k *storekey.Key, id, what string, msgs []message.Message) ([]Body, error) {
	out := make([]Body, len(msgs))
	for i := range msgs {
		var err error
		if out[i], err = EncodeMessage(k, &msgs[i]); err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("%s %d: %w", what, i, err))
		}
	}
	return out, nil
}

// Verify checks a message row's body against its stored checksum, nil for
// a row stored before the backend kept checksums and for a sealed body
// (OpenBody checks it); index names the message in errors
// (sessions.ErrCorrupt).
func Verify(index int, body []byte, sum *int64) error {
	if sum == nil || IsSealedJSON(body) {
		return nil
	}
	return sessions.VerifyChecksum(index, body, uint32(*sum))
}

// OpenBody returns a message row's JSON: a sealed body opened with k, a
// plain one as it is (Verify checks it). Decoders call it, so that
// opening runs on their workers; their errors name the message.
func OpenBody(k *storekey.Key, body []byte) ([]byte, error) {
	if !IsSealedJSON(body) {
		return body, nil
	}
	return DecodeJSON(k, FieldMessage, "body", body, nil)
}

// DecodeMessage decodes message row body (a Decoder's item) into m,
// opening it with k when it is sealed.
func DecodeMessage(k *storekey.Key, m *message.Message, body []byte) error {
	data, err := OpenBody(k, body)
	if err != nil {
		return err
	}
	return m.UnmarshalJSON(data)
}

// EventRow is the stored form of a sessions.Event.
type EventRow struct {
	Seq    int64
	Type   string
	Time   int64
	CorrID *string
	Data   *string
	Sum    *int64 // Data's checksum; nil when sealed or NULL
	Pos    *int64 // a "message" event's message row, or nil
}

// PairAppended sets the Pos of the "message" events among events to the
// rows of the messages they record, appended at positions first,
// first+1, ...: when there is exactly one such event per appended
// message (see sessions.HistoryBackend); otherwise it records none.
func PairAppended(events []EventRow, first int64, appended int) {
	var msgEvents []int
	for i := range events {
		if events[i].Type == sessions.EventMessage {
			msgEvents = append(msgEvents, i)
		}
	}
	if len(msgEvents) != appended {
		return
	}
	for k, i := range msgEvents {
		pos := first + int64(k)
		events[i].Pos = &pos
	}
}

// EncodeEvents returns the stored form of events logged on session id,
// their data sealed with k unless k is nil. An event's SessionID must be
// id or empty: it is not stored, and loads give the session's id.
func EncodeEvents(k *storekey.Key, id string, events []sessions.Event) ([]EventRow, error) {
	out := make([]EventRow, len(events))
	for i, e := range events {
		if e.SessionID != "" && e.SessionID != id {
			return nil, sessions.IDError(id, fmt.Errorf("event %d (seq %d) belongs to session %q", i, e.Seq, e.SessionID))
		}
		t, err := EncodeTime(e.Time)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("event %d: %w", e.Seq, err))
		}
		data, err := encodeObject(k, FieldEvent, e.Data)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("event %d: %w", e.Seq, err))
		}
		out[i] = EventRow{Seq: e.Seq, Type: e.Type, Time: t, CorrID: NullString(e.CorrID), Data: data.Text, Sum: data.Sum}
	}
	return out, nil
}

// encodeObject returns the stored form of JSON object payload field, m:
// sealed with k unless k is nil; nil text for a nil map.
func encodeObject(k *storekey.Key, field string, m map[string]any) (Stored, error) {
	if m == nil {
		return Stored{}, nil
	}
	data, err := jsonvalue.Encode(m)
	if err != nil {
		return Stored{}, err
	}
	text, sum := EncodeJSON(k, field, data)
	return Stored{&text, sum}, nil
}

// VerifyEventData checks event seq's stored data against its checksum
// column, nil for no checksum and for sealed data (DecodeEventData opens
// and so checks it).
func VerifyEventData(seq int64, stored []byte, sum *int64) error {
	if sum == nil || stored == nil || IsSealedJSON(stored) {
		return nil
	}
	return sessions.VerifyFieldChecksum(fmt.Sprintf("event %d data", seq), stored, uint32(*sum))
}

// DecodeEventData returns event seq's data from its stored form (nil:
// none) and checksum (nil: unchecked), opened with k when sealed.
func DecodeEventData(k *storekey.Key, seq int64, stored []byte, sum *int64) (map[string]any, error) {
	if stored == nil {
		return nil, nil
	}
	data, err := DecodeJSON(k, FieldEvent, fmt.Sprintf("event %d data", seq), stored, sum)
	if err != nil {
		return nil, err
	}
	return jsonvalue.DecodeObject(data)
}

// DecodeEvent fills e from its stored columns but the data, which the
// caller decodes (DecodeEventData): session id, time and correlation id,
// and the current name of its type (sessions.EventType).
func DecodeEvent(e *sessions.Event, id string, t int64, corrID *string) {
	e.Type = sessions.EventType(e.Type)
	e.SessionID, e.Time, e.CorrID = id, DecodeTime(t), deref(corrID)
}

// SessionRow is the stored form of a Record's own fields (not messages,
// events, lineage of children or version bookkeeping).
type SessionRow struct {
	Status             string
	Created, Updated   int64
	Summary, Metadata  Stored
	ParentID           *string
	Branched           *int64
	Title, FirstPrompt Stored
	Labels             Labels
}

// Labels are the values of the session row's columns repo_id and agent:
// the metadata's "repoId" and "agent" strings (skein serve's keys), nil
// when missing or not a string. The store writes them with every write
// of the metadata, in clear also when the metadata is sealed, so that
// listings filter on them through their indexes.
type Labels struct {
	RepoID, Agent *string
}

// SealedMetadata is a session row whose metadata is sealed, as the
// migration that adds the label columns reads it (FillLabels).
type SealedMetadata struct {
	Row      int64 // the session's row id
	ID       string
	Metadata []byte
	Sum      *int64
}

// FillLabels is the step of the migration that adds the label columns:
// the SQL fills them from plain metadata, and FillLabels calls set with
// the labels of each sealed row, opened with k. Without k, rows that hold
// any is an error that says to run skein migrate with the key.
func FillLabels(k *storekey.Key, rows []SealedMetadata, set func(row int64, l Labels) error) error {
	if len(rows) > 0 && k == nil {
		return fmt.Errorf("%d sessions have sealed metadata (the first: '%s'), whose repoId and agent this version stores in clear: run skein migrate with the store's key (--encryption-key-file or SKEIN_STORE_KEY_FILE)", len(rows), rows[0].ID)
	}
	for _, r := range rows {
		m, err := decodeObject(k, FieldMetadata, r.Metadata, r.Sum)
		if err != nil {
			return sessions.IDError(r.ID, fmt.Errorf("metadata: %w", err))
		}
		if err := set(r.Row, LabelsOf(m)); err != nil {
			return err
		}
	}
	return nil
}

// LabelsOf returns the labels of metadata m.
func LabelsOf(m map[string]any) Labels {
	str := func(key string) *string {
		if s, ok := m[key].(string); ok {
			return &s
		}
		return nil
	}
	return Labels{RepoID: str("repoId"), Agent: str("agent")}
}

// EncodeSession returns the stored form of rec's own fields, its payloads
// sealed with k unless k is nil.
func EncodeSession(k *storekey.Key, rec *sessions.Record) (*SessionRow, error) {
	r := &SessionRow{Status: string(rec.Status), ParentID: NullString(rec.ParentID),
		Title: EncodeText(k, FieldTitle, NullString(rec.Title)), FirstPrompt: EncodeText(k, FieldFirstPrompt, NullString(rec.FirstPrompt)),
		Summary: EncodeText(k, FieldSummary, rec.Summary)}
	var err error
	if r.Created, err = EncodeTime(rec.CreatedAt); err != nil {
		return nil, sessions.IDError(rec.ID, fmt.Errorf("created_at: %w", err))
	}
	if r.Updated, err = EncodeTime(rec.UpdatedAt); err != nil {
		return nil, sessions.IDError(rec.ID, fmt.Errorf("updated_at: %w", err))
	}
	if r.Metadata, err = encodeObject(k, FieldMetadata, rec.Metadata); err != nil {
		return nil, sessions.IDError(rec.ID, fmt.Errorf("metadata: %w", err))
	}
	r.Labels = LabelsOf(rec.Metadata)
	if rec.BranchedAt != nil {
		b := int64(*rec.BranchedAt)
		r.Branched = &b
	}
	return r, nil
}

// StoredSession is a session row as a load reads it: the columns of
// SessionRow plus the bookkeeping ones.
type StoredSession struct {
	Status             string
	Created, Updated   int64
	Summary, ParentID  *string
	Title, FirstPrompt *string
	Metadata           []byte
	// The payloads' checksum columns (see Stored).
	SummarySum, TitleSum, FirstPromptSum, MetadataSum *int64
	Branched                                          *int64
	Turns, MaxTurns                                   int
	State                                             State
}

// Record returns the session's record (without messages, events and
// children) and its write state, its payloads checked or opened with k.
func (s *StoredSession) Record(k *storekey.Key, id string) (*sessions.Record, error) {
	rec := &sessions.Record{ID: id, Status: sessions.Status(s.Status),
		CreatedAt: DecodeTime(s.Created), UpdatedAt: DecodeTime(s.Updated),
		Turns: s.Turns, MaxTurns: s.MaxTurns, Version: s.State.Version}
	var err error
	if rec.Metadata, err = decodeObject(k, FieldMetadata, s.Metadata, s.MetadataSum); err != nil {
		return nil, sessions.IDError(id, err)
	}
	if s.Summary != nil {
		summary, err := DecodeText(k, FieldSummary, s.Summary, s.SummarySum)
		if err != nil {
			return nil, sessions.IDError(id, err)
		}
		rec.Summary = &summary
	}
	if rec.Title, err = DecodeText(k, FieldTitle, s.Title, s.TitleSum); err != nil {
		return nil, sessions.IDError(id, err)
	}
	if rec.FirstPrompt, err = DecodeText(k, FieldFirstPrompt, s.FirstPrompt, s.FirstPromptSum); err != nil {
		return nil, sessions.IDError(id, err)
	}
	rec.ParentID = deref(s.ParentID)
	if s.Branched != nil {
		n := int(*s.Branched)
		rec.BranchedAt = &n
	}
	return rec, nil
}

// EncodeHistory returns the stored form of appended, the messages of
// some "message" events among events by seq, in seq order, and sets
// those events' Pos to the rows the messages will take: 0, 1, ... (the
// history a sessions.HistoryBackend's CreateWithHistory stores before
// the current messages).
func EncodeHistory(k *storekey.Key, id string, events []EventRow, appended map[int64]message.Message) ([]Body, error) {
	if len(appended) == 0 {
		return nil, nil
	}
	var bodies []Body
	for i := range events {
		m, ok := appended[events[i].Seq]
		if !ok {
			continue
		}
		if events[i].Type != sessions.EventMessage {
			return nil, sessions.IDError(id, fmt.Errorf("event %d is a %s event, not a message event: it appended no message", events[i].Seq, events[i].Type))
		}
		body, err := EncodeMessage(k, &m)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("message of event %d: %w", events[i].Seq, err))
		}
		pos := int64(len(bodies))
		events[i].Pos = &pos
		bodies = append(bodies, body)
	}
	if len(bodies) != len(appended) {
		return nil, sessions.IDError(id, fmt.Errorf("%d appended messages name events the session does not log", len(appended)-len(bodies)))
	}
	return bodies, nil
}

// decodeObject returns JSON object payload field from its stored form
// (nil: a nil map) and checksum column.
func decodeObject(k *storekey.Key, field string, stored []byte, sum *int64) (map[string]any, error) {
	if stored == nil {
		return nil, nil
	}
	data, err := DecodeJSON(k, field, field, stored, sum)
	if err != nil {
		return nil, err
	}
	m, err := DecodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return m, nil
}

// deref returns *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
