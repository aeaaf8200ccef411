package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// Exports.
//
// A session is exported in one of two formats, and ReadExport reads both
// back.
//
// JSON (WriteJSON) is one document in the shape of agent_session_snapshot:
// {"_type": "transcript", "version": 1, id, status, created_at,
// updated_at, title, summary, metadata, parent_id, child_ids, branched_at,
// turns, max_turns, first_prompt, messages, events}. max_turns is null
// when the session uses the VM's default cap; first_prompt is there only
// when it is not the first user message of messages (a compaction keeps
// the first prompt, and its summary never becomes one).
//
// JSONL (WriteJSONL) is the forensic event log, one JSON object per line,
// each with a "_type":
//
//   - "header", first: "version": 1, the session's fields as in JSON
//     (without messages and events), and "message_count" and
//     "event_count", the number of records that follow, so a truncated
//     file is refused.
//   - "event", one per event of the log, oldest first: seq, type,
//     timestamp, session_id, corr_id (when set), then the event's own
//     fields (durations, token counts, ...). A "message" event also has
//     "message": the message it appended, when the backend kept it (a
//     sessions.HistoryBackend keeps them all, also those a trim, reset or
//     compaction dropped since).
//   - "message", one per message of the current transcript, in order:
//     "index" and "message". Compaction summaries and a fork's inherited
//     messages are in no event, so an import needs these.

// ExportVersion is the version of both export formats.
const ExportVersion = 1

// sessionFields are the session's own fields in an export.
type sessionFields struct {
	ID         string          `json:"id"`
	Status     sessions.Status `json:"status"`
	CreatedAt  string          `json:"created_at"`
	UpdatedAt  string          `json:"updated_at"`
	Title      *string         `json:"title"`
	Summary    *string         `json:"summary"`
	Metadata   json.RawMessage `json:"metadata"`
	ParentID   *string         `json:"parent_id"`
	ChildIDs   []string        `json:"child_ids"`
	BranchedAt *int            `json:"branched_at"`
	Turns      int             `json:"turns"`
	MaxTurns   *int            `json:"max_turns"`
	// FirstPrompt is written only when the session's first prompt is not
	// its current transcript's first user message (a compaction kept an
	// older one): an import derives it from the messages otherwise.
	FirstPrompt *string `json:"first_prompt,omitempty"`
}

// snapshotJSON is the JSON export.
type snapshotJSON struct {
	Type    string `json:"_type"`
	Version int    `json:"version"`
	sessionFields
	Messages []message.Message `json:"messages"`
	Events   []sessions.Event  `json:"events"`
}

// headerJSON is the first record of a JSONL export.
type headerJSON struct {
	Type    string `json:"_type"`
	Version int    `json:"version"`
	sessionFields
	MessageCount int `json:"message_count"`
	EventCount   int `json:"event_count"`
}

// messageRecord is a "message" record of a JSONL export.
type messageRecord struct {
	Type    string          `json:"_type"`
	Index   int             `json:"index"`
	Message message.Message `json:"message"`
}

// Record types of a JSONL export.
const (
	recordHeader  = "header"
	recordEvent   = "event"
	recordMessage = "message"
)

func fieldsOf(rec *sessions.Record) (sessionFields, error) {
	meta := rec.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	data, err := jsonvalue.Encode(meta)
	if err != nil {
		return sessionFields{}, fmt.Errorf("metadata: %v", err)
	}
	f := sessionFields{ID: rec.ID, Status: rec.Status, CreatedAt: formatTime(rec.CreatedAt), UpdatedAt: formatTime(rec.UpdatedAt),
		Summary: rec.Summary, Metadata: data, ChildIDs: rec.ChildIDs, BranchedAt: rec.BranchedAt, Turns: rec.Turns}
	if f.ChildIDs == nil {
		f.ChildIDs = []string{}
	}
	if rec.Title != "" {
		f.Title = &rec.Title
	}
	if rec.FirstPrompt != "" && rec.FirstPrompt != sessions.FirstPrompt(message.NewTranscript(rec.Messages)) {
		f.FirstPrompt = &rec.FirstPrompt
	}
	if rec.ParentID != "" {
		f.ParentID = &rec.ParentID
	}
	if rec.MaxTurns > 0 {
		f.MaxTurns = &rec.MaxTurns
	}
	return f, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(sessions.TimeFormat) }

// WriteJSON writes rec as a JSON export.
func WriteJSON(w io.Writer, rec *sessions.Record) error {
	f, err := fieldsOf(rec)
	if err != nil {
		return err
	}
	snap := snapshotJSON{Type: "transcript", Version: ExportVersion, sessionFields: f, Messages: rec.Messages, Events: rec.Events}
	if snap.Messages == nil {
		snap.Messages = []message.Message{}
	}
	if snap.Events == nil {
		snap.Events = []sessions.Event{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(snap)
}

// WriteJSONL writes rec as a JSONL export; appended holds the messages
// of its "message" events by seq (see sessions.HistoryBackend), or nil.
func WriteJSONL(w io.Writer, rec *sessions.Record, appended map[int64]message.Message) error {
	f, err := fieldsOf(rec)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	header := headerJSON{Type: recordHeader, Version: ExportVersion, sessionFields: f,
		MessageCount: len(rec.Messages), EventCount: len(rec.Events)}
	if err := writeLine(bw, header); err != nil {
		return err
	}
	var line bytes.Buffer
	for i := range rec.Events {
		line.Reset()
		if err := eventRecord(&line, &rec.Events[i], appended); err != nil {
			return err
		}
		if _, err := bw.Write(line.Bytes()); err != nil {
			return err
		}
	}
	for i := range rec.Messages {
		if err := writeLine(bw, messageRecord{Type: recordMessage, Index: i, Message: rec.Messages[i]}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func writeLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// eventRecord writes the JSONL record of e to buf: the envelope in the
// seed's order, the event's fields in sorted order, and the message a
// "message" event appended.
func eventRecord(buf *bytes.Buffer, e *sessions.Event, appended map[int64]message.Message) error {
	field := func(k string, v any) error {
		data, err := jsonvalue.Encode(v)
		if err != nil {
			return fmt.Errorf("event %d: field %q: %v", e.Seq, k, err)
		}
		buf.WriteByte(',')
		key, _ := json.Marshal(k)
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(data)
		return nil
	}
	buf.WriteString(`{"_type":"event"`)
	envelope := []struct {
		k string
		v any
	}{{"seq", e.Seq}, {"type", e.Type}, {"timestamp", formatTime(e.Time)}, {"session_id", e.SessionID}}
	if e.CorrID != "" {
		envelope = append(envelope, struct {
			k string
			v any
		}{"corr_id", e.CorrID})
	}
	for _, kv := range envelope {
		if err := field(kv.k, kv.v); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Data)) {
		if k == "_type" || (k == "message" && e.Type == sessions.EventMessage) {
			return fmt.Errorf("event %d (%s) has a field %q, which its export record uses", e.Seq, e.Type, k)
		}
		if err := field(k, e.Data[k]); err != nil {
			return err
		}
	}
	if m, ok := appended[e.Seq]; ok && e.Type == sessions.EventMessage {
		data, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("event %d: message: %v", e.Seq, err)
		}
		buf.WriteString(`,"message":`)
		buf.Write(data)
	}
	buf.WriteString("}\n")
	return nil
}

// ReadExport reads a JSON or JSONL export or a forensic log (it tells
// them apart by the first record: a forensic header has workflow_name)
// and returns the session's record, ready for
// sessions.Backend.Create (no ChildIDs: forks record themselves; Version 0), and,
// from JSONL and forensic logs, the messages of its "message" events by seq, for
// sessions.HistoryBackend.CreateWithHistory. It checks what an import needs: a
// known version, the counts a JSONL header announces, increasing event
// seqs, and a transcript that is valid provider input (tool calls
// answered by their results; calls still open at the end are allowed, as
// in a session whose process was killed).
func ReadExport(r io.Reader) (*sessions.Record, map[int64]message.Message, error) {
	br := bufio.NewReader(r)
	first, err := readLine(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("empty export")
		}
		return nil, nil, err
	}
	var probe struct {
		Type string `json:"_type"`
	}
	if json.Unmarshal(first, &probe) == nil && probe.Type == recordHeader {
		if isForensicHeader(first) {
			return readForensic(first, br)
		}
		return readJSONL(first, br)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		return nil, nil, err
	}
	rec, err := readJSON(append(append(first, '\n'), rest...))
	return rec, nil, err
}

// readLine returns the next non-blank line of br, without its newline.
// A line that is not valid UTF-8 is an error: JSON decoding would turn
// the bad bytes into U+FFFD and import something else than the file
// holds.
func readLine(br *bufio.Reader) ([]byte, error) {
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if err := checkUTF8(line); err != nil {
				return nil, err
			}
			return bytes.TrimRight(line, "\r\n"), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// eachLine calls record with each further non-blank line of br, the
// first (line 1, the header) having been read: its errors name the line.
// It stops at the end of br or at the first error.
func eachLine(br *bufio.Reader, record func(line []byte) error) error {
	for n := 2; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := record(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
}

// checkUTF8 refuses text that is not valid UTF-8, naming the offset of
// the first bad byte.
func checkUTF8(b []byte) error {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		}
		i += n
	}
	return nil
}

func readJSON(data []byte) (*sessions.Record, error) {
	if err := checkUTF8(data); err != nil {
		return nil, err
	}
	var snap snapshotJSON
	if err := json.Unmarshal(data, &snap); err != nil {
		if derr := jsonvalue.CheckTextDepth(data); derr != nil {
			return nil, derr
		}
		return nil, fmt.Errorf("not a session export (JSON or JSONL): %v", err)
	}
	if snap.Type != "transcript" {
		return nil, fmt.Errorf("not a session export: _type is %q, want \"transcript\" (JSON) or \"header\" (JSONL)", snap.Type)
	}
	if err := checkVersion(snap.Version); err != nil {
		return nil, err
	}
	rec, err := snap.record()
	if err != nil {
		return nil, err
	}
	var raw struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(data, &raw); err == nil {
		for i, m := range raw.Messages {
			if err := message.CheckKeys(m); err != nil {
				return nil, fmt.Errorf("message %d: %v", i, err)
			}
		}
	}
	rec.Messages, rec.Events = snap.Messages, snap.Events
	return rec, checkImported(rec, nil)
}

func checkVersion(v int) error {
	if v != ExportVersion {
		return fmt.Errorf("export version %d is not supported (this skein reads version %d)", v, ExportVersion)
	}
	return nil
}

func readJSONL(first []byte, br *bufio.Reader) (*sessions.Record, map[int64]message.Message, error) {
	var header headerJSON
	if err := json.Unmarshal(first, &header); err != nil {
		return nil, nil, fmt.Errorf("line 1: header: %v", err)
	}
	if err := checkVersion(header.Version); err != nil {
		return nil, nil, err
	}
	rec, err := header.record()
	if err != nil {
		return nil, nil, fmt.Errorf("line 1: header: %v", err)
	}
	if header.MessageCount < 0 || header.EventCount < 0 {
		return nil, nil, errors.New("line 1: header: negative message_count or event_count")
	}
	appended := map[int64]message.Message{}
	err = eachLine(br, func(line []byte) error { return readRecord(line, rec, appended) })
	if err != nil {
		return nil, nil, err
	}
	if len(rec.Events) != header.EventCount || len(rec.Messages) != header.MessageCount {
		return nil, nil, fmt.Errorf("the export is incomplete: %d events and %d messages, but its header announces %d and %d",
			len(rec.Events), len(rec.Messages), header.EventCount, header.MessageCount)
	}
	return rec, appended, checkImported(rec, appended)
}

// readRecord adds one JSONL record after the header to rec and appended.
func readRecord(line []byte, rec *sessions.Record, appended map[int64]message.Message) error {
	m, err := jsonvalue.DecodeObject(line)
	if err != nil {
		return err
	}
	typ, _ := m["_type"].(string)
	delete(m, "_type")
	switch typ {
	case recordEvent:
		var msg *message.Message
		if raw, ok := m["message"]; ok && m["type"] == sessions.EventMessage {
			delete(m, "message")
			if msg, err = messageValue(raw); err != nil {
				return fmt.Errorf("event: message: %v", err)
			}
		}
		var e sessions.Event
		if err := e.SetFields(m); err != nil {
			return fmt.Errorf("event: %v", err)
		}
		if msg != nil {
			appended[e.Seq] = *msg
		}
		rec.Events = append(rec.Events, e)
	case recordMessage:
		index, ok := m["index"].(int64)
		if !ok || index != int64(len(rec.Messages)) {
			return fmt.Errorf("message record %v out of order: want index %d", m["index"], len(rec.Messages))
		}
		msg, err := messageValue(m["message"])
		if err != nil {
			return fmt.Errorf("message %d: %v", index, err)
		}
		rec.Messages = append(rec.Messages, *msg)
	case recordHeader:
		return errors.New("a second header")
	default:
		return fmt.Errorf("unknown record _type '%s' (expected event or message)", sessions.Escape(typ))
	}
	return nil
}

// messageValue converts a decoded JSON value to a message.
func messageValue(v any) (*message.Message, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s, want an object", jsonvalue.TypeName(v))
	}
	if err := message.CheckKeys(obj); err != nil {
		return nil, err
	}
	data, err := jsonvalue.Encode(v)
	if err != nil {
		return nil, err
	}
	var m message.Message
	if err := m.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return &m, nil
}

// record converts the exported session fields to a record without
// messages and events.
func (f *sessionFields) record() (*sessions.Record, error) {
	if f.ID == "" {
		return nil, errors.New("no session id")
	}
	if err := sessions.CheckID(f.ID); err != nil {
		return nil, err
	}
	if !f.Status.Valid() {
		return nil, fmt.Errorf("unknown status '%s'", sessions.Escape(string(f.Status)))
	}
	rec := &sessions.Record{ID: f.ID, Status: f.Status, Summary: f.Summary, BranchedAt: f.BranchedAt, Turns: f.Turns}
	var err error
	if rec.CreatedAt, err = time.Parse(sessions.TimeFormat, f.CreatedAt); err != nil {
		return nil, fmt.Errorf("created_at: %v", err)
	}
	if rec.UpdatedAt, err = time.Parse(sessions.TimeFormat, f.UpdatedAt); err != nil {
		return nil, fmt.Errorf("updated_at: %v", err)
	}
	if len(f.Metadata) > 0 && string(f.Metadata) != "null" {
		if rec.Metadata, err = jsonvalue.DecodeObject(f.Metadata); err != nil {
			return nil, fmt.Errorf("metadata: %v", err)
		}
		if len(rec.Metadata) == 0 {
			rec.Metadata = nil // as stored: no metadata
		}
	}
	if f.ParentID != nil {
		rec.ParentID = *f.ParentID
	}
	if f.Title != nil {
		rec.Title = *f.Title
	}
	if f.FirstPrompt != nil {
		rec.FirstPrompt = *f.FirstPrompt
	}
	if f.MaxTurns != nil {
		rec.MaxTurns = *f.MaxTurns
	}
	if rec.Turns < 0 || rec.MaxTurns < 0 || (rec.BranchedAt != nil && *rec.BranchedAt < 0) {
		return nil, errors.New("negative turns, max_turns or branched_at")
	}
	return rec, nil
}

// checkImported checks an imported record's events and transcript.
func checkImported(rec *sessions.Record, appended map[int64]message.Message) error {
	var last int64
	for i := range rec.Events {
		e := &rec.Events[i]
		if e.Seq <= last {
			return fmt.Errorf("event seq %d follows %d: seqs must increase", e.Seq, last)
		}
		last = e.Seq
		if e.SessionID != "" && e.SessionID != rec.ID {
			return fmt.Errorf("event %d belongs to session '%s', not '%s'", e.Seq, sessions.Escape(e.SessionID), rec.ID)
		}
		e.SessionID = rec.ID
		if err := sessions.CheckEvent(e); err != nil {
			return err
		}
	}
	for seq, m := range appended {
		if err := message.CheckShape(&m); err != nil {
			return fmt.Errorf("event %d: message: %v", seq, err)
		}
	}
	if err := identify(rec, appended); err != nil {
		return err
	}
	view := message.Transcript{}
	for i := range rec.Messages {
		if err := message.CheckAppend(view, &rec.Messages[i]); err != nil {
			return fmt.Errorf("message %d: %v", i, err)
		}
		view = view.Append(rec.Messages[i])
	}
	if rec.FirstPrompt == "" { // else the export's first_prompt
		rec.FirstPrompt = sessions.FirstPrompt(view)
	}
	return nil
}

// identify keeps the ids and times of imported messages and gives those
// of an export written before messages had them (or edited by hand) ones
// derived from where they are in the export (sessions.DerivedMessageID):
// the same file imports with the same ids every time. A message of the
// history (a "message" event's) gets its event's time, a current message
// the session's creation time. An id used twice among the current
// messages, or among the history's, is refused: ids are unique in a
// session (the same message may be in both).
func identify(rec *sessions.Record, appended map[int64]message.Message) error {
	seen := map[string]int{}
	for i := range rec.Messages {
		m := &rec.Messages[i]
		if m.CreatedAt.IsZero() {
			m.CreatedAt = rec.CreatedAt.UTC()
		}
		if m.ID == "" {
			m.ID = sessions.DerivedMessageID(m.CreatedAt, fmt.Sprintf("%s/message/%d", rec.ID, i))
		}
		if j, dup := seen[m.ID]; dup {
			return fmt.Errorf("message %d: id %q is message %d's too: a message id is unique in a session", i, m.ID, j)
		}
		seen[m.ID] = i
	}
	if len(appended) == 0 {
		return nil
	}
	times := make(map[int64]time.Time, len(appended))
	for i := range rec.Events {
		times[rec.Events[i].Seq] = rec.Events[i].Time
	}
	seqs := slices.Sorted(maps.Keys(appended))
	bySeq := map[string]int64{}
	for _, seq := range seqs {
		m := appended[seq]
		if m.CreatedAt.IsZero() {
			m.CreatedAt = times[seq].UTC()
		}
		if m.ID == "" {
			m.ID = sessions.DerivedMessageID(m.CreatedAt, fmt.Sprintf("%s/event/%d", rec.ID, seq))
		}
		if other, dup := bySeq[m.ID]; dup {
			return fmt.Errorf("event %d: message id %q is event %d's too: a message id is unique in a session", seq, m.ID, other)
		}
		bySeq[m.ID] = seq
		appended[seq] = m
	}
	return nil
}

// Rename gives an imported record another id: its events move with it.
func Rename(rec *sessions.Record, id string) {
	rec.ID = id
	for i := range rec.Events {
		rec.Events[i].SessionID = id
	}
}
