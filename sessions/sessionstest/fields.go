package sessionstest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// FieldMarkers are the markers RunFieldChecksumTests stores, one in each
// payload besides message bodies, by the name errors give the field.
var FieldMarkers = map[string]string{
	"title":        "field-title-0123456789",
	"summary":      "field-summary-0123456789",
	"metadata":     "field-metadata-0123456789",
	"first_prompt": "field-firstprompt-0123456789",
	"event":        "field-eventdata-0123456789",
}

// RunFieldChecksumTests checks that a durable backend stores a checksum
// with every payload besides message bodies (title, summary, metadata,
// first prompt, event data; sessions.Checksum) and verifies it on load:
// one session per field gets the field's marker (FieldMarkers) through a
// Write; after damage alters one marker's stored bytes, loading that
// session fails with sessions.ErrCorrupt naming the session and the
// field, never returning the altered value, and a listing, which reads
// the title, first prompt and metadata, fails the same way for those
// three; the other sessions still load. open and damage are as for
// RunChecksumTests.
func RunFieldChecksumTests(t *testing.T, open func(t *testing.T, path string) sessions.Backend, damage Damage) {
	for field, marker := range FieldMarkers {
		t.Run(field, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sessions.db")
			h := &harness{t: t, b: open(t, path)}
			closeFn := closeOnce(t, h.b)
			id := "damaged-" + field
			rec := h.create(newRecord(id, at(0)))
			ch := &sessions.Change{UpdatedAt: at(1)}
			switch field {
			case "title":
				ch.SetTitle, ch.Title = true, "the "+marker
			case "summary":
				s := "the " + marker
				ch.SetSummary, ch.Summary = true, &s
			case "metadata":
				ch.SetMetadata, ch.Metadata = true, map[string]any{"note": "the " + marker}
			case "first_prompt":
				ch.SetFirstPrompt, ch.FirstPrompt = true, "the "+marker
			case "event":
				ch.Events = stamp(rec, at(1), sessions.Event{Type: sessions.EventStatus, Data: map[string]any{"note": "the " + marker}})
			}
			h.write(rec, ch)
			intact := h.create(newRecord("intact", at(2)))
			closeFn()

			damage(t, path, marker)

			h = &harness{t: t, b: open(t, path)}
			closeOnce(t, h.b)
			got, err := h.b.Load(h.ctx(), id)
			h.wantErr("Load of a damaged "+field, err, sessions.ErrCorrupt, "'"+id+"'")
			if !strings.Contains(err.Error(), field) {
				t.Errorf("Load: %q does not name the damaged field %s", err, field)
			}
			if got != nil {
				t.Errorf("Load returned a record with the damaged %s", field)
			}
			if field != "summary" && field != "event" {
				_, _, err := h.b.List(h.ctx(), sessions.ListFilter{})
				h.wantErr("List with a damaged "+field, err, sessions.ErrCorrupt, "'"+id+"'")
			}
			h.check(intact)
		})
	}
}
