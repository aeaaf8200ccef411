package sessions

import (
	"context"
	"github.com/skein-dev/skein/sessions/message"
	"maps"
	"slices"
)

// EventInfo is the type of the event logged when a session's title or
// metadata change after its creation.
const EventInfo = "info"

// SetInfo updates the session's title and metadata (see Info) and logs
// an "info" event listing what changed: "title" (the new title) and
// "metadata_keys" (the keys set). It writes nothing when info is empty.
func (s *Store) SetInfo(ctx context.Context, id string, info Info) ([]Event, error) {
	if err := info.check(); err != nil {
		return nil, err
	}
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	sess.mu.Lock()
	version := sess.rec.Version
	ch := infoChange(&sess.rec, info)
	sess.mu.Unlock()
	if len(ch.Events) == 0 {
		return nil, nil
	}
	return s.write(ctx, id, ch, version, false, nil)
}

// infoChange returns the change that applies info to rec, with its "info"
// event; an empty change when info is empty.
func infoChange(rec *Record, info Info) *Change {
	ch := &Change{}
	if info.empty() {
		return ch
	}
	data := map[string]any{}
	if info.Title != nil {
		ch.SetTitle, ch.Title = true, *info.Title
		data["title"] = *info.Title
	}
	if info.Metadata != nil {
		ch.SetMetadata, ch.Metadata = true, MergeMetadata(rec.Metadata, info.Metadata)
		keys := make([]any, 0, len(info.Metadata))
		for _, k := range slices.Sorted(maps.Keys(info.Metadata)) {
			keys = append(keys, k)
		}
		data["metadata_keys"] = keys
	}
	ch.Events = []Event{{Type: EventInfo, Data: data}}
	return ch
}

// firstPromptAfter returns the session's FirstPrompt as it will be after
// ch (already checked). The caller holds s.mu. Appends to a session that
// has a first prompt keep it, and so does a compaction (a Replace that
// sets a summary): the messages it archived still began the session.
// Every other change looks at the messages, where the user message
// holding a summary (message.MetaSummary) is never a first prompt (nor,
// through it, a listing's title), also after a later trim or rewind.
func (s *Session) firstPromptAfter(ch *Change) string {
	compaction := ch.Replace && ch.SetSummary && ch.Summary != nil
	if s.rec.FirstPrompt != "" && (compaction || s.promptChecked && !ch.Replace && ch.DropFirst == 0 && ch.DropLast == 0) {
		return s.rec.FirstPrompt
	}
	var base message.View = s.transcript
	switch {
	case ch.Replace:
		base = message.NewTranscript(ch.ReplaceWith)
	case ch.DropFirst > 0:
		base = &dropped{base: s.transcript, drop: ch.DropFirst}
	case ch.DropLast > 0:
		base = s.transcript.Head(s.transcript.Len() - ch.DropLast)
	case s.promptChecked:
		base = message.Transcript{} // no user message so far: only the appended ones can have one
	}
	return FirstPrompt(&extended{base: base, extra: ch.Append})
}
