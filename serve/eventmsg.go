package serve

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// appended finds, for a session's event stream, the message each
// "message" event appended: a live event carries it (Event.Message); a
// stored one (the history, a catch-up with what another process wrote)
// is looked up in the session's messages, then in the backend's history
// of appended messages (sessions.HistoryBackend), which also holds those
// a trim, reset or compaction dropped since.
type appended struct {
	backend sessions.Backend
	id      string
	bySeq   map[int64]*message.Message
	// upTo is the newest seq the backend's history was read up to.
	upTo int64
}

// newAppended indexes the messages of rec by the seq of the event that
// appended them.
func newAppended(backend sessions.Backend, rec *sessions.Record) *appended {
	a := &appended{backend: backend, id: rec.ID, bySeq: make(map[int64]*message.Message, len(rec.Messages))}
	for i, st := range stamps(rec) {
		if st.seq > 0 {
			a.bySeq[st.seq] = &rec.Messages[i]
		}
	}
	return a
}

// message returns the message event e appended, or nil when it is not
// known (a memory store's message that a trim dropped).
func (a *appended) message(ctx context.Context, e *sessions.Event) *message.Message {
	if e.Message != nil {
		return e.Message
	}
	if m := a.bySeq[e.Seq]; m != nil || e.Seq <= a.upTo {
		return m
	}
	h, ok := a.backend.(sessions.HistoryBackend)
	if !ok {
		return nil
	}
	all, err := h.LoadAppended(ctx, a.id)
	if err != nil {
		return nil // the event is sent without its message
	}
	for seq, m := range all {
		a.bySeq[seq] = &m
		a.upTo = max(a.upTo, seq)
	}
	a.upTo = max(a.upTo, e.Seq)
	return a.bySeq[e.Seq]
}

// withMessage returns the JSON of event data (its MarshalJSON form) with
// a "message" key: m as the messages endpoint gives it.
func withMessage(data []byte, e *sessions.Event, m *message.Message) ([]byte, error) {
	msg, err := json.Marshal(toMessageJSON(m, stamp{seq: e.Seq, at: e.Time}))
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSuffix(data, []byte("}"))
	out := make([]byte, 0, len(data)+len(msg)+12)
	out = append(append(append(out, data...), `,"message":`...), msg...)
	return append(out, '}'), nil
}
